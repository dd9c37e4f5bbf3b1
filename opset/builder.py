"""Emit an operator's decomposition into standard ONNX nodes, for one specialisation: the node's attribute
values, its element type and which optional inputs it has are known, so the nodes are exactly the ones that
specialisation needs (no `If`, nothing dispatched at run time), like ONNX's context-dependent functions.

What every decomposition shares lives here, applied from the operator's record around its `decompose`
(`decomposition`), as the kernel engine applies it around a tile: the run-time guards of the shape rules,
which static inference cannot decide when dims are symbolic (each is a node named with the rule, which fails
when the rule is broken, so the runtime's error names the operator, the input and the expectation:
`checked`), the inputs in the compute type, then a loss's reduction (sums in float64) or a gradient's mean
scale and sum back to its input's shape. A `decompose` is the elementwise formula alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from onnx import AttributeProto, NodeProto, TensorProto, helper, numpy_helper

from . import rows as class_rows
from . import sequences as sequence_losses
from .shapes import full_shape
from .spec import BROADCAST, EXACT, FITS, PRINCIPAL, OpDef
from .sum_back import sum_to_shape_of

Branch = Callable[["Builder"], str]


def compute_type(elem_type: int) -> int:
    """float16/bfloat16 compute in float32; float and double in themselves (docs/operators.md)."""
    return TensorProto.DOUBLE if elem_type == TensorProto.DOUBLE else TensorProto.FLOAT


@dataclass
class Static:
    """What an expansion knows about the graph around the node (for lowering; function bodies know nothing).

    `shapes`: value name -> shape (dims int, or str/None where not static; None when even the rank is not).
    With `initializers` set (the lowered forms: CANN's graph mode claims no Constant node, and onnx2tf turns
    an Expand whose shape comes from one into that shape), constants become initializers, and a constant input
    is converted here instead of by a Cast of initializers.
    Without `guards` (CANN's graph mode, which claims no Concat), symbolic shapes are not checked at run time:
    the provider's own kernels reject shapes that do not broadcast."""

    shapes: dict[str, tuple | None] = field(default_factory=dict)
    constants: dict[str, TensorProto] = field(default_factory=dict)  # the model's initializers
    initializers: list[TensorProto] | None = None  # made by the expansion, when constants must be initializers
    guards: bool = True
    # the portable form (converters/lowering.py) computes float32 log1p as a series that no consumer's Log or
    # Atanh can spoil; function bodies and CANN's graph keep the shorter form
    portable: bool = False
    # CANN's graph mode claims a shorter list of ops (ort_ext/cann_support.json): there a class loss picks each
    # row's value with its one-hot mask, not GatherElements
    cann: bool = False

    def static_shape(self, name: str) -> tuple[int, ...] | None:
        shape = self.shapes.get(name)
        return shape if shape is not None and all(isinstance(d, int) for d in shape) else None


class Nodes:
    """Appends standard nodes with fresh names (`prefix`, a hint, a count) to `nodes`; scalar and int64 vector
    constants are made once per value and type, as Constant nodes or, where `initializers` is given, there."""

    def __init__(self, prefix: str, nodes: list[NodeProto] | None = None,
                 initializers: list[TensorProto] | None = None):
        self.prefix = prefix
        self.nodes = [] if nodes is None else nodes
        self.initializers = initializers
        self._counter = 0
        self._consts: dict[tuple, str] = {}

    def fresh(self, hint: str) -> str:
        self._counter += 1
        return f"{self.prefix}{hint}_{self._counter}"

    def op(self, op_type: str, *inputs: str, name: str | None = None, hint: str = "", **attrs) -> str:
        out = self.fresh(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=name, **attrs))
        return out

    def _constant(self, tensor: TensorProto) -> str:
        tensor.name = self.fresh("const")
        if self.initializers is not None:
            self.initializers.append(tensor)
        else:
            self.nodes.append(helper.make_node("Constant", [], [tensor.name], value=tensor))
        return tensor.name

    def const(self, value: float, elem_type: int) -> str:
        """A scalar constant of `elem_type`."""
        key = (value, elem_type)
        if key not in self._consts:
            self._consts[key] = self._constant(helper.make_tensor("c", elem_type, [], [value]))
        return self._consts[key]

    def ints(self, values: list[int]) -> str:
        key = ("ints", tuple(values))
        if key not in self._consts:
            self._consts[key] = self._constant(helper.make_tensor("c", TensorProto.INT64, [len(values)], values))
        return self._consts[key]


