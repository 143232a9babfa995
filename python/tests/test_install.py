"""`pip install --no-build-isolation --no-index .` from the checkout: Debian's setuptools and
wheel, no network. FALCON_PIP_BUILD_DIR names the build the tests run against (FALCON_BUILD_DIR),
so pip reuses it instead of building the whole tree again."""

from __future__ import annotations

import ast
import os
import subprocess

from conftest import BUILD, ROOT


def test_pip_installs_the_package_from_the_checkout_without_network(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, timeout=300)
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               FALCON_PIP_BUILD_DIR=str(BUILD))
    env.pop("PYTHONPATH", None)
    run = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", "."],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    check = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import falcon, os; d = os.path.dirname(falcon.__file__); "
         "print(d); print(sorted(f for f in os.listdir(d) if not f.startswith('__')))"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr
    where, listing = check.stdout.splitlines()
    files = ast.literal_eval(listing)  # the printed list
    assert where.startswith(str(venv))
    for name in ("_errors.py", "_fabric.py", "_falcon.pyi", "_model.py", "py.typed"):
        assert name in files
    assert any(f.startswith("_falcon.cpython-311") and f.endswith(".so") for f in files), files
