"""Fusion: the standard-op subgraphs that PyTorch's ONNX exporters emit for binary_cross_entropy_with_logits,
for torchvision's sigmoid_focal_loss, for a reduced mse_loss or l1_loss and for cross_entropy become one lossops
node, with onnxscript's pattern rewriter.

Both exporters compute `log(sigmoid(x))`, which is -inf for logits below about -90 in float32 (PyTorch 2.13:
loss inf at logit -200 where PyTorch gives 200); the fused node is finite and accurate there. Patterns
(read from torch 2.13's exports):

- dynamo exporter: `(1 - y) * x - log(sigmoid(x))`, with pos_weight `(1 - y) * x - ((p - 1) * y + 1) *
  log(sigmoid(x))` (`p - 1` folded into one constant when p is); weight `* w`; `ReduceSum(keepdims=0)` for
  sum, `Squeeze(ReduceMean(keepdims=1))` for mean.
- TorchScript exporter: `-(y * log(s) [* p] + (1 - y) * log(1 - s))` with `s = sigmoid(x)`; weight `w *`;
  `ReduceSum`/`ReduceMean(keepdims=0)`.
- torchvision's sigmoid_focal_loss through the dynamo exporter: the cross entropy above (no weights), times
  `(1 - (s * y + (1 - s) * (1 - y))) ** gamma`, times `y * alpha + (1 - y) * (1 - alpha)` unless alpha < 0, the
  exporter sharing `1 - y` and constants; the same reductions. Its `1 - p_t` cancels for confident predictions
  and its log(sigmoid) is -inf past about -90: the fused node is accurate for every logit.
- mse_loss with `mean` or `sum`: `Reduce(Mul(d, d))` of `d = Sub(x, y)` over every axis (keepdims=0; the
  TorchScript exporter computes `d` twice), its target already expanded to the input's shape where it
  broadcast. The fused node sums in float64. `none` is left alone: a squared difference is not
  necessarily a loss.
- l1_loss with `mean` or `sum`, as the dynamo exporter decomposes it: `Abs(Sub(x, y))`, then
  `Squeeze(ReduceMean(keepdims=1))` or `ReduceSum(keepdims=0)` (the TorchScript exporter has no l1_loss).
- cross_entropy of class indices: `SoftmaxCrossEntropyLoss` (both exporters'), and nll_loss of log_softmax on
  axis 1: `LogSoftmax` feeding `NegativeLogLikelihoodLoss`, or lossops' NLLLoss where lossops exported it.
- cross_entropy of probabilities: both exporters write `SoftmaxCrossEntropyLoss` with the float target, a node
  onnxruntime refuses to load; it becomes SoftTargetCrossEntropyLoss.
- a soft-target cross entropy written by hand, `sum(-p * log_softmax(x, 1), 1)` unreduced, summed or averaged, the
  minus sign on the targets, the product, the row sums or the result (both exporters alike).
"""

from __future__ import annotations

import itertools

import onnx
from onnx import ModelProto

from .. import opset
from ..extras import require
from ..opset.validation import node_label

require("onnxscript", "fusion of exporter patterns")
from onnxscript import ir  # noqa: E402
from onnxscript.rewriter import pattern, rewrite  # noqa: E402

BCEWL = "BinaryCrossEntropyWithLogits"


def _dynamo_core(op, x, y, pw):
    one_minus_y_x = op.Mul(op.Sub(1.0, y), x)
    log_sigmoid = op.Log(op.Sigmoid(x))
    if pw is None:
        return op.Sub(one_minus_y_x, log_sigmoid)
    return op.Sub(one_minus_y_x, op.Mul(op.Add(op.Mul(op.Sub(pw, 1.0), y), 1.0), log_sigmoid))


def _dynamo_folded_core(op, x, y, pw_minus_one):
    """The dynamo exporter's optimizer folds `pos_weight - 1` into a constant when pos_weight is one."""
    return op.Sub(op.Mul(op.Sub(1.0, y), x),
                  op.Mul(op.Add(op.Mul(pw_minus_one, y), 1.0), op.Log(op.Sigmoid(x))))


def _torchscript_core(op, x, y, pw):
    one = [1.0]  # the TorchScript exporter's constants have shape [1]
    s = op.Sigmoid(x)
    positive = op.Mul(y, op.Log(s))
    if pw is not None:
        positive = op.Mul(positive, pw)
    return op.Neg(op.Add(positive, op.Mul(op.Sub(one, y), op.Log(op.Sub(one, s)))))


