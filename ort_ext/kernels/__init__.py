"""Array kernels of the lossops operators: numpy, and numba for the fused loops (`fused.py`); no ONNX Runtime.
Each takes the operator's inputs in schema order (None for an absent optional input), its attributes as
keywords, and an `alloc(shape)` that returns the output buffer (a fresh array by default; inside ONNX Runtime,
ORT's own output)."""

from .binary_cross_entropy import binary_cross_entropy
from .binary_cross_entropy_backward import binary_cross_entropy_backward
from .binary_cross_entropy_with_logits import binary_cross_entropy_with_logits
from .binary_cross_entropy_with_logits_backward import binary_cross_entropy_with_logits_backward
from .common import InvalidInput
from .kl_div import kl_div
from .kl_div_backward import kl_div_backward

KERNELS = {
    "BinaryCrossEntropyWithLogits": binary_cross_entropy_with_logits,
    "BinaryCrossEntropyBackward": binary_cross_entropy_backward,
    "KlDivBackward": kl_div_backward,
    "BinaryCrossEntropy": binary_cross_entropy,
    "KlDiv": kl_div,
    "BinaryCrossEntropyWithLogitsBackward": binary_cross_entropy_with_logits_backward,
}

__all__ = ["KERNELS", "InvalidInput", "binary_cross_entropy", "binary_cross_entropy_backward",
           "binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits_backward", "kl_div", "kl_div_backward"]
