"""The operator set: the list of definitions, schema registration, specialised FunctionProtos and node helpers."""

from __future__ import annotations

import atexit
import importlib
import itertools
import pkgutil
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from onnx import AttributeProto, FunctionProto, NodeProto, defs, helper

from .builder import Builder, Static
from .schema import make_schema
from .spec import TENSOR_TYPES, OpDef
from .versions import DOMAIN, ONNX_OPSET, VERSION


def module_name(op_name: str) -> str:
    """The name of an operator's modules (its record in `opset/ops/`, its tile in `ort_ext/kernels/ops/`, its cases
    in `conformance/ops/`): the operator's name in snake case (KlDivBackward: kl_div_backward, NLLLoss: nll_loss)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", op_name).lower()


def _discover() -> dict[str, OpDef]:
    """The `DEFINITION` of every module of `opset/ops/` (one per operator), in module-name order."""
    names = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent / "ops")]))
    return {d.name: d for d in (importlib.import_module(f"{__package__}.ops.{n}").DEFINITION for n in names)}


OPS: dict[str, OpDef] = _discover()

_lock = threading.Lock()


def register() -> None:
    """Register the lossops schemas in onnx.defs (checker, shape inference); done when lossops.opset is imported.
    Idempotent and thread-safe."""
    with _lock:
        added = False
        for op in OPS.values():
            if not defs.has(op.name, DOMAIN):
                defs.register_schema(make_schema(op))
                added = True
        if added and not _deregister_at_exit:
            # onnx keeps the schemas (and their Python inference functions) in a C++ static; onnx 1.19 destroys
            # it after Python has finalised and then waits forever for the GIL (measured: the process hangs at
            # exit). Dropping them while Python still runs avoids that.
            atexit.register(_deregister)
            _deregister_at_exit.append(True)


_deregister_at_exit: list[bool] = []


def _deregister() -> None:
    for op in OPS.values():
        if defs.has(op.name, DOMAIN):
            defs.deregister_schema(op.name, VERSION, DOMAIN)


def get(op_type: str) -> OpDef:
    try:
        return OPS[op_type]
    except KeyError:
        raise ValueError(f"'{op_type}' is not a lossops operator; the operators are {sorted(OPS)}") from None


@dataclass(frozen=True)
class Specialisation:
    """What a decomposition is specialised to: the operator, its enum attributes' values, the element type and
    which inputs are present (numeric attributes are not: the function reads them by reference). Its `overload`
    names the function (ONNX IR 10 `overload`, on node and function)."""

    op: OpDef
    attrs: tuple[tuple[str, str | int], ...]  # every enum attribute, in schema order, defaults filled in
    elem_type: int
    present: tuple[bool, ...]  # per formal input

    @property
    def overload(self) -> str:
        """e.g. "float-mean-weight-pos_weight", "float16-batchmean-log_target1": type, attribute values (the
        reduction's bare), then the optional inputs present."""
        attrs = [str(v) if k == "reduction" else f"{k}{v}" for k, v in self.attrs]
        optional = [i.name for i, p in zip(self.op.inputs, self.present, strict=True) if i.optional and p]
        return "-".join([helper.tensor_dtype_to_string(self.elem_type).removeprefix("TensorProto."), *attrs,
                         *optional]).lower()

    def inputs(self, given: list[str]) -> list[str]:
        """`given` padded to every formal input, "" where absent."""
        return list(given) + [""] * (len(self.op.inputs) - len(given))


def specialise(node: NodeProto, elem_type: int) -> Specialisation:
    """The specialisation of a lossops node whose inputs have element type `elem_type`; ValueError naming the
    operator when an attribute or the input count is wrong."""
    op = get(node.op_type)
    attrs = op.resolve(node_attributes(node))
    if len(node.input) > len(op.inputs):
        raise ValueError(f"{op.name}: takes at most {len(op.inputs)} inputs, got {len(node.input)}")
    if elem_type not in TENSOR_TYPES:
        raise ValueError(f"{op.name}: input '{node.input[0]}' is {helper.tensor_dtype_to_string(elem_type)}; "
                         "expected float16, bfloat16, float or double")
    present = tuple(k < len(node.input) and bool(node.input[k]) for k in range(len(op.inputs)))
    return Specialisation(op, tuple((a.name, attrs[a.name]) for a in op.attributes if a.enum), elem_type, present)


def function(spec: Specialisation, onnx_opset: int = ONNX_OPSET) -> FunctionProto:
    """The standard-op decomposition of one specialisation, as a FunctionProto with its `overload`. Its body
    imports the default domain at `onnx_opset` (the model's: ONNX requires them to agree), at least
    MIN_FUNCTION_OPSET."""
    if onnx_opset < MIN_FUNCTION_OPSET:
        raise ValueError(f"the lossops functions need default-domain opset >= {MIN_FUNCTION_OPSET}, not {onnx_opset}")
    op = spec.op
    names = [i.name for i in op.inputs]
    b = Builder(op, dict(spec.attrs), spec.elem_type, prefix="_")
    b.result(b.decomposition([n if p else "" for n, p in zip(names, spec.present, strict=True)]), op.output.name)
    f = helper.make_function(DOMAIN, op.name, names, [op.output.name], b.nodes,
                             [helper.make_opsetid("", onnx_opset)], doc_string=op.summary,
                             attribute_protos=[helper.make_attribute(a.name, a.default) for a in op.attributes
                                               if not a.enum])
    f.overload = spec.overload
    return f


# ReduceSum takes its axes as an input from opset 13 (and Cast/Reshape take bfloat16 from 13); every other op
# of the bodies means the same from 13 to the newest opset, so a body is valid at the model's own version.
MIN_FUNCTION_OPSET = 13


def specialisations(op: OpDef) -> Iterator[Specialisation]:
    """Every specialisation of `op`: element types x enum attribute values x subsets of the optional inputs."""
    optional = [k for k, i in enumerate(op.inputs) if i.optional]
    enums = [a for a in op.attributes if a.enum]
    for elem_type in TENSOR_TYPES:
        for values in itertools.product(*(a.allowed for a in enums)):
            for present in itertools.product((False, True), repeat=len(optional)):
                given = dict(zip(optional, present, strict=True))
                yield Specialisation(op, tuple(zip((a.name for a in enums), values, strict=True)),
                                     elem_type, tuple(given.get(k, True) for k in range(len(op.inputs))))


def functions(onnx_opset: int = ONNX_OPSET) -> list[FunctionProto]:
    """The FunctionProto of every specialisation of every operator (a model needs only those its nodes name:
    `with_functions` attaches them and sets each node's `overload`)."""
    return [function(spec, onnx_opset) for op in OPS.values() for spec in specialisations(op)]


def expand(node: NodeProto, elem_type: int, prefix: str, static: Static | None = None) -> list[NodeProto]:
    """The decomposition of one node, specialised to it, as standard-op nodes that read the node's inputs and
    write its output. With `static` (what lowering knows of the graph), static shapes replace shape
    computations and guards, and constants may become `static.initializers`."""
    spec = specialise(node, elem_type)
    attrs = spec.op.resolve(node_attributes(node))  # numeric attributes too: the expansion writes their values
    b = Builder(spec.op, attrs, elem_type, prefix=prefix, static=static)
    b.result(b.decomposition(spec.inputs(list(node.input))), node.output[0])
    return b.nodes


def node_attributes(node: NodeProto) -> dict[str, object]:
    return {a.name: (a.s.decode() if a.type == AttributeProto.STRING else helper.get_attribute_value(a))
            for a in node.attribute}


def opset_imports() -> list:
    return [helper.make_opsetid("", ONNX_OPSET), helper.make_opsetid(DOMAIN, VERSION)]