_REDUCTIONS = {
    "dynamo-folded": {"none": lambda op, v: v,
                      "sum": lambda op, v: op.ReduceSum(v, keepdims=0, noop_with_empty_axes=0),
                      "mean": lambda op, v: op.Squeeze(op.ReduceMean(v, keepdims=1, noop_with_empty_axes=0))},
    "dynamo": {"none": lambda op, v: v, "sum": lambda op, v: op.ReduceSum(v, keepdims=0, noop_with_empty_axes=0),
               "mean": lambda op, v: op.Squeeze(op.ReduceMean(v, keepdims=1, noop_with_empty_axes=0))},
    "torchscript": {"none": lambda op, v: v, "sum": lambda op, v: op.ReduceSum(v, keepdims=0),
                    "mean": lambda op, v: op.ReduceMean(v, keepdims=0)},
}
_CORES = {"dynamo": _dynamo_core, "dynamo-folded": _dynamo_folded_core, "torchscript": _torchscript_core}


class _BceWithLogits(pattern.RewriteRuleClassBase):
    """One exporter's BCE-with-logits subgraph for one reduction, with or without each optional weight, fused
    into the lossops node (the pattern's inputs w and pw are left unbound where the flag is off)."""

    def __init__(self, exporter: str, reduction: str, weight: bool, pos_weight: bool):
        weights = "".join(f"-{name}" for name, on in (("weight", weight), ("pos_weight", pos_weight)) if on)
        super().__init__(f"{exporter}-bce-with-logits{weights}-{reduction}")
        self.exporter, self.reduction, self.weight, self.pos_weight = exporter, reduction, weight, pos_weight
        self.core, self.reduce = _CORES[exporter], _REDUCTIONS[exporter][reduction]
        # A [1]-shaped constant makes a rank-0 input's TorchScript result rank 1: fuse those at rank >= 1 only.
        self.min_rank = 1 if exporter == "torchscript" else 0

    def pattern(self, op, x, y, w, pw):
        loss = self.core(op, x, y, pw if self.pos_weight else None)
        if self.weight:
            loss = op.Mul(loss, w)
        return self.reduce(op, loss)

    def rewrite(self, op, x, y, w=None, pw=None, **_):
        if self.exporter == "dynamo-folded":  # the matched constant is pos_weight - 1
            pw = op.Add(pw, op.CastLike(op.Constant(value_float=1.0), pw))
        return op.BinaryCrossEntropyWithLogits(x, y, w, pw, reduction=self.reduction, _domain=opset.DOMAIN)

    def check(self, context, x, y, w=None, pw=None, **_) -> bool:
        return _shapes_fit(x, y, w, pw, self.min_rank)


def _shapes_fit(x: ir.Value, y: ir.Value, w: ir.Value | None, pw: ir.Value | None, min_rank: int) -> bool:
    """Fuse only where the lossops node means the same: target exactly input's shape, weights broadcast into
    it without enlarging it, element types in T."""
    if x.shape is None or y.shape is None or x.shape != y.shape or x.dtype != y.dtype or len(x.shape) < min_rank:
        return False
    if x.dtype not in (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE):
        return False
    for weight in (w, pw):
        if weight is None:
            continue
        if weight.shape is None or len(weight.shape) > len(x.shape) or weight.dtype != x.dtype:
            return False
        for d, s in zip(reversed(list(weight.shape)), reversed(list(x.shape)), strict=False):
            if not (d == 1 or d == s):
                return False
    return True


