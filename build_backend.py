"""The build backend (pyproject.toml): setuptools', asking for numba and what it imports only for a wheel, whose
kernels are compiled ahead of time (setup.py); an editable install compiles nothing and so installs no numba,
onnx or onnxruntime into its build environment. Not part of the installed package."""

import os
import platform
import sys

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403 - the backend's hooks, all of them

# what `python -m lossops.ort_ext.aot` imports (with lossops' own dependencies' bounds)
AHEAD_OF_TIME = ["numba>=0.68,<0.69", "numpy>=1.24,<3", "onnx>=1.19,<1.24", "onnxruntime>=1.18,<1.32",
                 "ml_dtypes>=0.4"]


def prebuilt() -> bool:
    """Whether a wheel built here carries the kernels' machine code: Linux x86-64, unless LOSSOPS_AOT=0."""
    return (sys.platform == "linux" and platform.machine().lower() in ("x86_64", "amd64")
            and os.environ.get("LOSSOPS_AOT", "1") != "0")


def get_requires_for_build_wheel(config_settings=None):
    return build_meta.get_requires_for_build_wheel(config_settings) + (AHEAD_OF_TIME if prebuilt() else [])
