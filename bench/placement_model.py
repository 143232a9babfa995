#!/usr/bin/env python3
"""A seconds-fast model of trace_bench's fleet, to ask which placement rules could meet
issue 29's overload targets before building one in C++ (a trace_bench run of one policy on an
overload trace takes 17-21 minutes; this takes about a second).

It is a model, not the benchmark: no probes, no breakers, no flaky creates, no renominations.
What it keeps: the 9 clusters of bench/trace_bench.cc `shapes()` with their blocks of chips,
first-fit placement of a slice in one block (the fleet simulator's `place_slices`), slot
priorities, tpu-central's 60 s start delay, tpu-flap unreachable 15 min of every hour (no new
placements there, as falcon's probes see it; AllAtOnce's copies made before stay and may be
admitted there, but the manager makes no copy on it while it is down, and makes the missing
ones when it is back, as the fleet's manager does), and Kueue's BestEffortFIFO admission
(priority, then age; a workload that does not fit is skipped).

Policies:
  allatonce            a copy on every worker it can reach; each worker admits as Kueue does at
                       every job end and arrival; the first admission wins. --preempt adds Kueue's
                       `withinClusterQueue: LowerPriority` on every worker: each worker holding
                       a copy evicts lower-priority workloads for it (most recently started
                       first), the first admission wins, the other workers' evictions stand.
  central              falcon's late binding (the Dispatcher / the direct held queue): every
                       5 s the held jobs, high priority first then by arrival, each onto the
                       cluster where it fits now with the smallest start delay, then the
                       tightest fit of the largest free block, slot priority, fewer running,
                       file order. reserve=first keeps the first held job's closest cluster from
                       lower priorities. preempt_after_s=N: a high-priority job held N s evicts
                       lower-priority workloads on ONE cluster (the fewest victims, then the
                       least work lost). victims= says which clusters it picks from:
                         exact        where Kueue's own choice, knowing every chip, makes room
                                      (an oracle; the default)
                         counted      where the free chips and the lower-priority chips, in
                                      Kueue's order, add up to the slice (the Dispatcher before
                                      2026-12-07); where Kueue then finds no run for it nothing
                                      is evicted, the nomination is unconfirmed, the job waits
                                      dispatch.preempt_confirm_s (120 s), and that cluster is
                                      not picked for a slice as large at no higher priority
                                      until a job of at least that priority ends there
                         whole-slice  where a lower-priority workload holds a slice at least as
                                      large (the Dispatcher since 2026-12-07: evicting it frees
                                      a run the slice fits in); the first in Kueue's order
                       order=small-first takes the held jobs of one
                       priority smallest slice first (a proxy for shortest-job-first: falcon
                       never knows a job's duration), not by arrival; order=small-lower
                       does so for low and medium priority only (high by arrival).
An evicted workload resumes from its last checkpoint (--checkpoint-s; 0: from the start).

--overload-seeds A:B runs the overload generator of bench/traces/make_trace.py with each seed
from A to B (inclusive) instead of trace files, and prints per rule the mean and standard
deviation over the traces of its ratios to AllAtOnce (mean, p95, high-priority mean) and on how
many traces it meets each of issue 29's overload targets (mean and p95 no worse than
AllAtOnce's, high-priority mean at least 30% below it) and all three at once: what one trace's
comparison is worth, as traces of one kind differ.

Wait, for every policy: completion - arrival - duration (with no eviction, start - arrival, as
trace_bench measures it).

  bench/placement_model.py bench/traces/trace-overload.json [more traces] [--checkpoint-s 600]
  bench/placement_model.py --overload-seeds 1:20
"""
import argparse
import copy
import heapq
import json
import math
import os
import statistics
import sys

# bench/trace_bench.cc shapes(): name, blocks, slot priority, start delay (s), flaps.
SHAPES = [
    ("tpu-east-1", [128, 128], 1, 0, False),
    ("tpu-east-frag", [64, 64, 32, 32, 32], 1, 0, False),
    ("tpu-flaky", [128, 64], 1, 0, False),
    ("tpu-flap", [128, 128], 1, 0, True),
    ("tpu-west-big", [256], 2, 0, False),
    ("tpu-west-small", [32, 32, 32, 32], 2, 0, False),
    ("tpu-central", [128, 32, 32], 2, 60, False),
    ("tpu-south", [64, 64], 3, 0, False),
    ("tpu-tiny", [16, 16, 16, 16], 3, 0, False),
]
SLICE_CHIPS = {"v4-8": 4, "v4-16": 8, "v4-32": 16, "v4-64": 32, "v4-128": 64}
RANK = {"high": 3, "medium": 2, "low": 1}
RETRY_S = 5
CONFIRM_S = 120  # dispatch.preempt_confirm_s
FLAP_UP_S = 2700  # into each hour, a flapping cluster is reachable again