class _FocalLoss(pattern.RewriteRuleClassBase):
    """torchvision's sigmoid_focal_loss as the dynamo exporter writes it, for one reduction, with (`balanced`) or
    without (alpha < 0) the alpha_t factor; alpha and gamma are read from the matched constants."""

    def __init__(self, reduction: str, balanced: bool):
        super().__init__(f"dynamo-sigmoid-focal-loss{'' if balanced else '-unbalanced'}-{reduction}")
        self.reduction, self.balanced = reduction, balanced
        self.reduce = _REDUCTIONS["dynamo"][reduction]

    def pattern(self, op, x, y, gamma, alpha, beta):
        s, one_minus_y = op.Sigmoid(x), op.Sub(1.0, y)
        ce = op.Sub(op.Mul(one_minus_y, x), op.Log(s))
        p_t = op.Add(op.Mul(s, y), op.Mul(op.Sub(1.0, s), one_minus_y))
        loss = op.Mul(ce, op.Pow(op.Sub(1.0, p_t), gamma))
        if self.balanced:
            loss = op.Mul(op.Add(op.Mul(y, alpha), op.Mul(one_minus_y, beta)), loss)
        return self.reduce(op, loss)

    def check(self, context, x, y, gamma, alpha=None, beta=None, **_) -> bool:
        values = self._attributes(gamma, alpha, beta)
        return values is not None and _shapes_fit(x, y, None, None, 0)

    def rewrite(self, op, x, y, gamma, alpha=None, beta=None, **_):
        values = self._attributes(gamma, alpha, beta)
        return op.SigmoidFocalLoss(x, y, reduction=self.reduction, _domain=opset.DOMAIN, **values)

    def _attributes(self, gamma, alpha, beta) -> dict | None:
        """{alpha, gamma} from the constants, None where they are not scalar constants that the operator takes
        (beta must be 1 - alpha as float32 rounds it)."""
        g = _scalar(gamma)
        if g is None or not g >= 0:
            return None
        if not self.balanced:
            return {"alpha": -1.0, "gamma": g}
        a, b = _scalar(alpha), _scalar(beta)
        if a is None or b is None or not 0 <= a <= 1 or abs(b - (1 - a)) > 2.0**-23:
            return None
        return {"alpha": a, "gamma": g}


class _PointwiseLoss(pattern.RewriteRuleClassBase):
    """A reduced mse_loss or l1_loss: the squared (`twice`: of two Sub nodes, as the TorchScript exporter writes
    it) or absolute difference of x and y, reduced over every axis (`kept`: with keepdims=1, then squeezed, as
    the dynamo exporter writes a mean it decomposed)."""

    def __init__(self, op_type: str, reduction: str, twice: bool = False, kept: bool = False):
        super().__init__(f"{op_type}{'-twice' if twice else ''}{'-kept' if kept else ''}-{reduction}")
        self.op_type, self.reduction, self.twice, self.kept = op_type, reduction, twice, kept

    def pattern(self, op, x, y):
        d = op.Sub(x, y)
        core = op.Abs(d) if self.op_type == "L1Loss" else op.Mul(d, op.Sub(x, y) if self.twice else d)
        reduce = op.ReduceMean if self.reduction == "mean" else op.ReduceSum
        if self.kept:
            return op.Squeeze(reduce(core, keepdims=1, _allow_other_attributes=True))
        return reduce(core, keepdims=0, _allow_other_attributes=True)

    def check(self, context, x, y, **_) -> bool:
        reduce = next(n for n in context.nodes if n.op_type.startswith("Reduce"))
        # over every axis: no axes (input or attribute), and no "empty axes mean none"; a Squeeze of every axis
        every_axis = ("axes" not in reduce.attributes and len(reduce.inputs) == 1
                      and not reduce.attributes.get_int("noop_with_empty_axes", 0))
        squeeze = next((n for n in context.nodes if n.op_type == "Squeeze"), None)
        every_axis = every_axis and (squeeze is None or (len(squeeze.inputs) == 1 and "axes" not in squeeze.attributes))
        return every_axis and _shapes_fit(x, y, None, None, 0)

    def rewrite(self, op, x, y, **_):
        return getattr(op, self.op_type)(x, y, reduction=self.reduction, _domain=opset.DOMAIN)


POINTWISE_PASS = pattern.RewriteRuleSet(
    [_PointwiseLoss.rule("MseLoss", r, twice=t, kept=k) for r in ("mean", "sum") for t in (False, True)
     for k in (False, True)]
    + [_PointwiseLoss.rule("L1Loss", r, kept=k) for r in ("mean", "sum") for k in (False, True)])


