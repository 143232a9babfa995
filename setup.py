"""Builds the extension falcon._falcon with the project's CMake build (python/CMakeLists.txt).

    pip install --no-build-isolation .

--no-build-isolation: pip then uses the installed setuptools and wheel (Debian's python3-setuptools
and python3-wheel) instead of downloading them. CMake builds into build/pip with the interpreter
that runs pip; the static libraries it links come from the same build, so nothing but the module
is installed. FALCON_PIP_BUILD_DIR names another build directory: one that is configured already
(`make python-build`'s build/release-werror) is reused as it is, only `_falcon` built in it, so
pip takes seconds instead of a whole build (about 20 minutes on two cores).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        given = os.environ.get("FALCON_PIP_BUILD_DIR")
        build_dir = pathlib.Path(given or ROOT / "build" / "pip")
        # A configured build named by the caller is reused with its own settings.
        reuse = given is not None and (build_dir / "CMakeCache.txt").exists()
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
            "-DFALCON_PYTHON=ON", "-DFALCON_BUILD_TESTS=OFF", "-DFALCON_BUILD_BENCH=OFF",
            f"-DPython_EXECUTABLE={sys.executable}",
        ]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        jobs = os.environ.get("FALCON_JOBS", "2")
        if not reuse:
            subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "_falcon", "-j", jobs],
                       check=True)
        built = sorted((build_dir / "python" / "falcon").glob("_falcon*.so"))
        if not built:
            raise RuntimeError(f"CMake built no _falcon*.so in {build_dir / 'python' / 'falcon'}")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[-1], target)


setup(ext_modules=[CMakeExtension("falcon._falcon")], cmdclass={"build_ext": CMakeBuild})
