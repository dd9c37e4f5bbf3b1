"""How the lossops operators run in ONNX Runtime: numpy kernels hosted through onnxruntime-extensions, or
the standard-op decomposition on any onnxruntime."""

if __name__ != "lossops.ort_ext":  # the repository root is the package `lossops` (docs/design.md)
    raise ImportError(f"import lossops.ort_ext, not {__name__}: this folder is a subpackage of lossops")

from .host import add_kernels, kernels_available
from .library import library_path
from .session import InferenceSession, prepare
from .training import TrainingSession

__all__ = ["InferenceSession", "TrainingSession", "add_kernels", "kernels_available", "library_path", "prepare"]