class _CrossEntropy(pattern.RewriteRuleClassBase):
    """Cross entropy of class logits on axis 1, as exporters write it, with or without class weights: ONNX's
    SoftmaxCrossEntropyLoss (its loss output alone), or LogSoftmax(axis=1) then ONNX's NegativeLogLikelihoodLoss
    or lossops' NLLLoss. An absent ignore_index becomes lossops' default, -100: ONNX's operators refuse such a
    target, lossops ignores it."""

    def __init__(self, form: str, weighted: bool):
        super().__init__(f"{form}{'-weight' if weighted else ''}")
        self.form, self.weighted = form, weighted
        self.found: dict = {}

    def pattern(self, op, x, t, w):
        given = (w,) if self.weighted else ()
        if self.form == "SoftmaxCrossEntropyLoss":
            return op.SoftmaxCrossEntropyLoss(x, t, *given, _allow_other_attributes=True)
        domain = {"_domain": opset.DOMAIN} if self.form == "NLLLoss" else {}
        return getattr(op, self.form)(op.LogSoftmax(x, axis=1), t, *given, _allow_other_attributes=True, **domain)

    def check(self, context, x, t, w=None, **_) -> bool:
        last = next(n for n in context.nodes if n.op_type == self.form)
        self.found = {"reduction": last.attributes.get_string("reduction", "mean"),
                      "ignore_index": last.attributes.get_int("ignore_index", -100)}
        floats = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE)
        # probabilities: torch.onnx 2.13 (both exporters) writes SoftmaxCrossEntropyLoss with them, not ONNX
        self.soft = (self.form == "SoftmaxCrossEntropyLoss" and t.dtype == x.dtype and t.shape is not None
                     and x.shape is not None and len(t.shape) == len(x.shape) and self.found["ignore_index"] == -100)
        return (x.shape is not None and len(x.shape) >= 2 and x.dtype in floats
                and (t.dtype == ir.DataType.INT64 or self.soft) and (w is None or w.dtype == x.dtype)
                and self.found["reduction"] in ("none", "mean", "sum"))

    def rewrite(self, op, x, t, w=None, **_):
        if self.soft:
            return op.SoftTargetCrossEntropyLoss(x, t, w, _domain=opset.DOMAIN, reduction=self.found["reduction"])
        return op.CrossEntropyLoss(x, t, w, _domain=opset.DOMAIN, **self.found)


CROSS_ENTROPY_PASS = pattern.RewriteRuleSet([
    _CrossEntropy.rule(form, weighted) for form in ("SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss", "NLLLoss")
    for weighted in (True, False)])


# Where a hand-written soft-target cross entropy negates: the targets, their product with the log-probabilities,
# the row sums, or the reduced loss (`-(p * log_softmax(x, 1)).sum(1).mean()`).
_SIGNS = ("target", "product", "rows", "loss")
# How its row losses are reduced: not at all, a mean as the dynamo exporter decomposes it (keepdims=1, squeezed) or
# as the TorchScript exporter writes it, a sum of the row sums, or one sum over every axis (`rows` absent).
_SOFT_REDUCTIONS = {"mean-kept": "mean", "mean": "mean", "sum": "sum", "sum-whole": "sum", "none": "none"}


class _SoftTargetCrossEntropy(pattern.RewriteRuleClassBase):
    """A soft-target cross entropy written by hand, `sum(-p * log_softmax(x, dim), dim)` reduced or not (timm's
    SoftTargetCrossEntropy, distillation and label-smoothing losses), as the exporters write it: LogSoftmax, a Mul
    with the targets, a ReduceSum over the class axis, one Neg (`sign`), then a reduction over every axis. Fused
    where the class axis is 1 (dim 1, or -1 of a rank-2 input), the targets have the logits' shape and type."""

    def __init__(self, sign: str, reduction: str):
        super().__init__(f"soft-target-cross-entropy-neg-{sign}-{reduction}")
        self.sign, self.reduction = sign, reduction

    def pattern(self, op, x, p, axes):
        logp = op.LogSoftmax(x, _allow_other_attributes=True)
        product = op.Mul(op.Neg(p) if self.sign == "target" else p, logp)
        if self.sign == "product":
            product = op.Neg(product)
        if self.reduction == "sum-whole":
            loss = op.ReduceSum(product, keepdims=0, _allow_other_attributes=True)
        else:
            loss = op.ReduceSum(product, axes, keepdims=0, _allow_other_attributes=True)
            if self.sign == "rows":
                loss = op.Neg(loss)
            if self.reduction == "mean-kept":
                loss = op.Squeeze(op.ReduceMean(loss, keepdims=1, _allow_other_attributes=True))
            elif self.reduction in ("mean", "sum"):
                reduce = op.ReduceMean if self.reduction == "mean" else op.ReduceSum
                loss = reduce(loss, keepdims=0, _allow_other_attributes=True)
        return op.Neg(loss) if self.sign == "loss" else loss

    def check(self, context, x, p, axes=None, **_) -> bool:
        floats = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE)
        if x.shape is None or p.shape is None or x.shape != p.shape or x.dtype != p.dtype or x.dtype not in floats:
            return False
        rank = len(x.shape)
        if rank < 2:
            return False
        softmax = next(n for n in context.nodes if n.op_type == "LogSoftmax")
        if softmax.attributes.get_int("axis", -1) % rank != 1:
            return False
        sums = [n for n in context.nodes if n.op_type in ("ReduceSum", "ReduceMean")]
        if self.reduction != "sum-whole":  # the row sums over the class axis (given as `axes`), the others every axis
            given = None if axes is None or axes.const_value is None else axes.const_value.numpy().reshape(-1)
            if given is None or [int(a) % rank for a in given] != [1]:
                return False
            sums = [n for n in sums if len(n.inputs) < 2 or n.inputs[1] is not axes]
        return all(len(n.inputs) == 1 and "axes" not in n.attributes
                   and not n.attributes.get_int("noop_with_empty_axes", 0) for n in sums)

    def rewrite(self, op, x, p, **_):
        return op.SoftTargetCrossEntropyLoss(x, p, _domain=opset.DOMAIN,
                                             reduction=_SOFT_REDUCTIONS[self.reduction])


