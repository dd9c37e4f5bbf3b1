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
    """What `python -m lossops.ort_ext.aot` imports: lossops' dependencies and numba (its `jit` extra), with the
    bounds pyproject.toml gives them (a build hook runs in the source tree)."""
    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
    return project["dependencies"] + project["optional-dependencies"]["jit"]


def prebuilt() -> bool:
    """Whether a wheel built here carries the kernels' machine code: Linux x86-64, unless LOSSOPS_AOT=0."""
    return (sys.platform == "linux" and platform.machine().lower() in ("x86_64", "amd64")
            and os.environ.get("LOSSOPS_AOT", "1") != "0")


def get_requires_for_build_wheel(config_settings=None):
    return build_meta.get_requires_for_build_wheel(config_settings) + (ahead_of_time() if prebuilt() else [])
