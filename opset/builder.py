"""Emit a decomposition into ONNX nodes, either for one known node (static) or as a generic FunctionProto.

A decomposition is written once, as a Python function of a `Builder`. Choices that depend on an attribute
(`reduction`, `log_target`) go through `Builder.choose`: with known attribute values the chosen branch is
emitted inline; in a generic function body they become `If` nodes on the attribute's value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from onnx import AttributeProto, NodeProto, TensorProto, ValueInfoProto, helper, numpy_helper

from .spec import OpDef

Branch = Callable[["Builder"], str]


class Builder:
    """Collects nodes computing in `compute` (a TensorProto element type)."""

    def __init__(self, opdef: OpDef, compute: int, attrs: dict | None, prefix: str, parent: Builder | None = None,
                 static: Static | None = None):
        self.opdef = opdef
        self.compute = compute
        self.attrs = attrs  # None: generic function body, attribute values known only at run time
        self.prefix = prefix
        self.nodes: list[NodeProto] = []
        self._counter = parent._counter if parent else [0]
        self._consts: dict[float, str] = {}
        self.static = static  # set: emit for a provider that takes initializers, not Constant nodes (CANN)

    def fresh(self, hint: str) -> str:
        self._counter[0] += 1
        return f"{self.prefix}{hint}_{self._counter[0]}"

    def op(self, op_type: str, *inputs: str, **attrs) -> str:
        out = self.fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def _constant(self, tensor: TensorProto) -> str:
        """A Constant node, or an initializer when emitting for a provider (CANN claims no Constant nodes)."""
        tensor.name = self.fresh("const")
        if self.static is not None:
            self.static.initializers.append(tensor)
        else:
            self.nodes.append(helper.make_node("Constant", [], [tensor.name], value=tensor))
        return tensor.name

    def const(self, value: float) -> str:
        """A scalar constant in the compute type (one per value and builder)."""
        if value not in self._consts:
            self._consts[value] = self._constant(helper.make_tensor("c", self.compute, [], [value]))
        return self._consts[value]

    def int_const(self, values: list[int]) -> str:
        return self._constant(helper.make_tensor("c", TensorProto.INT64, [len(values)], values))

    def int_scalar(self, value: int) -> str:
        return self._constant(helper.make_tensor("c", TensorProto.INT64, [], [value]))

    def to_compute(self, name: str) -> str:
        if self.static is not None:
            if not name:  # an absent optional input means 1
                return self.const(1.0)
            if name in self.static.constants:  # no node of only initializers: convert it here instead
                array = numpy_helper.to_array(self.static.constants[name]).astype(
                    helper.tensor_dtype_to_np_dtype(self.compute))
                return self._constant(numpy_helper.from_array(array))
        return self.op("Cast", name, to=self.compute)

    def shape(self, name: str) -> tuple | None:
        """The shape of a value when emitting for a provider and its rank is known (dims: int, or a str for a
        symbolic dim, or None when unknown); else None."""
        return None if self.static is None else self.static.shapes.get(name)

    def numel(self, name: str) -> str:
        """Number of elements of `name`, as a compute-type scalar."""
        return self.op("Cast", self.op("Size", name), to=self.compute)

    def reduce_loss(self, loss: str, like: str) -> str:
        """`reduction` none/mean/sum of an elementwise loss with `like`'s number of elements."""
        return self.choose("reduction", {
            "none": lambda s: loss,
            "mean": lambda s: s.op("Div", s.op("ReduceSum", loss, keepdims=0), s.numel(like)),
            "sum": lambda s: s.op("ReduceSum", loss, keepdims=0),
        })

    def batch_size(self, input: str) -> str:
        """input.shape[0] as a compute-type scalar, or 1 for a rank-0 input (PyTorch's batchmean divisor):
        the first entry of Shape(input) ++ [1] (without the Concat when the rank is known)."""
        rank = None if self.static is None else self.static.ranks.get(input)
        if rank == 0:
            return self.const(1.0)
        shape = self.op("Shape", input)
        if rank is None:
            shape = self.op("Concat", shape, self.int_const([1]), axis=0)
        return self.op("Cast", self.op("Gather", shape, self.int_scalar(0)), to=self.compute)

    def choose(self, attr: str, branches: dict[str | int, Branch]) -> str:
        allowed = self.opdef.attribute(attr).allowed
        assert set(branches) == set(allowed), (attr, branches.keys())
        if self.attrs is not None:
            return branches[self.attrs[attr]](self)
        return self._if_chain(attr, list(allowed), branches)

    def _if_chain(self, attr: str, values: list, branches: dict) -> str:
        if len(values) == 1:
            return branches[values[0]](self)
        first, rest = values[0], values[1:]
        then_graph = self._subgraph(lambda b: branches[first](b))
        else_graph = self._subgraph(lambda b: b._if_chain(attr, rest, branches))
        cond = self._attr_equals(attr, first)
        out = self.fresh(f"if_{attr}")
        self.nodes.append(helper.make_node("If", [cond], [out], then_branch=then_graph, else_branch=else_graph))
        return out

    def _attr_equals(self, attr: str, value: str | int) -> str:
        """A bool scalar: the function's attribute `attr` equals `value`."""
        node = helper.make_node("Constant", [], [self.fresh(attr)])
        kind = AttributeProto.STRING if isinstance(value, str) else AttributeProto.INT
        ref = AttributeProto(name="value_string" if kind == AttributeProto.STRING else "value_int", type=kind,
                             ref_attr_name=attr)
        node.attribute.append(ref)
        self.nodes.append(node)
        if isinstance(value, str):
            literal = self.fresh("literal")
            self.nodes.append(helper.make_node("Constant", [], [literal], value_string=value))
        else:
            literal = self.fresh("literal")
            self.nodes.append(helper.make_node("Constant", [], [literal], value_int=value))
        return self.op("Equal", node.output[0], literal)

    def _subgraph(self, body: Branch, compute: int | None = None):
        sub = Builder(self.opdef, compute or self.compute, self.attrs, self.prefix, parent=self, static=self.static)
        out = body(sub)
        if not any(out in n.output for n in sub.nodes):
            out = sub.op("Identity", out)
        return helper.make_graph(sub.nodes, sub.fresh("branch"), [], [ValueInfoProto(name=out)])

    def by_precision(self, like: str, body: Branch) -> str:
        """Run `body` in float64 when `like` is double and in float32 otherwise (generic bodies only); the
        result has `like`'s type (both branches of an If must give the same type)."""
        tiny = self.fresh("tiny")
        self.nodes.append(helper.make_node(
            "Constant", [], [tiny], value=helper.make_tensor(self.fresh("c"), TensorProto.DOUBLE, [], [1e-300])))
        # 1e-300 survives a cast only to double: float32, float16 and bfloat16 all flush it to zero.
        zero = self.fresh("zero")
        self.nodes.append(helper.make_node(
            "Constant", [], [zero], value=helper.make_tensor(self.fresh("c"), TensorProto.DOUBLE, [], [0.0])))
        is_double = self.op("Not", self.op("Equal", self.op("Cast", self.op("CastLike", tiny, like),
                                                              to=TensorProto.DOUBLE), zero))
        def typed(b: Builder) -> str:
            return b.op("CastLike", body(b), like)

        then_graph = self._subgraph(typed, TensorProto.DOUBLE)
        else_graph = self._subgraph(typed, TensorProto.FLOAT)
        out = self.fresh("by_precision")
        self.nodes.append(helper.make_node("If", [is_double], [out], then_branch=then_graph, else_branch=else_graph))
        return out


@dataclass
class Static:
    """What a provider-specific expansion knows about the graph around the node."""

    shapes: dict[str, tuple | None] = field(default_factory=dict)  # dims: int, or str/None when not static
    constants: dict[str, TensorProto] = field(default_factory=dict)  # the model's initializers
    initializers: list[TensorProto] = field(default_factory=list)  # made by the expansion

    @property
    def ranks(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.shapes.items() if v is not None}


def compute_type(elem_type: int) -> int:
    """float16/bfloat16 compute in float32; float and double in themselves (OPS.md)."""
    return TensorProto.DOUBLE if elem_type == TensorProto.DOUBLE else TensorProto.FLOAT