class Builder(Nodes):
    """Collects the nodes of one specialisation, computing in `compute` (a TensorProto element type)."""

    def __init__(self, op: OpDef, attrs: dict, elem_type: int, prefix: str, static: Static | None = None):
        self.opdef = op
        self.attrs = attrs
        self.elem_type = elem_type
        self.compute = compute_type(elem_type)
        self.static = static or Static()
        super().__init__(prefix, initializers=self.static.initializers)
        self._full: str | None = None  # F as an int64 [rank] (see `full`)
        self._f0: str | None = None  # an empty tensor of shape (*F, 0), once `checked` guarded the inputs
        self._names: list[str] = []  # the inputs `checked` was given
        self._static_full: tuple[int, ...] | None = None  # F, where every shape is static
        self._guards: dict[int, tuple[str, int]] = {}  # input slot -> (its guard's empty tensor, the axis of 0)
        self._value_shapes: dict[str, tuple | None] = {}  # an input's value in the compute type -> its shape
        self.rows: class_rows.Rows | None = None  # a class loss's rows (rows.py), for its `decompose`
        self.sequences: sequence_losses.Sequences | None = None  # a sequence loss's (sequences.py)

    # --- the record around the formula ---

    def decomposition(self, names: list[str]) -> str:
        """The operator's decomposition of the inputs `names` ("" where absent), in the compute type (or float64
        for a sum): its shape rules guarded, its inputs cast, its `decompose` called with them ("" for an absent
        optional input), then the record applied: a loss's reduction, or a gradient's mean scale (`reduction`,
        applied to `grad_output` before the formula: the kernel engine's order) and sum back to the shape of the
        input it is the gradient of. `decompose` returns a loss's elementwise
        terms over F, or a gradient's over F (a formula that reads no input spanning F expands to `self.full`)."""
        op = self.opdef
        if op.classes:
            return class_rows.decomposition(self, names)
        if op.sequences:
            return sequence_losses.decomposition(self, names)
        shapes = [self.static.shapes.get(n) if n else None for n in names]  # of the graph's names, before checks
        checked = self.checked(names)
        first = len(self.nodes)
        values = [self.to_compute(n) if n else "" for n in checked]
        casts = [v for v, n in zip(values, checked, strict=True) if v != n]
        self._value_shapes = {v: s for v, s in zip(values, shapes, strict=True) if v}
        input = checked[op.principal]
        if op.output_input is not None:  # a gradient: its grad_output scaled first, so no finite answer overflows
            g = [i.name for i in op.inputs].index("grad_output")
            values[g] = self.reduced_gradient(values[g], input)
            self._value_shapes[values[g]] = shapes[g]  # divided by a scalar: a formula of it spans what it spanned
        value = op.decompose(self, *values)
        if op.reduces:
            value = self.reduce_loss(value, input)
        elif op.output_input is not None:
            k = op.output_input
            if any(i.shape == BROADCAST for i in op.inputs):
                others = [s for j, s in enumerate(shapes) if j != k and names[j]]
                value = sum_to_shape_of(self, value, checked[k], [shapes[k], *others])
        self._drop_unread(casts, first)
        return self._after_every_guard(value, checked)

    def expanded(self, value: str, *operands: str) -> str:
        """`value`, computed from input values `operands` alone, over F: an Expand to F unless their static shapes
        broadcast to F already."""
        if self.is_full([self._value_shapes.get(o) for o in operands]):
            return value
        return self.op("Expand", value, self.full)

    def _drop_unread(self, casts: list[str], first: int) -> None:
        """Remove the inputs' casts (nodes from index `first`, or initializers) that the formula did not read."""
        read = {name for node in self.nodes for name in node.input}
        unread = set(casts) - read
        self.nodes[first:] = [n for n in self.nodes[first:] if not set(n.output) & unread]
        if self.initializers is not None:
            self.initializers[:] = [t for t in self.initializers if t.name not in unread]

    def _after_every_guard(self, value: str, checked: list[str]) -> str:
        """`value`, made to depend on the guard of every input that nothing reads (a formula that needs only an
        input's shape, or not even that: the rule must still be checked)."""
        read = {name for node in self.nodes for name in node.input}
        for k, (guard, axis) in self._guards.items():
            if checked[k] not in read:
                value = self._after(value, self.op("Shape", value), guard, axis)
        return value

    # --- constants ---

    def const(self, value: float, elem_type: int | None = None) -> str:
        """A scalar constant in the compute type (or `elem_type`), one per value and type."""
        return super().const(value, elem_type or self.compute)

    def int_scalar(self, value: int) -> str:
        return self.const(value, TensorProto.INT64)

    def looked_up(self, table: str, values: str, past: str, rule: str) -> str:
        """`table` at the int64 indices `values` by a Gather named with `rule`, which fails for an index outside
        the table (a run-time check that names the rule); a negative index is first made `past`, the table's
        length: Gather would count it from the end."""
        index = self.op("Where", self.op("Less", values, self.int_scalar(0)), past, values)
        return self.op("Gather", table, index, name=rule)

    def to_compute(self, name: str) -> str:
        """An input in the compute type; an absent optional input is the constant 1 (what it means)."""
        if not name:
            return self.const(1.0)
        if self.static.initializers is not None and name in self.static.constants:  # no node of initializers only
            array = numpy_helper.to_array(self.static.constants[name]).astype(helper.tensor_dtype_to_np_dtype(
                self.compute))
            return self._constant(numpy_helper.from_array(array))
        return name if self.elem_type == self.compute else self.op("Cast", name, to=self.compute)

    def result(self, value: str, output: str) -> None:
        """Write `value` (compute type, or float64 for a sum) to `output` in the element type: one rounding.
        (A Cast to the same type is removed by onnxruntime's basic graph optimisations.)"""
        self.nodes.append(helper.make_node("Cast", [value], [output], to=self.elem_type))

    def times(self, value: str, factor: str) -> str:
        """value * an optional input's value, or value itself where the input is absent ("": it means 1)."""
        return self.op("Mul", value, factor) if factor else value

    def unless_zero(self, factor: str, product: str) -> str:
        """`product` (a multiple of `factor`), but 0 where `factor` is 0: the limit where the other factor is
        infinite, so 0 * inf gives 0 and not NaN (as the kernels)."""
        return self.op("Where", self.op("Equal", factor, self.const(0.0)), self.const(0.0), product)

    def at_least(self, value: str, low: str) -> str:
        """max(value, low) that keeps NaN (ONNX's Max leaves NaN to the runtime)."""
        return self.op("Where", self.op("Less", value, low), low, value)

    def param(self, attr: str) -> str:
        """A numeric attribute as a scalar of the compute type: its value where the node is known (an expansion),
        else a reference to the function's attribute (a function body serves every value)."""
        if attr in self.attrs:
            return self.const(float(self.attrs[attr]))
        out = self._attribute_reference(attr, "value_float", AttributeProto.FLOAT)
        return out if self.compute == TensorProto.FLOAT else self.op("Cast", out, to=self.compute)

    def int_param(self, attr: str) -> str:
        """An int attribute as an int64 scalar: its value where the node is known, else a reference."""
        if attr in self.attrs:
            return self.int_scalar(int(self.attrs[attr]))
        return self._attribute_reference(attr, "value_int", AttributeProto.INT)

    def _attribute_reference(self, attr: str, field: str, kind: int) -> str:
        """A Constant whose value is the function's attribute `attr`."""
        out = self.fresh("param")
        node = helper.make_node("Constant", [], [out])
        node.attribute.append(AttributeProto(name=field, type=kind, ref_attr_name=attr))
        self.nodes.append(node)
        return out

    def choose(self, attr: str, branches: dict[str | int, Branch]) -> str:
        """The branch for the node's value of `attr` (every allowed value must have one)."""
        assert set(branches) == set(self.opdef.attribute(attr).allowed), (attr, branches.keys())
        return branches[self.attrs[attr]](self)

    # --- sizes and sums ---

    def size(self, name: str) -> str:
        """Size(name), an int64 scalar: a constant where its shape is static; in the portable form the product of
        its shape (onnx2torch has no Size)."""
        shape = self.static.static_shape(name)
        if shape is not None:
            return self.int_scalar(math.prod(shape))
        if self.static.portable:
            return self.op("ReduceProd", self.op("Shape", name), keepdims=0)
        return self.op("Size", name)

    def numel(self, name: str, elem_type: int | None = None, same_shape: str | None = None) -> str:
        """The number of elements of `name` as a scalar of the compute type (or `elem_type`); counted on
        `same_shape` (a tensor of name's shape) where the shape is not static: onnxruntime has no bfloat16 Size."""
        shape = self.static.static_shape(name)
        if shape is not None:
            count = 1
            for d in shape:
                count *= d
            return self.const(float(count), elem_type)
        return self.op("Cast", self.size(same_shape or name), to=elem_type or self.compute)

    @property
    def static_count(self) -> int | None:
        """The number of elements of F where every shape is static (`checked` must have run), else None."""
        return None if self._static_full is None else math.prod(self._static_full)

    def numel_full(self, over_full: str, elem_type: int | None = None) -> str:
        """The number of elements of F: a constant where F is static (no Size), else counted on `over_full`,
        a tensor of F's shape."""
        if self.static_count is None:
            return self.numel(over_full, elem_type)
        return self.const(float(self.static_count), elem_type)

    def divided(self, value: str, divisor: Callable[[], str]) -> str:
        """`value` (over F) / `divisor()`; where F is static and empty, `value` itself (empty too): no division
        by a constant 0, which TVM's constant folder evaluates, and fails on."""
        return value if self.static_count == 0 else self.op("Div", value, divisor())

    def count_of_full(self) -> str:
        """The number of elements of F in the compute type, from F's shape (before any tensor spans F)."""
        if self.static_count is not None:
            return self.const(float(self.static_count))
        return self.op("Cast", self.op("ReduceProd", self.full, keepdims=0), to=self.compute)

    def summed(self, values: str, axes: list[int] | None, keepdims: int) -> str:
        """ReduceSum of float64 `values` (over F) over static `axes` (None: all). In the portable form, where F is
        static and empty and the sum is not, the zeros it comes to, as a constant: TVM's ReduceSum over nothing
        returns whatever the memory held. (An empty constant is no better: OpenVINO reads it as a scalar.)"""
        shape = None
        if self.static.portable and self.static_count == 0:
            rank = len(self._static_full)
            reduced = set(range(rank)) if axes is None else {a % rank for a in axes}
            shape = [1 if a in reduced else d for a, d in enumerate(self._static_full) if keepdims or a not in reduced]
        if shape is None or math.prod(shape) == 0:
            return self.op("ReduceSum", values, *([self.ints(axes)] if axes is not None else []), keepdims=keepdims)
        return self._constant(helper.make_tensor("zeros", TensorProto.DOUBLE, shape, [0.0] * math.prod(shape)))

    def total(self, values: str) -> str:
        """The sum of all elements, accumulated in float64: onnxruntime's float32 ReduceSum was 7e-4 to 7e-3
        relative off over 2e7 elements (measured); a float64 sum of float32 terms is exact to ~1e-16."""
        if self.compute != TensorProto.DOUBLE:
            values = self.op("Cast", values, to=TensorProto.DOUBLE)
        return self.summed(values, None, 0)

    def batch_size(self, input: str, elem_type: int | None = None) -> str:
        """input.shape[0], or 1 for a rank-0 input (PyTorch's batchmean divisor)."""
        shape = self.static.shapes.get(input)
        if shape is not None and (len(shape) == 0 or isinstance(shape[0], int)):
            return self.const(float(shape[0]) if shape else 1.0, elem_type)
        if shape:  # rank known, first dim symbolic
            first = self.op("Gather", self.op("Shape", input), self.int_scalar(0))
            return self.op("Cast", first, to=elem_type or self.compute)
        padded = self.op("Concat", self.op("Shape", input), self.ints([1]), axis=0)
        return self.op("Cast", self.op("Gather", padded, self.int_scalar(0)), to=elem_type or self.compute)

    def padded(self, shape: str, rank: str) -> str:
        """A shape vector with leading 1s up to `rank` (an int64 scalar)."""
        missing = self.op("Reshape", self.op("Sub", rank, self.size(shape)), self.ints([1]))
        ones = self.op("ConstantOfShape", missing, value=helper.make_tensor("one", TensorProto.INT64, [1], [1]))
        return self.op("Concat", ones, shape, axis=0)

    def reduce_loss(self, loss: str, input: str) -> str:
        """`reduction` of an elementwise loss over F: the loss itself, or its float64 sum (divided by the number
        of elements for mean, by input's first dimension for batchmean). The caller casts to T."""
        def total(s: Builder) -> str:
            return s.total(loss)

        double = TensorProto.DOUBLE

        def averaged(divisor: Callable[[Builder], str]) -> Callable[[Builder], str]:
            def average(s: Builder) -> str:
                if s.static_count == 0:
                    # no constant 0 divisor (TVM folds it): the mean of nothing is NaN, made from the (empty) data
                    # so that no node reads constants only (CANN's graph mode claims none)
                    return s.op("Mul", total(s), s.const(math.nan, double))
                return s.op("Div", total(s), divisor(s))
            return average

        branches = {
            "none": lambda s: loss,
            "sum": total,
            "mean": averaged(lambda s: s.numel_full(loss, double)),
            "batchmean": averaged(lambda s: s.batch_size(input, double)),
        }
        return self.choose("reduction", {k: v for k, v in branches.items()
                                         if k in self.opdef.attribute("reduction").allowed})

    def reduced_gradient(self, grad_output: str, input: str) -> str:
        """The gradient of a reduced loss fed back: `grad_output` divided for `mean` by the number of elements of
        F, for `batchmean` by `input`'s first dim, where the operator has it. Divided before the formula multiplies
        it, so that the formula's factors never overflow an answer the division brings back into range (PyTorch's
        MSE gradient is (2 / N) * (x - y) * g, not 2 * (x - y) * g / N)."""
        branches = {
            "none": lambda s: grad_output,
            "sum": lambda s: grad_output,
            "mean": lambda s: s.divided(grad_output, s.count_of_full),
            "batchmean": lambda s: s.divided(grad_output, lambda: s.batch_size(input)),
        }
        return self.choose("reduction", {k: v for k, v in branches.items()
                                         if k in self.opdef.attribute("reduction").allowed})

    # --- shape rules ---

    def checked(self, names: list[str]) -> list[str]:
        """The inputs after the operator's shape rules are guarded (names in schema order, "" where absent); F
        becomes `self.full`. Where every shape is static, inference checked the rules and F is a constant.

        Each rule is checked on empty stand-ins, so the checks cost nothing: broadcasting by an Add of tensors of
        shape (*its shape, 0), identity of shapes by `_identical`; the failing node is named with the rule.
        Each checked input reaches the computation only through its check."""
        op = self.opdef
        known = {i.name: self.static.static_shape(n) for i, n in zip(op.inputs, names, strict=True) if n}
        if all(shape is not None for shape in known.values()):
            self._static_full = tuple(full_shape(op, known))
            self._full = self.ints(list(self._static_full))
            return list(names)
        principal = op.principal
        self._names = list(names)
        if not self.static.guards:
            spread = {i.name: self.static.shapes.get(n) for i, n in zip(op.inputs, names, strict=True)
                      if n and i.shape in (PRINCIPAL, BROADCAST)}
            if spread["input"] is not None and full_shape(op, spread) == spread["input"]:
                self._full = self.op("Shape", names[principal])  # F is input's shape (dims equal by name, or 1)
            return list(names)
        shapes = {k: self.op("Shape", n) for k, n in enumerate(names) if n}
        empty = {k: self.op("ConstantOfShape", self.op("Concat", shape, self.ints([0]), axis=0))
                 for k, shape in shapes.items()}
        f0 = empty[principal]  # (*F, 0)
        out = list(names)
        for k, i in enumerate(op.inputs):
            if i.shape == BROADCAST and names[k]:
                f0 = self.op("Add", empty[principal], empty[k], name=f"{op.name}: inputs 'input' and '{i.name}' "
                             "must broadcast")
                out[k] = self._after(names[k], shapes[k], f0, -1)
                self._guards[k] = (f0, -1)
        for k, i in enumerate(op.inputs):
            if not names[k] or i.shape not in (EXACT, FITS):
                continue
            if i.shape == EXACT:
                check = self._identical(shapes[k], shapes[principal],
                                        f"{op.name}: input '{i.name}' must have exactly input's shape")
            else:
                where = "input's shape" if f0 is empty[principal] else "the broadcast shape of 'input' and 'target'"
                rule = f"{op.name}: input '{i.name}' must broadcast to {where}"
                fits = self.op("Add", empty[k], f0, name=rule)
                check = self._identical(self.op("Shape", fits), self.op("Shape", f0), f"{rule} without enlarging it")
            out[k] = self._after(names[k], shapes[k], check, 0)
            self._guards[k] = (check, 0)
        self._f0 = f0
        return out

    def is_full(self, shapes: list[tuple | None]) -> bool:
        """Whether operands of these static shapes broadcast to F already (an Expand to F would do nothing:
        OpenVINO makes a rank-0 tensor rank 1 in one); False where a shape or F is not static."""
        if any(s is None or not all(isinstance(d, int) for d in s) for s in shapes) or self._static_full is None:
            return False
        rank = max((len(s) for s in shapes), default=0)
        padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
        broadcast = tuple(next((d for d in column if d != 1), 1) for column in zip(*padded, strict=True))
        return broadcast == self._static_full

    @property
    def full(self) -> str:
        """F, the shape the operator computes over (int64 [rank]); `checked` must have run."""
        if self._full is None:
            if self._f0 is None:  # unguarded, and the shapes do not say: broadcast stand-ins of the inputs
                stand_ins = [self.op("ConstantOfShape", self.op("Concat", self.op("Shape", n), self.ints([0]), axis=0))
                             for i, n in zip(self.opdef.inputs, self._names, strict=True)
                             if n and i.shape in (PRINCIPAL, BROADCAST)]
                self._f0 = stand_ins[0] if len(stand_ins) == 1 else self.op("Add", *stand_ins)
            self._full = self.op("Slice", self.op("Shape", self._f0), self.ints([0]), self.ints([-1]))
        return self._full

    def _identical(self, a: str, b: str, name: str) -> str:
        """An empty tensor, from a node `name` that fails unless shape vectors `a` and `b` are identical: Add of
        stand-ins of shape (0, *(a + 2)) and (0, *(b + 2)). Their dimensions are all >= 2, so they broadcast
        only when equal, and where the ranks differ the shorter one's leading 0 meets a dimension >= 2 of the
        longer, which does not broadcast either. (onnxruntime's Concat skips empty inputs unchecked, so it
        cannot be the check; measured.)"""
        def stand_in(shape: str) -> str:
            dims = self.op("Concat", self.ints([0]), self.op("Add", shape, self.ints([2])), axis=0)
            return self.op("ConstantOfShape", dims)

        return self.op("Add", stand_in(a), stand_in(b), name=f"{name} (the sizes onnxruntime names are each "
                       "dimension plus 2)")

    def _after(self, value: str, shape: str, check: str, zero_axis: int) -> str:
        """`value`, reshaped to its own shape plus the extent of `check`'s axis `zero_axis` (always 0): it exists
        only once the check ran and passed. That extent rather than Size(check): tract folds it into the
        Reshape's shape, and onnx2torch has no Size. A scalar: onnxruntime 1.24 broadcasts the shape [] of a
        rank-0 value and a [1] to [1] (measured with onnxruntime-cann)."""
        zero = self.op("Gather", self.op("Shape", check), self.int_scalar(zero_axis))
        return self.op("Reshape", value, self.op("Add", shape, zero))
