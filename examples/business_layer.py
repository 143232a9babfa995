#!/usr/bin/env python3
"""The spec's typical business-layer flow over the cluster layer, in Python (`import falcon`).

A benchmark session as the Service Layer runs it: choose a cluster for the accelerator, submit
the workload, poll its status until it is done, parse rank 0's log for metrics (streamed, pages
read as the loop asks), archive every rank's log to Cloud Storage. Retries, sessions and metric
storage are the business layer's; this script shows the calls and the errors to handle.

    PYTHONPATH=build/release-werror/python /usr/bin/python3 examples/business_layer.py --config repos.yaml

Against the local fleet: README.md, "Python". Exit status: 0 when the workload completed and
its logs were archived; 1 when it failed; 2 when no cluster could take it or it could not be
submitted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Optional

import falcon

METRIC = re.compile(r"step=(\d+) loss=([0-9.]+) step_time=([0-9.]+)s")


def submit(fabric: falcon.ClusterFabric, spec: falcon.WorkloadSpec,
           attempts: int = 2) -> tuple[falcon.ClusterSelection, falcon.WorkloadHandle]:
    """select -> submit is not atomic (the spec): when the chosen cluster refuses, select again."""
    last: Optional[falcon.WorkloadSubmitError] = None
    for _ in range(attempts):
        selection = fabric.select_cluster(spec.accelerator_type)
        try:
            return selection, fabric.submit_workload(selection.selected_cluster, spec)
        except falcon.WorkloadSubmitError as e:
            print(f"submit to {e.cluster} failed (exit {e.exit_code}): {e.stderr.strip()}",
                  file=sys.stderr)
            last = e
    assert last is not None
    raise last


def wait_until_done(fabric: falcon.ClusterFabric, handle: falcon.WorkloadHandle,
                    poll_interval: float, timeout: float) -> falcon.WorkloadStatus:
    deadline = time.monotonic() + timeout
    last_state: Optional[falcon.WorkloadState] = None
    while True:
        status = fabric.get_workload_status(handle)
        if status.state != last_state:
            print(f"  {handle.workload_name}: {status.state.value}")
            last_state = status.state
        if status.state.is_terminal:
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"{handle.workload_name} still {status.state.value} after "
                               f"{timeout:.0f} s")
        time.sleep(poll_interval)


def rank0_metrics(fabric: falcon.ClusterFabric, handle: falcon.WorkloadHandle) -> dict[str, float]:
    steps = 0
    loss = step_time = 0.0
    for line in fabric.stream_pod_log(handle, 0):  # lazily: one page at a time
        m = METRIC.search(line)
        if m:
            steps += 1
            loss, step_time = float(m.group(2)), step_time + float(m.group(3))
    return {"steps": steps, "final_loss": loss,
            "mean_step_time_s": step_time / steps if steps else 0.0}


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=os.environ.get("FALCON_CONFIG", "repos.yaml"),
                   help="repos.yaml (default: $FALCON_CONFIG, else ./repos.yaml)")
    p.add_argument("--accelerator", default="tpu-v4-64")
    p.add_argument("--name", default="bench-" + time.strftime("%H%M%S"))
    p.add_argument("--image", default="gcr.io/falcon/llama-bench:1")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="an environment variable of the workload (repeatable)")
    p.add_argument("--poll-interval", type=float, default=2.0, help="seconds between polls")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the end")
    p.add_argument("--dest", help="gs:// destination of the logs (default: "
                   "<cluster's gcs_bucket>/profiles/<name>/logs)")
    args = p.parse_args(argv)

    fabric = falcon.ClusterFabric(args.config)  # ClusterConfigError: fail fast at start-up
    spec = falcon.WorkloadSpec(
        name=args.name, docker_image=args.image,
        command=["python3", "train.py", "--steps", "100"], accelerator_type=args.accelerator,
        env=dict(kv.split("=", 1) for kv in args.env))

    print(f"1. select a cluster for {spec.accelerator_type} and submit {spec.name}")
    try:
        selection, handle = submit(fabric, spec)
    except falcon.NoAvailableClusterError as e:
        print(f"session FAILED: {e}", file=sys.stderr)
        for r in e.probe_results:
            print(f"  {r.cluster}: reachable={r.reachable} queue_depth={r.queue_depth} "
                  f"error={r.error}", file=sys.stderr)
        return 2
    except falcon.WorkloadSubmitError as e:
        print(f"session FAILED: {e}", file=sys.stderr)
        return 2
    print(f"  {selection.reason}")
    print(f"  handle: {json.dumps(handle.to_dict())}")

    print("2. poll its status")
    status = wait_until_done(fabric, handle, args.poll_interval, args.timeout)
    print(f"  {status.state.value}, exit code {status.exit_code}")

    print("3. rank 0's metrics, from its log")
    try:
        metrics = rank0_metrics(fabric, handle)
    except falcon.LogRetrievalError as e:  # the session can still complete; logs are missing
        print(f"  logs missing: {e}", file=sys.stderr)
        metrics = {}
    print(f"  {json.dumps(metrics)}")

    cluster = fabric.get_cluster(handle.cluster)
    dest = args.dest or f"{cluster.gcs_bucket}/profiles/{spec.name}/logs"
    print(f"4. archive every rank's log to {dest}")

    def progress(p: falcon.ExportProgress) -> None:
        if p.done:
            print(f"  rank {p.rank}: {p.lines} lines, {p.bytes} bytes")

    exported = fabric.export_pod_logs(handle, falcon.LogFilter(), dest, progress=progress)
    print(f"  {json.dumps(exported.to_dict(), sort_keys=True)}")
    return 0 if status.state is falcon.WorkloadState.COMPLETED else 1


if __name__ == "__main__":
    sys.exit(main())
