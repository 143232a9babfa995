"""pytest fixtures: the local fleet (falcon-fleet, fleet-xpk, fleet-gcloud) for the Python
module, started as tests/support/local_fleet.cc starts it in the C++ tests: a fleet on a
loopback port the OS picks (--port 0), on a manual clock (time_scale 0, moved by
``fleet.advance``), and a repos.yaml pointing the layer at it.

The binaries and the importable package come from FALCON_BUILD_DIR (default
build/release-werror, what ``make python-test`` builds): <dir>/bin/* and <dir>/python/falcon.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any, Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(
    os.environ.get("FALCON_BUILD_DIR", ROOT / "build" / "release-werror")).resolve()
BIN = BUILD / "bin"
if os.environ.get("FALCON_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(BUILD / "python"))

FLEET_YAML = """
time_scale: 0
defaults: {duration_s: 100, steps: 20}
logs: {omit_completion_index_every: 3}
workers_per_slice: {tpu-v4-64: 4}
clusters:
  tpu-a:
    project: proj-tpu
    zone: us-central2-b
    cluster_id: tpu-a
    capacity: {tpu-v4-64: 1}
    workloads:
      - {name: long-run, device_type: tpu-v4-64, duration_s: 86400}
      - {name: waiting, count: 3, device_type: tpu-v4-64, duration_s: 100}
  tpu-down:
    project: proj-tpu
    zone: us-east5-a
    location: us-east5
    cluster_id: tpu-down
    capacity: {tpu-v4-64: 4}
    behaviour: {unreachable: true}
  tpu-b:
    project: proj-tpu
    zone: us-central2-b
    cluster_id: tpu-b
    capacity: {tpu-v4-64: 2}
  gpu-x:
    project: proj-gpu
    zone: us-central1-a
    cluster_id: gpu-cluster-x
    capacity: {a100-40gb-8: 2}
"""

REPOS_YAML = """clusters:
  tpu-a:
    project: proj-tpu
    zone: us-central2-b
    cluster_id: tpu-a
    accelerator_types: [{{type: tpu-v4-64, device_class: tpu, priority: 1}}]
    max_queue_depth: 2
    probe_timeout_s: 20
  tpu-down:
    project: proj-tpu
    zone: us-east5-a
    location: us-east5
    cluster_id: tpu-down
    accelerator_types: [{{type: tpu-v4-64, device_class: tpu, priority: 1}}]
    probe_timeout_s: 20
  tpu-b:
    project: proj-tpu
    zone: us-central2-b
    cluster_id: tpu-b
    gcs_bucket: gs://falcon-logs
    accelerator_types: [{{type: tpu-v4-64, device_class: tpu, priority: 2}}]
    probe_timeout_s: 20
    labels: {{env: dev}}
  gpu-x:
    project: proj-gpu
    zone: us-central1-a
    cluster_id: gpu-cluster-x
    default_namespace: default
    accelerator_types: [{{type: a100-40gb-8, device_class: gpu, priority: 1}}]
    probe_timeout_s: 20
xpk:
  binary: {xpk}
  gcloud_binary: {gcloud}
  env: {{FALCON_FLEET_URL: "{url}"}}
  state_dir: {state}
  command_timeout_s: 60
gcp:
  logging_endpoint: {url}
  storage_endpoint: {url}
  access_token_file: {token}
  logging_reads_per_minute: 6000
"""


def start_fleet(fleet_yaml: pathlib.Path, directory: pathlib.Path) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """Starts falcon-fleet on a port the OS picks; returns it and its ready JSON (url, token)."""
    for exe in ("falcon-fleet", "fleet-xpk", "fleet-gcloud"):
        if not (BIN / exe).is_file():
            pytest.fail(f"{BIN / exe} is missing: run `make python-test` (or build it)")
    with open(directory / "fleet.stderr", "wb") as stderr:
        proc = subprocess.Popen(
            [str(BIN / "falcon-fleet"), "--fleet", str(fleet_yaml), "--port", "0", "--print-json"],
            stdout=subprocess.PIPE, stderr=stderr, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:  # blocks until the fleet prints its JSON line (or exits)
        if line.startswith("{"):
            return proc, json.loads(line)
    proc.wait()
    pytest.fail("falcon-fleet did not start: "
                + (directory / "fleet.stderr").read_text(errors="replace"))


def stop_fleet(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=60)
    if proc.stdout:
        proc.stdout.close()


class Fleet:
    """A running falcon-fleet and the repos.yaml for it."""

    def __init__(self, directory: pathlib.Path) -> None:
        self.dir = directory
        (directory / "fleet.yaml").write_text(FLEET_YAML)
        self.proc, info = start_fleet(directory / "fleet.yaml", directory)
        self.url: str = info["url"]
        self.token: str = info["token"]
        token_file = directory / "token"
        token_file.write_text(self.token + "\n")
        self.state_dir = directory / "state"
        self.repos_path = directory / "repos.yaml"
        self.repos_path.write_text(REPOS_YAML.format(
            xpk=BIN / "fleet-xpk", gcloud=BIN / "fleet-gcloud", url=self.url,
            state=self.state_dir, token=token_file))

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read()
        return json.loads(text) if text else None

    def advance(self, seconds: int) -> None:
        """Moves the fleet's simulated time forward and runs the simulation to it."""
        self.request("POST", "/fleet/v1/clock:advance", {"seconds": seconds})

    def requests(self, route: str) -> int:
        """How many requests the fleet's Google-protocol server got on `route` (logging.list,
        storage.upload_init, ...)."""
        return int(self.request("GET", "/_fake/counters")["requests"].get(route, 0))

    def objects(self, bucket: str, prefix: str) -> list[str]:
        """Names of the finished objects under gs://bucket/prefix ([] without the bucket)."""
        try:
            listing = self.request("GET", f"/storage/v1/b/{bucket}/o?prefix={prefix}")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return []
            raise
        return [item["name"] for item in listing.get("items", [])]

    def add_fault(self, fault: dict[str, Any]) -> None:
        self.request("POST", "/_fake/faults", fault)

    def generate_logs(self, **body: Any) -> Any:
        return self.request("POST", "/fleet/v1/logs:generate", body)

    def stop(self) -> None:
        stop_fleet(self.proc)


@pytest.fixture
def fleet(tmp_path: pathlib.Path) -> Iterator[Fleet]:
    f = Fleet(tmp_path)
    try:
        yield f
    finally:
        f.stop()


@pytest.fixture
def fabric(fleet: Fleet) -> Any:
    import falcon

    return falcon.ClusterFabric(str(fleet.repos_path))
