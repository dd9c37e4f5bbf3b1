"""SoftTargetCrossEntropyLossGrad: gradient of SoftTargetCrossEntropyLoss with respect to its logits."""

from __future__ import annotations

from ..builder import Builder
from ..spec import CLASSES, GRAD_INPUT, LOSS, Input, OpDef
from .nll_loss import WEIGHT
from .soft_target_cross_entropy_loss import DEFINITION as FORWARD
from .soft_target_cross_entropy_loss import TARGET, weighted_target

DOC = """\
Gradient of `SoftTargetCrossEntropyLoss(input, target, weight)` with respect to the logits `input`, with
p = softmax(input, axis=1) and q = (1 - e) * target + e / C:

    grad_input[n, k, d...] = a * (p[n, k, d...] * sum_j weight[j] * q[n, j, d...] - weight[k] * q[n, k, d...])

with a = grad_output[n, d...] for `none`, grad_output for `sum`, and grad_output divided by the number of rows
for `mean`. It is computed from the logits (the softmax again), so nothing of the forward's size need be kept.
"""

GRAD_OUTPUT = Input("grad_output", "Gradient of the loss: `input`'s shape without its class axis for `none`, a "
                    "scalar otherwise.", shape=LOSS)


def decompose(b: Builder, g: str, x: str, t: str, weight: str) -> str:
    q = weighted_target(b, t, weight)
    total = b.op("ReduceSum", q, b.ints([1]), keepdims=1)
    p = b.op("Softmax", x, axis=1)
    return b.op("Mul", b.op("Sub", b.op("Mul", p, total), q), b.rows.fed)


DEFINITION = OpDef(
    name="SoftTargetCrossEntropyLossGrad",
    summary="Gradient of the softmax cross entropy against class probabilities with respect to the logits.",
    doc=DOC,
    inputs=(
        GRAD_OUTPUT,
        Input("input", "Logits, (N, C, d1, ...): the classes on axis 1.", shape=CLASSES),
        TARGET,
        WEIGHT,
    ),
    output=GRAD_INPUT,
    attributes=FORWARD.attributes,
    decompose=decompose,
    output_shape="input",
    torch=("lossops::soft_target_cross_entropy_backward",),
)