class Cluster:
    def __init__(self, index, shape):
        self.index = index
        self.name, blocks, self.priority, self.delay, self.flaps = shape
        self.blocks = [[False] * b for b in blocks]
        self.largest = max(blocks)
        self.running = []
        self.no_room = set()  # victims=counted: (chips, rank) it did not preempt for

    def down(self, t):
        # fleet flap {period_s: 3600, down_s: 900, offset_s: 1800}: down from 1800 s into each
        # hour, up again at FLAP_UP_S
        return self.flaps and (t + 1800) % 3600 < 900

    def offers(self, job):
        return job["chips"] <= self.largest

    def find(self, chips):
        """(block, first chip) of the first free run of `chips`, or None."""
        for b, block in enumerate(self.blocks):
            run = 0
            for i, used in enumerate(block):
                run = 0 if used else run + 1
                if run == chips:
                    return b, i + 1 - chips
        return None

    def mark(self, placed, used):
        for b, first, chips in placed:
            for i in range(first, first + chips):
                if self.blocks[b][i] == used:
                    raise AssertionError(f"{self.name}: block {b} chip {i} is already "
                                         f"{'used' if used else 'free'}")
                self.blocks[b][i] = used

    def free_runs(self):
        runs = []
        for block in self.blocks:
            run = 0
            for used in block + [True]:
                if used:
                    if run:
                        runs.append(run)
                    run = 0
                else:
                    run += 1
        return runs

    def victims_for(self, job):
        """The lower-priority workloads whose eviction lets `job` fit (Kueue's order: lowest
        priority, then most recently started), or None when evicting all of them would not."""
        saved = [block[:] for block in self.blocks]
        chosen = []
        for v in sorted((r for r in self.running if r["rank"] < job["rank"]),
                        key=lambda r: (r["rank"], -r["start"])):
            self.mark(v["placed"], False)
            chosen.append(v)
            if self.find(job["chips"]):
                break
        fits = self.find(job["chips"]) is not None
        self.blocks = saved
        return chosen if fits else None


