#!/usr/bin/env python3
"""Writes the workload traces of the trace benchmark (bench/trace_bench.cc), deterministically.

    python3 bench/traces/make_trace.py > bench/traces/trace-v1.json
    python3 bench/traces/make_trace.py overload > bench/traces/trace-overload.json
    python3 bench/traces/make_trace.py bursty > bench/traces/trace-bursty.json
    python3 bench/traces/make_trace.py overload-2 > bench/traces/trace-overload-2.json
    python3 bench/traces/make_trace.py bursty-2 > bench/traces/trace-bursty-2.json

Every trace is a list of TPU v4 slice jobs with a user priority (low, medium, high: what xpk's
--priority gets; each cluster's Kueue admits high first). The benchmark fleet has 1,696 chips.

v1 (seed 20261201): 400 jobs arriving over about 5 simulated hours, a Poisson process of 80 jobs
an hour. Sizes (slice chips): v4-8 (4) 30%, v4-16 (8) 25%, v4-32 (16) 20%, v4-64 (32) 15%,
v4-128 (64) 10%. Durations log-uniform between 10 minutes and 3 hours, rounded to the minute.
About 72% of the fleet's chips on average.

overload (seed 20261202): the v1 mix, arriving at 1.6 times what the fleet can hold for two hours
(180 jobs an hour), then 40 an hour for another hour: 400 jobs at most. A third are high
priority, as in v1 a quarter.

bursty (seed 20261203): heavy-tailed and bursty, shaped like public cluster traces (Philly,
Helios: most jobs short, a few very long; arrivals that follow the working day and come in
bursts). Durations log-normal, median 20 minutes, sigma 1.4, between 2 minutes and 12 hours.
Arrivals over 10 hours: a rate that rises and falls as a day does (20 to 70 jobs an hour), plus a
burst every 90 minutes or so of 15 to 30 jobs within 5 minutes (a sweep submitted at once, all
of one size). Sizes skew larger than v1 (v4-64 and v4-128 each 20%).

overload-2 (seed 20261204) and bursty-2 (seed 20261205): the overload and bursty generators
with other seeds, added on 2026-12-04 as traces the policies had not seen (nothing in falcon was
changed after looking at them).
"""
import json
import math
import random
import sys

SIZES_V1 = [("v4-8", 0.30), ("v4-16", 0.25), ("v4-32", 0.20), ("v4-64", 0.15), ("v4-128", 0.10)]
SIZES_LARGE = [("v4-8", 0.20), ("v4-16", 0.20), ("v4-32", 0.20), ("v4-64", 0.20), ("v4-128", 0.20)]


def pick_size(rng, sizes):
    r = rng.random()
    for name, p in sizes:
        if r < p:
            return name
        r -= p
    return sizes[-1][0]


def log_uniform_minutes(rng, low_s, high_s):
    d = math.exp(rng.uniform(math.log(low_s), math.log(high_s)))
    return int(round(d / 60.0)) * 60


def v1():
    rng = random.Random(20261201)
    t = 0.0
    jobs = []
    for i in range(400):
        t += rng.expovariate(80.0 / 3600.0)
        acc = pick_size(rng, SIZES_V1)
        jobs.append({
            "name": f"j{i:03d}",
            "arrival_s": int(t),
            "accelerator": acc,
            "duration_s": log_uniform_minutes(rng, 600, 10800),
            "priority": rng.choice(["low", "medium", "medium", "high"]),
        })
    return 20261201, jobs


def overload(seed=20261202):
    rng = random.Random(seed)
    t = 0.0
    jobs = []
    while len(jobs) < 400:
        rate = 180.0 if t < 7200 else 40.0
        t += rng.expovariate(rate / 3600.0)
        if t > 3 * 3600:
            break
        jobs.append({
            "name": f"o{len(jobs):03d}",
            "arrival_s": int(t),
            "accelerator": pick_size(rng, SIZES_V1),
            "duration_s": log_uniform_minutes(rng, 600, 10800),
            "priority": rng.choice(["low", "medium", "high"]),
        })
    return seed, jobs


def bursty(seed=20261203):
    rng = random.Random(seed)
    horizon = 10 * 3600
    arrivals = []
    # The day: a non-homogeneous Poisson process by thinning, 20..70 jobs an hour.
    peak = 70.0 / 3600.0
    t = 0.0
    while True:
        t += rng.expovariate(peak)
        if t >= horizon:
            break
        rate = (45.0 - 25.0 * math.cos(2 * math.pi * t / horizon)) / 3600.0
        if rng.random() < rate / peak:
            arrivals.append((t, None))
    # The bursts: a sweep of one size every ~90 minutes.
    b = rng.uniform(600, 3600)
    while b < horizon:
        size = pick_size(rng, SIZES_LARGE)
        for _ in range(rng.randint(15, 30)):
            arrivals.append((b + rng.uniform(0, 300), size))
        b += rng.expovariate(1.0 / 5400.0) + 1800
    arrivals.sort(key=lambda a: a[0])
    jobs = []
    for i, (t, size) in enumerate(arrivals):
        d = math.exp(rng.gauss(math.log(1200), 1.4))
        d = min(max(d, 120), 12 * 3600)
        jobs.append({
            "name": f"b{i:03d}",
            "arrival_s": int(t),
            "accelerator": size or pick_size(rng, SIZES_LARGE),
            "duration_s": int(round(d / 60.0)) * 60,
            "priority": rng.choice(["low", "low", "medium", "high"]),
        })
    return seed, jobs


def main():
    kind = sys.argv[1] if len(sys.argv) > 1 else "v1"
    makers = {
        "v1": v1,
        "overload": overload,
        "bursty": bursty,
        # The same kinds with other seeds, written after the policies were last changed.
        "overload-2": lambda: overload(20261204),
        "bursty-2": lambda: bursty(20261205),
    }
    if kind not in makers:
        sys.exit(f"make_trace: unknown kind {kind!r} ({', '.join(makers)})")
    seed, jobs = makers[kind]()
    print(json.dumps({"seed": seed, "jobs": jobs}, indent=1))


if __name__ == "__main__":
    main()
