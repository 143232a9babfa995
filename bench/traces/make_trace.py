#!/usr/bin/env python3
"""Writes the workload trace of the trace benchmark (bench/trace_bench.cc), deterministically.

    python3 bench/traces/make_trace.py > bench/traces/trace-v1.json

400 jobs of TPU v4 slices arriving over about 5 simulated hours (a Poisson process of 80 jobs
an hour), fixed seed 20261201: the same file on every run. Sizes (slice chips): v4-8 (4) 30%,
v4-16 (8) 25%, v4-32 (16) 20%, v4-64 (32) 15%, v4-128 (64) 10%. Durations: log-uniform between
10 minutes and 3 hours, rounded to the minute. Each job has a user priority (low, medium, high:
what xpk's --priority gets; the fleet admits high first).
"""
import json
import math
import random

SEED = 20261201
JOBS = 400
RATE_PER_HOUR = 80.0
SIZES = [("v4-8", 0.30), ("v4-16", 0.25), ("v4-32", 0.20), ("v4-64", 0.15), ("v4-128", 0.10)]


def main():
    rng = random.Random(SEED)
    t = 0.0
    jobs = []
    for i in range(JOBS):
        t += rng.expovariate(RATE_PER_HOUR / 3600.0)
        r = rng.random()
        acc = SIZES[-1][0]
        for name, p in SIZES:
            if r < p:
                acc = name
                break
            r -= p
        duration = math.exp(rng.uniform(math.log(600), math.log(10800)))
        jobs.append({
            "name": f"j{i:03d}",
            "arrival_s": int(t),
            "accelerator": acc,
            "duration_s": int(round(duration / 60.0)) * 60,
            "priority": rng.choice(["low", "medium", "medium", "high"]),
        })
    print(json.dumps({"seed": SEED, "jobs": jobs}, indent=1))


if __name__ == "__main__":
    main()
