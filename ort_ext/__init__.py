"""How the lossops operators run in ONNX Runtime: compiled kernels (`kernels/`, their machine code in
`machine_code/`) hosted in a session (`session.py`, `host.py`) or registered by any ONNX Runtime host from the
native library (`library_path()`); the Ascend provider's path (`cann.py`); or, where no kernels exist, the
standard-op decomposition every model carries."""

if __name__ != "lossops.ort_ext":  # the repository root is the package `lossops` (docs/design.md)
    raise ImportError(f"import lossops.ort_ext, not {__name__}: this folder is a subpackage of lossops")

import warnings

from .host import add_kernels, kernels_available
from .machine_code.library import library_path
from .session import InferenceSession, prepare

__all__ = ["InferenceSession", "add_kernels", "kernels_available", "library_path", "prepare"]


def __getattr__(name: str):
    if name == "TrainingSession":  # moved with the rest of training; this name works for one release
        warnings.warn("lossops.ort_ext.TrainingSession is now lossops.training.TrainingSession; the old name goes "
                      "in the next release", DeprecationWarning, stacklevel=2)
        from ..training import TrainingSession

        return TrainingSession
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
