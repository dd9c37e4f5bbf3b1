"""KlDivBackward: gradient of KL divergence w.r.t. the log-probabilities (aclnnKlDivBackward)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import (
    BROADCAST,
    GRAD_INPUT,
    GRAD_OUTPUT,
    LOG_PROBABILITY,
    PRINCIPAL,
    PROBABILITY,
    Aclnn,
    Attribute,
    Input,
    OpDef,
    reduction,
)

DOC = """\
Gradient of `kl_div(input, target, reduction, log_target)` with respect to `input`. The forward is
`target * (log(target) - input)` (with `0 * log 0 = 0`), or `exp(target) * (target - input)` when
`log_target` is 1. With `B` the broadcast shape of `input` and `target` and `g` the `grad_output` broadcast
to `B`:

    d = -target * g            (log_target = 0; no mask: target 0 gives -0.0)
    d = -exp(target) * g       (log_target = 1)

then `d` is divided by the number of elements of `B` for `mean`, by `input.shape[0]` for `batchmean`
(no division when `input` is a scalar; this follows PyTorch, which divides by the input's first dimension,
where the aclnn page says "the batch size"), and summed over the axes that broadcasting added to or
stretched in `input`, so that `grad_input` has `input`'s shape. float16 and bfloat16 are computed in
float32 and rounded once.
"""


def decompose(b: Builder, g: str, _x: str, t: str) -> str:
    factor = b.choose("log_target", {0: lambda s: t, 1: lambda s: s.op("Exp", t)})
    return b.expanded(b.op("Neg", b.op("Mul", factor, g)), t, g)  # input may be the larger one


DEFINITION = OpDef(
    name="KlDivBackward",
    summary="Gradient of KL divergence with respect to the log-probabilities.",
    doc=DOC,
    inputs=(
        GRAD_OUTPUT,
        Input("input", "Log-probabilities, any rank.", shape=PRINCIPAL, domain=LOG_PROBABILITY),
        Input("target", "Probabilities (or log-probabilities with `log_target`), broadcastable with `input`.",
              shape=BROADCAST, domain=PROBABILITY),
    ),
    output=GRAD_INPUT,
    attributes=(
        reduction("batchmean"),
        Attribute("log_target", "1 when `target` holds log-probabilities, 0 (default) when probabilities.",
                  0, allowed=(0, 1)),
    ),
    decompose=decompose,
    output_shape="input",
    torch=("lossops::kl_div_backward",),  # aten::kl_div_backward was removed (PyTorch PR #80334)
    aclnn=Aclnn("aclnnKlDivBackward", ("gradOutput", "self", "target"),
                {"910": False, "310P": False, "A2": True, "A3": True, "950": True}),
)
