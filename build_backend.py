"""The build backend (pyproject.toml): setuptools', asking for numba and what it imports only for a wheel, whose
kernels are compiled ahead of time (setup.py); an editable install compiles nothing and so installs no numba,
onnx or onnxruntime into its build environment. Not part of the installed package."""

import os
import platform
import sys
import tomllib
from pathlib import Path

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403 - the backend's hooks, all of them


def ahead_of_time() -> list[str]:
    """What `python -m lossops.ort_ext.machine_code.aot` imports: lossops' dependencies and numba (its `jit`
    extra), with the bounds pyproject.toml gives them (a build hook runs in the source tree)."""
    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
    return project["dependencies"] + project["optional-dependencies"]["jit"]


# the architectures with machine code (lossops.ort_ext.machine_code.ARCHES, which tests/test_prebuilt.py holds
# this to: the backend cannot import the package, whose imports need what the build installs)
ARCHES = ("x86_64", "aarch64")


def wheel_arch() -> str | None:
    """The architecture whose machine code a wheel built here carries: LOSSOPS_WHEEL_ARCH's (aarch64, cross-compiled
    on x86-64), else this machine's on Linux x86-64 or aarch64; None for a pure wheel (elsewhere, or LOSSOPS_AOT=0)."""
    if os.environ.get("LOSSOPS_AOT", "1") == "0":
        return None
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    arch = os.environ.get("LOSSOPS_WHEEL_ARCH") or arch
    if arch not in ARCHES:
        if "LOSSOPS_WHEEL_ARCH" in os.environ:
            raise SystemExit(f"LOSSOPS_WHEEL_ARCH={arch!r}: lossops compiles its kernels for {', '.join(ARCHES)}")
        return None
    return arch if sys.platform == "linux" else None


def wheel_levels() -> list[str]:
    """LOSSOPS_WHEEL_LEVELS: some of the architecture's levels (names separated by spaces), for a build that needs
    only those (CI: the levels its machine runs); empty for every level, as a release carries."""
    return os.environ.get("LOSSOPS_WHEEL_LEVELS", "").split()


def prebuilt() -> bool:
    """Whether a wheel built here carries the kernels' machine code."""
    return wheel_arch() is not None


def get_requires_for_build_wheel(config_settings=None):
    return build_meta.get_requires_for_build_wheel(config_settings) + (ahead_of_time() if prebuilt() else [])
