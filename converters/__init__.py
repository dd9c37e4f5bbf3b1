"""How graphs get lossops operators and lose them again: PyTorch export (`lossops.converters.torch`, needs
torch), fusion of exporter patterns, lowering to standard ops, and the aclnn argument mapping."""

from .fusion import fuse
from .lowering import lower

__all__ = ["fuse", "lower"]
