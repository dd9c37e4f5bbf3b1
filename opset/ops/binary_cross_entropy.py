"""BinaryCrossEntropy: the forward of BinaryCrossEntropyBackward (PyTorch's binary_cross_entropy)."""

from __future__ import annotations

from ..builder import Builder
from ..log1p import log1p
from ..spec import EXACT, POSITIVE, PRINCIPAL, PROBABILITY, Gradient, Input, OpDef, reduction

LOG_CLAMP = -100.0  # PyTorch clamps both logs at -100, so probabilities of exactly 0 or 1 give finite losses

DOC = f"""\
Binary cross entropy between probabilities `input` and `target`:

    loss = -weight * (target * max(log(input), {LOG_CLAMP:g}) + (1 - target) * max(log1p(-input), {LOG_CLAMP:g}))

with PyTorch's clamp of the logs at {LOG_CLAMP:g}; `mean` divides the sum by the number of elements (NaN for an
empty `input`), `sum` of an empty `input` is 0. Values of `input` outside [0, 1] are not checked. Its
gradient with respect to `input` is BinaryCrossEntropyBackward. float16 and bfloat16 compute in float32.
"""


def decompose(b: Builder, x: str, y: str, weight: str) -> str:
    clamp = b.const(LOG_CLAMP)
    log_x = b.at_least(b.op("Log", x), clamp)
    log_one_minus_x = b.at_least(log1p(b, b.op("Neg", x)), clamp)
    positive = b.op("Mul", y, log_x)
    negative = b.op("Mul", b.op("Sub", b.const(1.0), y), log_one_minus_x)
    return b.times(b.op("Neg", b.op("Add", positive, negative)), weight)


DEFINITION = OpDef(
    name="BinaryCrossEntropy",
    summary="Binary cross entropy on probabilities (the forward of BinaryCrossEntropyBackward).",
    doc=DOC,
    inputs=(
        Input("input", "Probabilities, any rank.", shape=PRINCIPAL, domain=PROBABILITY),
        Input("target", "Targets; exactly the shape of `input`.", shape=EXACT, domain=PROBABILITY),
        Input("weight", "Rescaling weight, broadcastable to `input`'s shape.", optional=True, domain=POSITIVE),
    ),
    output=Input("output", "`input`'s shape for `none`; a scalar (rank 0) for `mean` and `sum`."),
    attributes=(reduction(),),
    decompose=decompose,
    reduces=True,
    torch=("aten::binary_cross_entropy",),
    gradient=Gradient("BinaryCrossEntropyBackward", ("grad_output", "input", "target", "weight")),
)
