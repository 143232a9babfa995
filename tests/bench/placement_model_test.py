#!/usr/bin/env python3
"""bench/placement_model.py: every policy finishes every job of a real trace without two
workloads on one chip (the model raises on a double use), waits are what the rules imply, and
a run is deterministic.

  placement_model_test.py --source DIR
"""
import argparse
import copy
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree

p = argparse.ArgumentParser()
p.add_argument("--source", required=True)
args = p.parse_args()
sys.path.insert(0, f"{args.source}/bench")
import placement_model as m  # noqa: E402

jobs = m.load(f"{args.source}/bench/traces/trace-overload.json")[:200]  # overloaded by then


def run(policy, **options):
    return m.Run(copy.deepcopy(jobs), policy, 600, **options).go()


failures = []


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


aao = run("allatonce")
check("deterministic", run("allatonce") == aao)
central = run("central")
check("without eviction nothing is evicted",
      aao["evictions"] == 0 and central["evictions"] == 0 and aao["lost_chip_h"] == 0)
one = run("central", preempt_after_s=0)
check("preempting on one cluster lowers the high-priority mean",
      one["high"] < central["high"] and one["evictions"] > 0)
every = run("allatonce", preempt=True)
check("every worker preempting evicts more than one cluster preempting",
      every["evictions"] > one["evictions"])
later = run("central", preempt_after_s=480)
check("preempting later evicts no more", later["evictions"] <= one["evictions"])
small = run("central", order="small-first")
check("smallest slice first lowers the mean", small["mean"] < central["mean"])
# A lone job waits 0 everywhere but on the cluster that starts it 60 s late, which it avoids.
lone = [dict(jobs[0], arrival_s=0)]
r = m.Run(copy.deepcopy(lone), "central").go()
check("a lone job waits 0", r["mean"] == 0)
sys.exit(1 if failures else 0)
