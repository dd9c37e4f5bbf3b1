"""KlDivTargetBackward: gradient of KL divergence w.r.t. the target (aclnnKlDivTargetBackward)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import Aclnn, Input, OpDef
from .kl_div_backward import DEFINITION as INPUT_BACKWARD

DOC = """\
Gradient of `kl_div(input, target, reduction, log_target)` with respect to `target`, which distillation with
a teacher that trains needs. With `B` the broadcast shape of `input` and `target` and `g` the `grad_output`
broadcast to `B`:

    d = (log(target) + 1 - input) * g              (log_target = 0; NaN where target is 0, negative or inf)
    d = exp(target) * (target + 1 - input) * g     (log_target = 1)

then `d` is divided by the number of elements of `B` for `mean`, by `input.shape[0]` for `batchmean` (not at
all when `input` is a scalar), and summed over the axes that broadcasting added to or stretched in `target`,
so that `grad_target` has `target`'s shape. NaN where a probability target is 0 is PyTorch's autograd, which
differentiates `xlogy(target, target)` as `log(target) + target / target`; the aclnn page gives 0 there, and
the limit is -inf. float16 and bfloat16 are computed in float32 and rounded once.
"""


def decompose(b: Builder, g: str, x: str, t: str) -> str:
    one = b.const(1.0)

    def probabilities(s: Builder) -> str:  # log(t) is finite exactly where PyTorch's log(t) + t / t is not NaN
        log_t = s.op("Log", t)
        finite = s.op("Less", s.op("Abs", log_t), s.const(float("inf")))
        return s.op("Mul", s.op("Where", finite, s.op("Sub", s.op("Add", log_t, one), x), s.const(float("nan"))), g)

    def log_probabilities(s: Builder) -> str:  # exp(t) last: g (divided by N for a mean) first brings d down
        return s.op("Mul", s.op("Exp", t), s.op("Mul", s.op("Sub", s.op("Add", t, one), x), g))

    return b.choose("log_target", {0: probabilities, 1: log_probabilities})  # x and t span F


DEFINITION = OpDef(
    name="KlDivTargetBackward",
    summary="Gradient of KL divergence with respect to the target.",
    doc=DOC,
    inputs=INPUT_BACKWARD.inputs,
    output=Input("grad_target", "Gradient with respect to `target`; `target`'s shape."),
    attributes=INPUT_BACKWARD.attributes,
    decompose=decompose,
    output_shape="target",
    torch=("lossops::kl_div_target_backward",),  # no aten operator exists for it
    aclnn=Aclnn("aclnnKlDivTargetBackward", ("gradOutput", "self", "target"),
                {"910": False, "310P": False, "A2": True, "A3": True, "950": False}),
)