class Run:
    def __init__(self, jobs, policy, checkpoint_s=0, **options):
        self.jobs = jobs
        self.policy = policy
        self.checkpoint_s = checkpoint_s
        self.options = options
        self.clusters = [Cluster(i, s) for i, s in enumerate(SHAPES)]
        self.ends = []  # (end, cluster, seq, incarnation)
        self.waiting = []
        self.evictions = 0
        self.lost_chip_s = 0
        self.unconfirmed = 0  # victims=counted: nominations where Kueue found no room
        # Remote copies a manager creates: central, one per placement (an evicted job is placed
        # again) and one per unconfirmed nomination; AllAtOnce, one on every worker that offers
        # the type each time a job waits (on arrival, after an eviction; on a flapping worker,
        # once it is back if it was down then).
        self.objects = 0

    def wait(self, job, t):
        self.waiting.append(job)
        if self.policy == "allatonce":
            # The manager makes copies on the workers it can reach; a flapping worker gets its
            # copy when it is back (allatonce_pass).
            job["copies"] = {c.index for c in self.clusters if c.offers(job) and not c.down(t)}
            self.objects += len(job["copies"])

    def start(self, job, cluster, t):
        if self.policy == "central":
            self.objects += 1
        placed = []
        b, first = cluster.find(job["chips"])
        placed.append((b, first, job["chips"]))
        cluster.mark(placed, True)
        job.update(placed=placed, start=t + cluster.delay, cluster=cluster.index)
        job["incarnation"] = job.get("incarnation", 0) + 1
        cluster.running.append(job)
        heapq.heappush(self.ends, (job["start"] + job["left"], cluster.index, job["seq"],
                                   job["incarnation"]))

    def evict(self, cluster, victims, t):
        for v in victims:
            cluster.mark(v["placed"], False)
            cluster.running.remove(v)
            ran = max(0, t - v["start"])
            kept = ran // self.checkpoint_s * self.checkpoint_s if self.checkpoint_s else 0
            v["left"] -= kept
            self.lost_chip_s += (ran - kept) * v["chips"]
            self.evictions += 1
            del v["start"]
            self.wait(v, t)

    def order(self):
        if self.options.get("order") == "small-first":
            return sorted(self.waiting, key=lambda j: (-j["rank"], j["chips"], j["seq"]))
        if self.options.get("order") == "small-lower":
            return sorted(self.waiting, key=lambda j: (-j["rank"], j["chips"] if j["rank"] < 3
                                                       else 0, j["seq"]))
        return sorted(self.waiting, key=lambda j: (-j["rank"], j["seq"]))

    def allatonce_pass(self, t):
        for c in self.clusters:
            if not c.down(t):
                for job in self.waiting:
                    if c.offers(job) and c.index not in job["copies"]:
                        job["copies"].add(c.index)
                        self.objects += 1
            for job in self.order():
                if "start" in job or c.index not in job["copies"]:
                    continue
                if c.find(job["chips"]):
                    self.start(job, c, t)
                    continue
                if not self.options.get("preempt"):
                    continue
                victims = c.victims_for(job)
                if victims is None:
                    continue
                self.evict(c, victims, t)
                self.start(job, c, t)
                # Every other worker's Kueue acts on its own copy at once.
                for other in self.clusters:
                    if other is c or other.index not in job["copies"] or other.find(job["chips"]):
                        continue
                    wasted = other.victims_for(job)
                    if wasted:
                        self.evict(other, wasted, t)
        self.waiting = [j for j in self.waiting if "start" not in j]

    def central_pass(self, t):
        reserved = {}  # cluster index -> the priority it is kept for
        none_for = set()
        for job in self.order():
            if job["accelerator"] in none_for:
                continue
            candidates = []
            for c in self.clusters:
                if not c.offers(job) or c.down(t):
                    continue
                if reserved.get(c.index, 0) > job["rank"] or not c.find(job["chips"]):
                    continue
                fit = max(c.free_runs()) - job["chips"]
                candidates.append(((c.delay, fit, c.priority, len(c.running), c.index), c))
            if candidates:
                self.start(job, min(candidates, key=lambda x: x[0])[1], t)
                continue
            after = self.options.get("preempt_after_s")
            if (after is not None and job["rank"] == 3 and t - job["arrival_s"] >= after
                    and job.get("confirm_at", t) <= t):
                best = self.preemption(job, t)
                if best:
                    c = best[1]
                    victims = c.victims_for(job)
                    if victims is not None:
                        self.evict(c, victims, t)
                        self.start(job, c, t)
                        continue
                    # Counted enough chips where Kueue finds no run: nothing evicted.
                    c.no_room.add((job["chips"], job["rank"]))
                    job["confirm_at"] = t + CONFIRM_S
                    self.unconfirmed += 1
                    self.objects += 1
            none_for.add(job["accelerator"])
            if self.options.get("reserve") == "first" and not reserved:
                # The closest to room: the largest free block, then the most free chips.
                room = [((max(c.free_runs(), default=0), sum(c.free_runs())), c.index)
                        for c in self.clusters if c.offers(job)]
                reserved[max(room)[1]] = job["rank"]
        self.waiting = [j for j in self.waiting if "start" not in j]

    def preemption(self, job, t):
        """(cost, cluster) of the one cluster `job` preempts on under the victims= rule, or
        None. The cost: the fewest victims, then the least work lost, then file order."""
        rule = self.options.get("victims", "exact")
        best = None
        for c in self.clusters:
            if not c.offers(job) or c.down(t):
                continue
            lower = sorted((r for r in c.running if r["rank"] < job["rank"]),
                           key=lambda r: (r["rank"], -r["start"]))
            if rule == "exact":
                victims = c.victims_for(job)
            elif rule == "whole-slice":
                whole = [r for r in lower if r["chips"] >= job["chips"]]
                victims = whole[:1] or None
            elif rule == "counted":
                if (job["chips"], job["rank"]) in c.no_room:
                    continue
                room, victims = sum(c.free_runs()), []
                for r in lower:
                    if room >= job["chips"]:
                        break
                    room += r["chips"]
                    victims.append(r)
                if room < job["chips"] or not victims:
                    victims = None
            else:
                raise ValueError(f"victims={rule!r}: expected exact, counted or whole-slice")
            if victims is None:
                continue
            cost = (len(victims), sum(v["chips"] * (t - v["start"]) for v in victims), c.index)
            if best is None or cost < best[0]:
                best = (cost, c)
        return best

    def go(self):
        arrivals = sorted(self.jobs, key=lambda j: (j["arrival_s"], j["seq"]))
        by_seq = {j["seq"]: j for j in self.jobs}
        a, t = 0, 0
        while a < len(arrivals) or self.waiting or self.ends:
            due = []
            if a < len(arrivals):
                due.append(arrivals[a]["arrival_s"])
            if self.ends:
                due.append(self.ends[0][0])
            if self.waiting and self.policy == "central":
                due.append((t // RETRY_S + 1) * RETRY_S)
            if self.waiting and self.policy == "allatonce":
                due.append((t - FLAP_UP_S) // 3600 * 3600 + 3600 + FLAP_UP_S)  # copies made
            t = max(t, min(due))
            while self.ends and self.ends[0][0] <= t:
                end, c, seq, incarnation = heapq.heappop(self.ends)
                job = by_seq[seq]
                if job.get("incarnation") != incarnation or "start" not in job:
                    continue  # evicted since
                job["done"] = end
                # A job of at least a preemptor's priority leaving may make the room it lacked.
                self.clusters[c].no_room = {k for k in self.clusters[c].no_room
                                            if k[1] > job["rank"]}
                self.clusters[c].mark(job["placed"], False)
                self.clusters[c].running.remove(job)
                if self.policy == "allatonce":
                    self.allatonce_pass(end)
            while a < len(arrivals) and arrivals[a]["arrival_s"] <= t:
                self.wait(arrivals[a], t)
                a += 1
            if self.policy == "allatonce":
                self.allatonce_pass(t)
            else:
                self.central_pass(t)
        return self.summary()

    def summary(self):
        def wait(j):
            return (j["done"] - j["duration_s"] - j["arrival_s"]) / 60

        for j in self.jobs:
            if "done" not in j or wait(j) < -1e-9:
                raise AssertionError(f"{j['name']}: never finished, or finished before it could")
        waits = sorted(wait(j) for j in self.jobs)
        out = {"mean": sum(waits) / len(waits),
               "p95": waits[max(0, math.ceil(0.95 * len(waits)) - 1)]}
        for name in ("high", "medium", "low"):
            w = [wait(j) for j in self.jobs if j["priority"] == name]
            out[name] = sum(w) / len(w) if w else 0.0
        out["evictions"] = self.evictions
        out["lost_chip_h"] = self.lost_chip_s / 3600
        out["unconfirmed"] = self.unconfirmed
        out["objects"] = self.objects / len(self.jobs)
        return out


def load(path):
    return prepared(json.load(open(path))["jobs"])


def prepared(jobs):
    """A trace's jobs with what the model keeps on each."""
    for seq, j in enumerate(jobs):
        j.update(seq=seq, chips=SLICE_CHIPS[j["accelerator"]], rank=RANK[j["priority"]],
                 left=j["duration_s"])
    return jobs


# The Dispatcher's preemption (reserve first, preempt after 480 s) with each victims= rule.
DISPATCHER_VARIANTS = [
    (f"reserve first, preempt after 480 s, {rule} victims", "central",
     {"reserve": "first", "preempt_after_s": 480, "victims": rule})
    for rule in ("exact", "counted", "whole-slice")
]
# The rules --overload-seeds compares, AllAtOnce first (the ratios' base).
SEED_VARIANTS = [
    ("allatonce", "allatonce", {}),
    ("central", "central", {}),
    ("central, reserve first", "central", {"reserve": "first"}),
    ("central, preempt after 480 s", "central", {"preempt_after_s": 480}),
    ("central, preempt after 1200 s", "central", {"preempt_after_s": 1200}),
    ("central, smallest slice first", "central", {"order": "small-first"}),
    ("central, lower priorities smallest first", "central", {"order": "small-lower"}),
    ("the same, preempt after 480 s", "central",
     {"order": "small-lower", "preempt_after_s": 480}),
] + DISPATCHER_VARIANTS
# Issue 29's overload targets, as ratios to AllAtOnce: mean, p95, high-priority mean.
TARGETS = {"mean": 1.0, "p95": 1.0, "high": 0.7}
MAX_OBJECTS = 1.1  # and remote objects per job, not a ratio


def overload_trace(seed):
    """bench/traces/make_trace.py's overload trace for `seed`, prepared."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "traces"))
    try:
        import make_trace
    finally:
        sys.path.pop(0)
    return prepared(make_trace.overload(seed)[1])


def seed_table(seeds, variants=SEED_VARIANTS, checkpoint_s=600):
    """label -> {"mean": (avg, sd), ..., "met": {target: count}, "all": count} over `seeds`."""
    ratios = {label: [] for label, _, _ in variants}
    for seed in seeds:
        jobs = overload_trace(seed)
        base = None
        for label, policy, options in variants:
            r = Run(copy.deepcopy(jobs), policy, checkpoint_s, **options).go()
            base = base or r
            ratios[label].append({k: r[k] / max(base[k], 1e-9) for k in TARGETS})
            ratios[label][-1]["objects"] = r["objects"]
    table = {}
    for label, rows in ratios.items():
        row = {}
        for k in TARGETS:
            xs = [x[k] for x in rows]
            row[k] = (statistics.mean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0)
        row["met"] = {k: sum(x[k] <= TARGETS[k] + 1e-9 for x in rows) for k in TARGETS}
        objects = [x["objects"] for x in rows]
        row["objects"] = (statistics.mean(objects),
                          statistics.stdev(objects) if len(objects) > 1 else 0.0)
        row["objects_met"] = sum(x <= MAX_OBJECTS + 1e-9 for x in objects)
        row["all"] = sum(all(x[k] <= TARGETS[k] + 1e-9 for k in TARGETS) for x in rows)
        table[label] = row
    return table


def print_seed_table(first, last, checkpoint_s):
    n = last - first + 1
    print(f"overload traces, seeds {first}-{last} ({n}); ratio to AllAtOnce, mean ± sd over the "
          f"traces; traces meeting mean <= 1, p95 <= 1, high <= 0.7, and all three; remote "
          f"objects per job, and traces with at most {MAX_OBJECTS}")
    print(f"  {'policy':56} {'x mean':>12} {'x p95':>12} {'x high':>12} {'met':>10} {'all':>4}"
          f" {'objects':>12} {'met':>4}")
    for label, row in seed_table(range(first, last + 1), checkpoint_s=checkpoint_s).items():
        cells = " ".join(f"{row[k][0]:6.3f}±{row[k][1]:.3f}" for k in TARGETS)
        met = "/".join(str(row["met"][k]) for k in TARGETS)
        objects = f"{row['objects'][0]:6.3f}±{row['objects'][1]:.3f}"
        print(f"  {label:56} {cells} {met:>10} {row['all']:4d} {objects} {row['objects_met']:4d}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("traces", nargs="*")
    p.add_argument("--checkpoint-s", type=int, default=600)
    p.add_argument("--overload-seeds", metavar="A:B",
                   help="generated overload traces with seeds A to B instead of trace files")
    args = p.parse_args()
    if args.overload_seeds:
        try:
            first, last = (int(x) for x in args.overload_seeds.split(":"))
        except ValueError:
            p.error(f"--overload-seeds {args.overload_seeds!r}: expected A:B, two integers")
        if last < first:
            p.error(f"--overload-seeds {args.overload_seeds!r}: B is less than A")
        print_seed_table(first, last, args.checkpoint_s)
        return
    if not args.traces:
        p.error("give trace files or --overload-seeds A:B")
    variants = [
        ("allatonce", "allatonce", {}),
        ("allatonce, LowerPriority preemption", "allatonce", {"preempt": True}),
        ("central", "central", {}),
        ("central, reserve first", "central", {"reserve": "first"}),
    ] + [(f"central, preempt one cluster after {s} s", "central", {"preempt_after_s": s})
         for s in (0, 120, 480, 1200)] + [
        ("central, smallest slice first", "central", {"order": "small-first"}),
        ("central, smallest first, preempt after 480 s", "central",
         {"order": "small-first", "preempt_after_s": 480}),
        ("central, lower priorities smallest first", "central", {"order": "small-lower"}),
        ("the same, preempt after 480 s", "central",
         {"order": "small-lower", "preempt_after_s": 480}),
    ] + DISPATCHER_VARIANTS
    for path in args.traces:
        jobs = load(path)
        print(f"{path} ({len(jobs)} jobs; checkpoint every {args.checkpoint_s} s; minutes)")
        print(f"  {'policy':56} {'mean':>6} {'p95':>6} {'high':>6} {'medium':>6} {'low':>6}"
              f" {'x mean':>6} {'x high':>6} {'evict':>5} {'lost chip-h':>11} {'unconf':>6}"
              f" {'objects':>7}")
        base = None
        for label, policy, options in variants:
            r = Run(copy.deepcopy(jobs), policy, args.checkpoint_s, **options).go()
            base = base or r
            print(f"  {label:56} {r['mean']:6.2f} {r['p95']:6.1f} {r['high']:6.2f}"
                  f" {r['medium']:6.2f} {r['low']:6.2f} {r['mean'] / base['mean']:6.2f}"
                  f" {r['high'] / max(base['high'], 1e-9):6.2f} {r['evictions']:5d}"
                  f" {r['lost_chip_h']:11.0f} {r['unconfirmed']:6d} {r['objects']:7.2f}")


if __name__ == "__main__":
    main()
