"""MultilabelMarginLoss: multi-class multi-label hinge loss of class scores (aclnnMultilabelMarginLoss)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ..builder import Builder
from ..shapes import NOT_A_LABEL
from ..spec import CLASSES, LABEL_LIST, LABELS, Aclnn, Attribute, Gradient, Input, OpDef

DOC = """\
Multi-label hinge loss of scores `input`, shape (N, C, d1, ...), for label lists `target` of the same shape, as
PyTorch's `multilabel_margin_loss`: along axis 1, a row's target holds its labels (classes in [0, C)) up to its
first -1, and -1 or any class after it (not read):

    loss[n, d...] = sum_j sum_i max(0, 1 - (input[n, y_j, d...] - input[n, i, d...])) / C

over the row's labels y_j (a label listed twice counts twice, as PyTorch) and the classes i that are none of its
labels. A margin that is NaN adds nothing (PyTorch's `z > 0` test). `mean` divides the sum by the number of rows
N * d1 * ... (NaN for no row); a row of no class has loss 0. A target value outside [-1, C) anywhere is an
error. PyTorch takes (C,) and (N, C); the classes on axis 1 with positions after them are lossops' (each
position's row is PyTorch's (N, C) row). Its gradient with respect to `input` is MultilabelMarginLossBackward.
float16 and bfloat16 compute in float32, the margins in float64 (their decisions z > 0 then exact).
"""

TARGET = Input("target", "Label lists, int64, exactly `input`'s shape: each row's labels along axis 1, then -1.",
               shape=LABELS, domain=LABEL_LIST)
REDUCTION = Attribute("reduction", "Specifies the reduction to apply to the output: 'none' (one loss per row), 'mean' "
                      "(the sum divided by the number of rows) or 'sum'.", "mean", allowed=("none", "mean", "sum"))


def checked_labels(b: Builder, t: str) -> str:
    """`t` after its values are checked: a Gather from -1, 0, ..., C - 1 at t + 1, named with the rule, fails for
    a value outside [-1, C) (one below -1 first made C + 1: Gather would count it from the end)."""
    rows, c = b.rows, b.rows.static_classes
    if b.static_count == 0:  # no row to check: OpenVINO 2026.4's Gather of an empty index ends the process (SIGFPE)
        return t
    past = b.int_scalar(c + 1) if c is not None else b.op("Add", rows.count, b.int_scalar(1))
    values = b.ints(list(range(-1, c))) if c is not None else b.op("Range", b.int_scalar(-1), rows.count,
                                                                   b.int_scalar(1))
    return b.looked_up(values, b.op("Add", t, b.int_scalar(1)), past, f"{b.opdef.name}: {NOT_A_LABEL}")


def margin_type(b: Builder) -> int:
    """The type the margins are computed in: float64 (exact for float16 and bfloat16 scores, no overflow at
    float32's largest, the kernels' z > 0 decisions), the compute type for CANN (which takes no float64)."""
    return b.compute if b.static.cann else TensorProto.DOUBLE


def _spread(b: Builder, values: str, lead: list[int]) -> str:
    """`values` ((C,) or (C, C)) reshaped to input's rank + 1 for the axes (N, K, C, d1, ...): `lead` ones first,
    ones after."""
    ones = b.op("Slice", b.rows.trailing, b.ints([1]), b.ints([2**62]))  # rank - 2 ones
    return b.op("Reshape", values, b.op("Concat", b.ints(lead), b.op("Shape", values), ones, axis=0))


def _constant(b: Builder, values: np.ndarray) -> str:
    """A static (C,) or (C, C) array as a constant of input's rank + 1 for the axes (N, K, C, d1, ...) (a node
    computing it from constants would be one CANN does not claim)."""
    shape = [1] * (3 - values.ndim) + list(values.shape) + [1] * (b.rows.rank - 2)
    return b._constant(numpy_helper.from_array(values.reshape(shape), "along"))


def classes_on_axis2(b: Builder) -> str:
    """0, 1, ..., C - 1 on axis 2: (1, 1, C, 1, ...)."""
    c = b.rows.static_classes
    if c is not None and b.rows.rank is not None:
        return _constant(b, np.arange(c, dtype=np.int64))
    return _spread(b, b.rows.numbers, [1, 1])


def at_or_before(b: Builder) -> str:
    """1 where j <= k, 0 elsewhere, at [0, k, j] of a (1, C, C, 1, ...) tensor in the compute type."""
    c = b.rows.static_classes
    if c is not None and b.rows.rank is not None:
        return _constant(b, np.tril(np.ones((c, c))).astype(helper.tensor_dtype_to_np_dtype(b.compute)))
    k = b.rows.numbers
    triangle = b.op("Less", b.op("Unsqueeze", k, b.ints([0])),
                    b.op("Unsqueeze", b.op("Add", k, b.int_scalar(1)), b.ints([1])))
    return _spread(b, b.op("Cast", triangle, to=b.compute), [1])


def _first_positions(b: Builder, labels: str, listed: str) -> tuple[str, str]:
    """`labels` and `listed` (N, C, d1, ...) cut to their first K positions along axis 1, K the most labels of any
    row: a position where no row has a label adds nothing."""
    per_position = b.op("ReduceSum", b.op("Cast", listed, to=b.compute), b.ints([0]), keepdims=0)  # (C, d1, ...)
    per_position = b.op("ReduceSum", b.op("Flatten", per_position, axis=1), b.ints([1]), keepdims=0)  # (C,)
    used = b.op("Greater", per_position, b.const(0.0))
    most = b.op("ReduceSum", b.op("Cast", used, to=TensorProto.INT64), b.ints([0]), keepdims=1)  # (1,)
    cut = [b.op("Slice", v, b.ints([0]), most, b.ints([1])) for v in (labels, listed)]
    return cut[0], cut[1]


def margins(b: Builder, x: str, t: str) -> tuple[str, str, str]:
    """(hit, counted, z) over (N, K, C, d1, ...), K the target's first positions along axis 1: hit (bool), that
    position k of the row is one of its labels and is class c; z = 1 - x[label k] + x[c], in `margin_type`;
    counted (1 or 0, in the compute type), that k is a label, c none of the row's labels and z > 0. K is the most
    labels a row has in the function form; C in the portable form (tract and TVM take no shape computed from
    data) and for CANN, which gets the ops its graph mode claims (Where rather than And; a sum against a triangle
    rather than CumSum). Memory C * K per row: a form that runs everywhere, not a fast one."""
    wide = margin_type(b)
    if wide != b.compute:
        x = b.op("Cast", x, to=wide)
    labels = checked_labels(b, t)
    # the labels end at the row's first negative value: position k is listed where no position j <= k is negative
    ended = b.op("Cast", b.op("Less", labels, b.int_scalar(0)), to=b.compute)
    if b.static.cann:  # a sum against a triangle (CumSum is not on CANN's list): C * C per row
        before = b.op("ReduceSum", b.op("Mul", b.op("Unsqueeze", ended, b.ints([1])), at_or_before(b)), b.ints([2]),
                      keepdims=0)
        listed = b.op("Equal", before, b.const(0.0))
    else:
        listed = b.op("Equal", b.op("CumSum", ended, b.int_scalar(1)), b.const(0.0))
    if not b.static.portable and not b.static.cann:  # onnxruntime: K, what the intermediates span, made small
        labels, listed = _first_positions(b, labels, listed)
    unlisted = b.op("Where", listed, labels, b.int_scalar(-1))  # -1, no class, at the positions after the labels
    hit = b.op("Equal", b.op("Unsqueeze", unlisted, b.ints([2])), classes_on_axis2(b))
    listed = b.op("Unsqueeze", listed, b.ints([2]))  # (N, K, 1, d...)
    scores = b.op("Unsqueeze", x, b.ints([1]))  # (N, 1, C, d...)
    zero = b.const(0.0, wide)
    # the label's score, the one class it hits picked exactly (no product with 0: a score may be inf or NaN)
    picked = b.op("ReduceSum", b.op("Where", hit, scores, zero), b.ints([2]), keepdims=1)
    times = b.op("ReduceSum", b.op("Cast", hit, to=b.compute), b.ints([1]), keepdims=1)  # (N, 1, C, d...)
    z = b.op("Add", b.op("Sub", b.const(1.0, wide), picked), scores)
    none, one = b.const(0.0), b.const(1.0)
    above = b.op("Where", b.op("Greater", z, zero), one, none)
    counted = b.op("Where", listed, b.op("Where", b.op("Equal", times, none), above, none), none)
    return hit, counted, z


def decompose(b: Builder, x: str, t: str) -> str:
    _, counted, z = margins(b, x, t)
    wide = margin_type(b)
    # in the margins' type, the loss's sum too (the record's result is rounded to the element type once)
    kept = b.op("Where", b.op("Equal", counted, b.const(1.0)), z, b.const(0.0, wide))
    # one ReduceSum over both axes: onnxsim fuses two in a row into one that keeps both (a wrong shape)
    hinges = b.op("Unsqueeze", b.op("ReduceSum", kept, b.ints([1, 2]), keepdims=0), b.ints([1]))  # (N, 1, d...)
    return b.op("Mul", hinges, b.rows.per_class(wide))


DEFINITION = OpDef(
    name="MultilabelMarginLoss",
    summary="Multi-label hinge loss of class scores against label lists.",
    doc=DOC,
    inputs=(Input("input", "Scores, (N, C, d1, ...): the classes on axis 1.", shape=CLASSES), TARGET),
    output=Input("output", "`input`'s shape without its class axis for `none`; a scalar otherwise."),
    attributes=(REDUCTION,),
    decompose=decompose,
    reduces=True,
    torch=("aten::multilabel_margin_loss", "lossops::multilabel_margin_loss"),
    # (N, C) only here (the page also takes (C,)); it also writes isTarget, the (N, C) mask of the rows' labels
    aclnn=Aclnn("aclnnMultilabelMarginLoss", ("self", "target"),
                {"910": True, "310P": False, "A2": True, "A3": True, "950": False},
                ranks=(2,), extra_outputs=("isTarget",)),
    gradient=Gradient("MultilabelMarginLossBackward", ("grad_output", "input", "target")),
)
