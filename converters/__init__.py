"""How graphs get lossops operators and lose them again: PyTorch export (`lossops.converters.torch`, needs
lossops[torch]), fusion of exporter patterns (needs lossops[script]), lowering to standard ops, and the aclnn
argument mapping."""

if __name__ != "lossops.converters":  # the repository root is the package `lossops` (docs/design.md)
    raise ImportError(f"import lossops.converters, not {__name__}: this folder is a subpackage of lossops")

from onnx import ModelProto

from .lowering import lower

__all__ = ["fuse", "lower"]


def fuse(model: ModelProto) -> tuple[ModelProto, list[str]]:
    """(copy of `model` with every recognised BCE-with-logits subgraph replaced by a lossops node, report).
    Needs onnxscript (lossops[script]); imported here so that the rest of the converters work without it."""
    from .fusion import fuse

    return fuse(model)
