"""The optional dependencies: which extra of `lossops` brings each, and the one way to import them.

The base install (numpy, onnx, onnxruntime, onnxruntime-extensions, and the kernels' machine code where the
wheel carries it) runs every operator, the checker, lowering, the conformance suite and the benchmark.
Everything else is imported where it is used, through `require`, so that a missing one is a one-line message
naming the extra, not a traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# module -> the extra of lossops that installs it (pyproject.toml's [project.optional-dependencies])
EXTRAS = {"numba": "jit", "torch": "torch", "onnxscript": "script", "matplotlib": "plot", "safetensors": "train",
          "tqdm": "train", "transformers": "transformers"}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""


def require(module: str, purpose: str, extra: str | None = None) -> ModuleType:
    """Import `module` (a key of EXTRAS) for `purpose`, or raise MissingExtra saying what to install: the
    extra that brings `module`, or `extra` where the purpose needs a larger one (training needs more than
    torch)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if e.name is not None and e.name.split(".")[0] != module:
            raise  # the module is there but something it needs is broken: the real error helps more
        raise MissingExtra(f"{purpose} needs {module}, which is not installed: "
                           f"pip install 'lossops[{extra or EXTRAS[module]}]'") from None


def available(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
