"""examples/business_layer.py: the spec's typical flow against the demo fleet
(examples/local-fleet.yaml at time scale 60, examples/local-repos.yaml, the environment
scripts/demo.sh sets), and mypy over it and the package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import BIN, BUILD, ROOT, start_fleet, stop_fleet


def test_business_layer_example_runs_the_typical_flow(tmp_path):
    proc, info = start_fleet(ROOT / "examples" / "local-fleet.yaml", tmp_path)
    try:
        (tmp_path / "token").write_text(info["token"] + "\n")
        env = dict(os.environ)
        env.update({
            "PATH": f"{BIN}:{env.get('PATH', '')}",
            "PYTHONPATH": str(BUILD / "python"),
            "FALCON_FLEET_URL": info["url"],
            "FALCON_LOGGING_ENDPOINT": info["url"],
            "STORAGE_EMULATOR_HOST": info["url"],
            "FALCON_ACCESS_TOKEN_FILE": str(tmp_path / "token"),
            "XDG_STATE_HOME": str(tmp_path / "state"),
        })
        if os.environ.get("FALCON_TEST_INSTALLED") == "1":
            del env["PYTHONPATH"]
        run = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "business_layer.py"),
             "--config", str(ROOT / "examples" / "local-repos.yaml"), "--name", "py-bench",
             "--env", "FLEET_DURATION_S=240", "--poll-interval", "0.5", "--timeout", "300"],
            env=env, capture_output=True, text=True, timeout=600)
    finally:
        stop_fleet(proc)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "selected tpu-v4-dev: reachable" in out  # prod is full, backup unreachable
    assert "py-bench: RUNNING" in out and "py-bench: COMPLETED" in out
    assert '"steps": 100' in out
    exported = json.loads(out.strip().splitlines()[-1])
    assert exported["exported_ranks"] == list(range(8))  # tpu-v4-64: 8 workers a slice
    assert exported["gcs_uris"]["0"] == "gs://falcon-logs/profiles/py-bench/logs/rank-0.log"


def test_mypy_accepts_the_example_and_the_package():
    if shutil.which("mypy", path="/usr/bin") is None:
        pytest.skip("mypy is not installed (Debian package mypy)")
    run = subprocess.run(
        ["/usr/bin/python3", "-m", "mypy", "--strict", str(ROOT / "examples" / "business_layer.py"),
         str(ROOT / "python" / "falcon")],
        cwd=ROOT / "python", capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
