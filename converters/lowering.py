"""Lowering: every lossops node becomes its standard-op decomposition, specialised to the node's attributes
and element type, so the model imports no lossops domain and runs on any ONNX runtime (the mechanics live
in opset, beside the decompositions; `for_provider="cann"` shapes it for the CANN provider's graph mode)."""

from ..opset.model import lower

__all__ = ["lower"]
