"""lossops: the Ascend CANN loss operators as an ONNX operator set, run in ONNX Runtime."""

__version__ = "0.1.0"
