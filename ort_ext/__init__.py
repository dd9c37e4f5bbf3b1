"""How the lossops operators run in ONNX Runtime: numpy kernels hosted through onnxruntime-extensions, or
the standard-op decomposition on any onnxruntime."""

from .host import add_kernels, kernels_available
from .session import InferenceSession, prepare
from .training import TrainingSession

__all__ = ["InferenceSession", "TrainingSession", "add_kernels", "kernels_available", "prepare"]
