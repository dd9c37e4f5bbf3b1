"""What every class loss's decomposition shares, applied from its record around its `decompose` (as
`Builder.decomposition` applies an elementwise loss's): the run-time guards of the class rules where shapes are
symbolic, each row's target checked and its weight looked up once (`Rows`), the rows whose target is
`ignore_index` masked out, then the loss's reduction (a mean weighted by the rows' weights, as PyTorch's and
ONNX's) or the gradient's scale. A class loss's `decompose` gets the builder, whose `rows` it reads, and its
inputs in the compute type (the indices as they are); it returns a loss's terms per row, shape (N, 1, d1, ...),
or a gradient over input's shape from `grad_output` already scaled, masked and shaped (N, 1, d1, ...).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from onnx import TensorProto, helper

from .shapes import NOT_A_CLASS, NOT_CLASSES
from .spec import EXACT, LABELS, LOSS, PER_CLASS, ROWS

if TYPE_CHECKING:
    from .builder import Builder


class Rows:
    """A class loss's rows (N, 1, d1, ...) and classes, computed once per decomposition where first read."""

    def __init__(self, b: Builder, input: str):
        self.b, self.input = b, input
        # targets other than a class index per row (probabilities, label lists): no row is ignored, and the mean
        # divides by the number of rows
        self.every_row = not any(i.shape == ROWS for i in b.opdef.inputs)
        self.target = self.weight_input = self.grad_output = ""  # set once guarded (`decomposition`)

    @functools.cached_property
    def shape(self) -> str:
        return self.b.op("Shape", self.input)

    @functools.cached_property
    def rank(self) -> int | None:
        shape = self.b.static.shapes.get(self.input)
        return None if shape is None else len(shape)

    @functools.cached_property
    def static_classes(self) -> int | None:
        """C where the graph says it (lowering), else None."""
        shape = self.b.static.shapes.get(self.input)
        return shape[1] if shape is not None and len(shape) > 1 and isinstance(shape[1], int) else None

    @functools.cached_property
    def count(self) -> str:
        """C, an int64 scalar; the node that reads it fails for an input of rank below 2."""
        b = self.b
        if self.static_classes is not None:
            return b.int_scalar(self.static_classes)
        rule = f"{b.opdef.name}: " + NOT_CLASSES.format(shape="of rank < 2")
        return b.op("Gather", self.shape, b.int_scalar(1), name=rule)

    def per_class(self, elem_type: int | None = None) -> str:
        """1 / C in the compute type (or `elem_type`), 1 where there is no class (a sum over no class is 0 then,
        not NaN)."""
        b, c = self.b, self.static_classes
        if c is not None:
            return b.const(1.0 / max(c, 1), elem_type)
        count = b.op("Cast", self.count, to=elem_type or b.compute)
        return b.op("Div", b.const(1.0, elem_type), b.op("Max", count, b.const(1.0, elem_type)))

    def classes(self, scale: float | None = None) -> str:
        """C in the compute type, or `scale` / C; a constant where C is static (CANN claims no node that reads
        constants only)."""
        b, c = self.b, self.static_classes
        if c is not None:
            return b.const(float(c) if scale is None else scale / c)
        count = b.op("Cast", self.count, to=b.compute)
        return count if scale is None else b.op("Div", b.const(scale), count)

    @functools.cached_property
    def ignored(self) -> str:
        """bool (N, 1, d1, ...): the rows whose target is ignore_index."""
        return self.b.op("Equal", self.target_rows, self.b.int_param("ignore_index"))

    def unless_ignored(self, value: str, zero: str | None = None) -> str:
        """`value` (over rows), 0 (or `zero`) in the ignored rows."""
        if self.every_row:
            return value
        return self.b.op("Where", self.ignored, zero or self.b.const(0.0), value)

    @functools.cached_property
    def target_rows(self) -> str:
        return self.b.op("Unsqueeze", self.target, self.b.ints([1]))

    @functools.cached_property
    def index(self) -> str:
        """int64 (N, 1, d1, ...): each row's class, 0 where ignored; a Gather from the class numbers, named with
        the rule, fails for a class outside [0, C) (a negative one first made C: Gather would count it from the
        end)."""
        b = self.b
        kept = self.unless_ignored(self.target_rows, b.int_scalar(0))
        if b.static_count == 0:  # no row to check: OpenVINO 2026.4's Gather of an empty index ends the process (SIGFPE)
            return kept
        return b.looked_up(self.numbers, kept, self.count, f"{b.opdef.name}: {NOT_A_CLASS}")

    def picked(self, x: str) -> str:
        """x (N, C, d1, ...) at each row's class: (N, 1, d1, ...)."""
        b = self.b
        if b.static.cann:
            return b.op("ReduceSum", b.op("Where", self.one_hot, x, b.const(0.0)), b.ints([1]), keepdims=1)
        return b.op("GatherElements", x, self.index, axis=1)

    @functools.cached_property
    def numbers(self) -> str:
        """int64 (C,): 0, 1, ..., C - 1."""
        if self.static_classes is not None:
            return self.b.ints(list(range(self.static_classes)))
        return self.b.op("Range", self.b.int_scalar(0), self.count, self.b.int_scalar(1))

    @functools.cached_property
    def weight(self) -> str:
        """weight[target] per row in the compute type, 0 where ignored; "" without weight (it means 1)."""
        b = self.b
        if not self.weight_input:
            return ""
        if b.static_count == 0:  # no row (and no Gather of an empty index: OpenVINO's ends the process)
            return b.op("Cast", self.index, to=b.compute)
        return self.unless_ignored(b.op("Gather", self.weight_input, self.index))

    def divisor(self, elem_type: int = TensorProto.DOUBLE) -> str:
        """What the mean divides by, a scalar of `elem_type`: the total weight (or number) of the rows not ignored;
        the number of rows for targets of input's shape (whatever the weights, as PyTorch); a constant where it is
        static (CANN claims no node that reads constants only)."""
        b = self.b
        if not self.every_row:
            total = b.total(self.weight or self.unless_ignored(b.const(1.0)))
            return total if elem_type == TensorProto.DOUBLE else b.op("Cast", total, to=elem_type)
        if b.static_count is not None:
            return b.const(float(b.static_count), elem_type)
        return b.op("Cast", b.op("ReduceProd", self.rows_shape, keepdims=0), to=elem_type)

    @functools.cached_property
    def rows_shape(self) -> str:
        """int64: input's shape without its class axis."""
        b = self.b
        return b.op("Concat", b.op("Slice", self.shape, b.ints([0]), b.ints([1])),
                    b.op("Slice", self.shape, b.ints([2]), b.ints([2**62])), axis=0)

    @functools.cached_property
    def fed(self) -> str:
        """A gradient's grad_output, shape (N, 1, d1, ...), scaled for the reduction (divided by the rows' total
        weight for `mean`) and 0 in the ignored rows (which read nothing, not even a NaN)."""
        g = self.grad_output
        fed = self.b.choose("reduction", {
            "none": lambda s: s.op("Unsqueeze", g, s.ints([1])), "sum": lambda s: g,
            "mean": lambda s: s.divided(g, lambda: self.divisor(s.compute))})
        return self.unless_ignored(fed)

    def along_classes(self, per_class: str) -> str:
        """A (C,) tensor shaped to broadcast along axis 1 of input: (C, 1, ..., 1)."""
        return self.b.op("Reshape", per_class, self.trailing)

    @functools.cached_property
    def trailing(self) -> str:
        """The shape (-1, 1, ..., 1) of input's rank less one, int64."""
        b = self.b
        if self.rank is not None:
            return b.ints([-1] + [1] * (self.rank - 2))
        ones = b.op("ConstantOfShape", b.op("Reshape", b.op("Sub", b.size(self.shape), b.int_scalar(2)),
                                            b.ints([1])), value=helper.make_tensor("one", TensorProto.INT64, [1], [1]))
        return b.op("Concat", b.ints([-1]), ones, axis=0)

    @functools.cached_property
    def one_hot(self) -> str:
        """bool (N, C, d1, ...): true at each row's class (at class 0 for an ignored row: its terms are 0)."""
        b, c = self.b, self.static_classes
        if c is not None:  # a constant of that shape (CANN claims no node that reads constants only)
            numbers = helper.make_tensor("classes", TensorProto.INT64, [c] + [1] * (self.rank - 2), list(range(c)))
            return b.op("Equal", b._constant(numbers), self.index)
        return b.op("Equal", self.along_classes(self.numbers), self.index)