# A pass per reduction, the unreduced rows last (they are part of the others). The sign "rows" is "loss" where the
# rows are not reduced, and one sum over every axis has no rows.
SOFT_TARGET_PASSES = [
    pattern.RewriteRuleSet([_SoftTargetCrossEntropy.rule(s, r) for s in _SIGNS
                            if not (r == "none" and s == "loss") and not (r == "sum-whole" and s == "rows")],
                           commute=True)
    for r in _SOFT_REDUCTIONS]


def _scalar(value: ir.Value | None) -> float | None:
    """A constant one-element value as a float, else None."""
    const = None if value is None else value.const_value
    if const is None:
        return None
    array = const.numpy()
    return float(array.reshape(())) if array.size == 1 and array.dtype.kind in "fiu" else None


FOCAL_PASSES = [pattern.RewriteRuleSet([_FocalLoss.rule(r, True), _FocalLoss.rule(r, False)], commute=True)
                for r in ("mean", "sum", "none")]

# The rewriter tries every rule at each node, in graph order, as the pattern's last node; the loss core comes
# before its weight Mul and its reduction, so the largest patterns must run first, in passes of their own.
PASSES = [
    pattern.RewriteRuleSet([_BceWithLogits.rule(e, r, w, p) for e, p in itertools.product(_CORES, (True, False))
                            if p or e != "dynamo-folded"], commute=True)
    for r, w in (("mean", True), ("sum", True), ("mean", False), ("sum", False), ("none", True), ("none", False))
]


def fuse(model: ModelProto) -> tuple[ModelProto, list[str]]:
    """(copy of `model` with every recognised BCE-with-logits, focal-loss, reduced MSE and L1, and cross-entropy
    (class indices or probabilities) subgraph replaced by a lossops node, report)."""
    before = _count(model)
    fused = model
    # the focal loss contains the cross entropy's pattern: it goes first; each pass re-infers shapes, which the
    # conditions read
    for rules in [*FOCAL_PASSES, *PASSES, POINTWISE_PASS, CROSS_ENTROPY_PASS, *SOFT_TARGET_PASSES]:
        fused = rewrite(onnx.shape_inference.infer_shapes(fused), pattern_rewrite_rules=rules)
    added = [n for n in fused.graph.node if n.domain == opset.DOMAIN][before:]
    report = [f"fused {node_label(n)} (reduction {_reduction(n)})" for n in added]
    _forget_shapes(fused, {o for n in added if n.op_type == "SoftTargetCrossEntropyLoss" for o in n.output})
    return opset.with_functions(fused), report


def _forget_shapes(model: ModelProto, names: set[str]) -> None:
    """Drop the declared shapes of `names`, so that shape inference says them: the TorchScript exporter declares
    SoftmaxCrossEntropyLoss's unreduced loss of probabilities with the logits' shape, one dim too many."""
    for value in [*model.graph.output, *model.graph.value_info]:
        if value.name in names:
            value.type.tensor_type.ClearField("shape")


def _count(model: ModelProto) -> int:
    return sum(n.domain == opset.DOMAIN for n in model.graph.node)


def _reduction(node) -> str:
    return next((a.s.decode() for a in node.attribute if a.name == "reduction"), "mean")
