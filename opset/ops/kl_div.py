"""KlDiv: the forward of KlDivBackward (PyTorch's kl_div)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import BROADCAST, LOG_PROBABILITY, PRINCIPAL, PROBABILITY, REDUCED_OUTPUT, Gradient, Input, OpDef
from .kl_div_backward import DEFINITION as BACKWARD

DOC = """\
Kullback-Leibler divergence loss between log-probabilities `input` and `target`:

    loss = target * (log(target) - input)      (log_target = 0; 0 where target is 0, NaN where it is negative)
    loss = exp(target) * (target - input)      (log_target = 1)

over the broadcast shape of `input` and `target`; `mean` divides the sum by its number of elements,
`batchmean` by `input.shape[0]` (not at all for a scalar `input`), as PyTorch. Its gradient with respect to
`input` is KlDivBackward. float16 and bfloat16 compute in float32.
"""


def decompose(b: Builder, x: str, t: str) -> str:

    def probabilities(s: Builder) -> str:
        # xlogy(t, t): t * log(t), 0 where t == 0 (log(0) * 0 would be NaN)
        t_log_t = s.op("Where", s.op("Equal", t, s.const(0.0)), s.const(0.0), s.op("Mul", t, s.op("Log", t)))
        return s.op("Sub", t_log_t, s.op("Mul", t, x))

    return b.choose("log_target", {0: probabilities, 1: lambda s: s.op("Mul", s.op("Exp", t), s.op("Sub", t, x))})


DEFINITION = OpDef(
    name="KlDiv",
    summary="Kullback-Leibler divergence loss (the forward of KlDivBackward).",
    doc=DOC,
    inputs=(
        Input("input", "Log-probabilities, any rank.", shape=PRINCIPAL, domain=LOG_PROBABILITY),
        Input("target", "Probabilities (or log-probabilities with `log_target`), broadcastable with `input`.",
              shape=BROADCAST, domain=PROBABILITY),
    ),
    output=REDUCED_OUTPUT,
    attributes=BACKWARD.attributes,
    decompose=decompose,
    reduces=True,
    # torch.export keeps aten::kl_div whole; training-step export traces the custom op (it has a backward)
    torch=("aten::kl_div", "lossops::kl_div"),
    gradient=Gradient("KlDivBackward", ("grad_output", "input", "target")),
    target_gradient=Gradient("KlDivTargetBackward", ("grad_output", "input", "target")),
)