def decomposition(b: Builder, names: list[str]) -> str:
    """A class loss's decomposition of the inputs `names` ("" where absent) in the compute type (float64 for a
    sum), as `Builder.decomposition` for an elementwise one."""
    op = b.opdef
    b.rows = rows = Rows(b, names[op.principal])
    shape = b.static.static_shape(names[op.principal])
    if shape is not None and len(shape) > 1:  # the rows' static shape: sums over none are written as zeros
        b._static_full = (shape[0], 1, *shape[2:])
    checked = _guarded(b, names)
    values = [n if (i.indices or not n) else b.to_compute(n) for i, n in zip(op.inputs, checked, strict=True)]
    given = {i.name: v for i, v in zip(op.inputs, values, strict=True)}
    rows.target, rows.weight_input = given["target"], given.get("weight", "")  # a soft target is not read here
    if not op.reduces:  # a gradient: its formula reads `rows.fed`
        rows.grad_output = given["grad_output"]
        return op.decompose(b, *values)
    terms = rows.unless_ignored(op.decompose(b, *values))  # a loss: its terms per row

    def mean(s: Builder) -> str:
        if s.static_count == 0:  # no division by a constant 0 (TVM folds it): NaN, as 0 / 0
            return s.op("Mul", s.total(terms), s.const(math.nan, TensorProto.DOUBLE))
        return s.op("Div", s.total(terms), rows.divisor())

    return b.choose("reduction", {"none": lambda s: s.op("Squeeze", terms, s.ints([1])),
                                  "sum": lambda s: s.total(terms), "mean": mean})


def _guarded(b: Builder, names: list[str]) -> list[str]:
    """The inputs after the class rules are guarded where a shape is symbolic (inference checked static ones):
    each input reaches the computation only through a check that its shape is the rule's."""
    op = b.opdef
    known = [b.static.static_shape(n) for n in names if n]
    if all(shape is not None for shape in known) or not b.static.guards:
        return list(names)
    shape = b.rows.shape
    classes = b.op("Reshape", b.rows.count, b.ints([1]))
    rows = b.rows.rows_shape
    loss = rows if b.attrs["reduction"] == "none" else b.ints([])
    expected = {ROWS: (rows, "input's shape without its class axis"), PER_CLASS: (classes, "shape (C,)"),
                LOSS: (loss, "the loss's shape"), EXACT: (shape, "exactly input's shape"),
                LABELS: (shape, "exactly input's shape")}
    out = list(names)
    for k, i in enumerate(op.inputs):
        if names[k] and i.shape in expected:
            want, words = expected[i.shape]
            own = b.op("Shape", names[k])
            check = b._identical(own, want, f"{op.name}: input '{i.name}' must have {words}")
            out[k] = b._after(names[k], own, check, 0)
            b._guards[k] = (check, 0)
    return out
