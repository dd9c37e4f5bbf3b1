"""Models that carry the lossops functions, so that any ONNX consumer (a plain onnxruntime) runs them."""

from __future__ import annotations

import onnx
import onnx.inliner
import onnx.version_converter
from onnx import FunctionProto, GraphProto, ModelProto, NodeProto, TypeProto, ValueInfoProto, helper

from .registry import MIN_FUNCTION_OPSET, Specialisation, function, get, opset_imports, specialise
from .validation import import_problems, node_label, validate_nodes
from .validation import node_problems as lossops_node_problems
from .versions import DOMAIN, IR_VERSION, ONNX_OPSET, VERSION
from .walk import graphs, lossops_nodes, nodes

Types = dict[str, TypeProto]  # every value's type, by name: what one shape inference of a model finds


def stamp(model: ModelProto, lossops: bool = True) -> None:
    """Make the model loadable by onnxruntime: IR version, a default-domain opset and, with `lossops`,
    the lossops opset import (without it, any lossops import is removed)."""
    model.ir_version = min(model.ir_version or IR_VERSION, IR_VERSION)
    have = {o.domain: o for o in model.opset_import}
    if "" not in have and "ai.onnx" not in have:
        model.opset_import.append(helper.make_opsetid("", ONNX_OPSET))
    if lossops and DOMAIN not in have:
        model.opset_import.append(helper.make_opsetid(DOMAIN, VERSION))
    if not lossops and DOMAIN in have:
        model.opset_import.remove(have[DOMAIN])


def default_opset(model: ModelProto) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def _lossops_callers(model: ModelProto) -> list[tuple[str, str]]:
    """The user functions that call a lossops node, maybe through other functions: (domain, name), sorted."""
    users = [f for f in model.functions if f.domain != DOMAIN]
    callers: set[tuple[str, str]] = set()
    grew = True
    while grew:
        grew = False
        for f in users:
            key = (f.domain, f.name)
            if key not in callers and any(n.domain == DOMAIN or (n.domain, n.op_type) in callers
                                          for n in nodes(f.node)):
                callers.add(key)
                grew = True
    return sorted(callers)


def inline_lossops_callers(model: ModelProto) -> ModelProto:
    """`model` with every user function that (maybe through other functions) calls a lossops node inlined,
    and without lossops FunctionProtos: each lossops node then sits in a graph where its input types are
    known, so it can be specialised (or handed to the kernels)."""
    callers = _lossops_callers(model)
    out = ModelProto()
    out.CopyFrom(model)
    kept = [f for f in out.functions if f.domain != DOMAIN]
    del out.functions[:]
    out.functions.extend(kept)
    if callers:
        out = onnx.inliner.inline_selected_functions(out, callers)
        kept = [f for f in out.functions if (f.domain, f.name) not in callers]
        del out.functions[:]
        out.functions.extend(kept)
    return out


def value_types(model: ModelProto) -> Types:
    """The type of every value of every graph of `model` that inference (with the lossops schemas) finds."""
    return _types_of(onnx.shape_inference.infer_shapes(model))


def _types_of(inferred: ModelProto) -> Types:
    types: Types = {}
    for g in graphs(inferred.graph):
        types.update({v.name: v.type for v in (*g.input, *g.value_info, *g.output)})
        types.update({t.name: helper.make_tensor_type_proto(t.data_type, list(t.dims)) for t in g.initializer})
    return types


def elem_type_of(node: NodeProto, types: dict[str, onnx.TypeProto]) -> int:
    """The element type of a lossops node's `input`; ValueError naming the node when it is unknown."""
    k = get(node.op_type).principal
    principal = node.input[k] if k < len(node.input) else ""
    t = types.get(principal)
    if t is None or not t.tensor_type.elem_type:
        raise ValueError(f"{node_label(node)}: the element type of its input '{principal}' is unknown (give the "
                         "graph's inputs their types)")
    return t.tensor_type.elem_type


def at_least_floor(model: ModelProto) -> ModelProto:
    """`model`, converted to opset MIN_FUNCTION_OPSET by onnx's version converter if its default opset is lower
    (ValueError if the converter fails); models at 13 or above are returned as they are."""
    stamp(model)
    version = default_opset(model)
    if version >= MIN_FUNCTION_OPSET:
        return model
    try:
        return onnx.version_converter.convert_version(model, MIN_FUNCTION_OPSET)
    except Exception as e:
        raise ValueError(f"lossops needs default-domain opset >= {MIN_FUNCTION_OPSET} (ReduceSum takes its axes "
                         f"as an input from 13); the model has {version} and onnx's version converter failed on "
                         f"it: {e}") from None


def with_functions(model: ModelProto) -> ModelProto:
    """A copy of `model` that runs on any ONNX runtime: each lossops node names (`overload`) the function of
    its specialisation, which the model carries; no node of the user's is added or changed otherwise.

    The functions import the model's default-domain opset, which must be at least MIN_FUNCTION_OPSET (13);
    an older model is converted to 13 with onnx's version converter first. The IR version becomes 10 (the
    first with `overload`)."""
    validate_nodes(model)
    return attach_functions(model)


def attach_functions(model: ModelProto, types: Types | None = None) -> ModelProto:
    """`with_functions` for a model whose lossops nodes were validated already (`validate`, whose `types` it takes
    rather than infer them again where the model keeps its values). A model that carries this version's functions
    already is returned as a copy, untouched; one that carries another version's has them replaced."""
    if carries_its_functions(model, types):
        out = ModelProto()
        out.CopyFrom(model)
        return out
    inlined = bool(_lossops_callers(model))
    out = at_least_floor(inline_lossops_callers(model))
    stamp(out)
    out.ir_version = IR_VERSION
    version = default_opset(out)
    found = list(lossops_nodes(out))
    if found and (types is None or inlined or version != default_opset(model)):
        types = value_types(out)  # values that inlining or the version converter made
    specialisations: dict[str, Specialisation] = {}
    for _, node in found:
        spec = specialise(node, elem_type_of(node, types))
        node.overload = spec.overload
        specialisations.setdefault(f"{spec.op.name}:{spec.overload}", spec)
    out.functions.extend(_body(spec, version) for spec in specialisations.values())  # extend copies them
    return out


_bodies: dict[tuple[str, str, int], FunctionProto] = {}


def _body(spec: Specialisation, onnx_opset: int) -> FunctionProto:
    """`function(spec, onnx_opset)`, built once per process (callers copy it: `extend` does)."""
    key = (spec.op.name, spec.overload, onnx_opset)
    if key not in _bodies:
        _bodies[key] = function(spec, onnx_opset)
    return _bodies[key]


def carries_its_functions(model: ModelProto, types: Types | None = None) -> bool:
    """Whether `model` is as `with_functions` makes it: each lossops node (none inside a user function) names the
    overload of its specialisation, and the model carries exactly those functions, as this version builds them.
    `types`: the model's value types where they are known already."""
    version = default_opset(model)
    if (model.ir_version != IR_VERSION or version is None or version < MIN_FUNCTION_OPSET
            or not any(o.domain == DOMAIN for o in model.opset_import) or _lossops_callers(model)):
        return False
    found = [node for _, node in lossops_nodes(model)]
    carried = {(f.name, f.overload): f for f in model.functions if f.domain == DOMAIN}
    # the names first: a model without its functions would otherwise pay for shape inference twice
    if {(n.op_type, n.overload) for n in found} != carried.keys():
        return False
    if found and types is None:
        types = value_types(model)
    for node in found:
        spec = specialise(node, elem_type_of(node, types))
        if node.overload != spec.overload or carried[(node.op_type, node.overload)] != _body(spec, version):
            return False
    return True


def make_model(graph: GraphProto, **kwargs) -> ModelProto:
    """`onnx.helper.make_model` for graphs with lossops nodes: opsets, IR version and functions included."""
    kwargs.setdefault("opset_imports", opset_imports())
    kwargs.setdefault("ir_version", IR_VERSION)
    return with_functions(helper.make_model(graph, **kwargs))


def check(model: ModelProto) -> None:
    """onnx.checker (full) and strict shape inference with the lossops schemas; raises on the first problem."""
    validate_nodes(model)
    onnx.checker.check_model(model, full_check=True)


def validate(model: ModelProto) -> Types:
    """Strict type and shape inference with the lossops schemas: what must hold before a model runs. Returns the
    type of every value it found, for whoever prepares the model next (`attach_functions`), so that a model is
    inferred once. (Lighter than `check`: onnxruntime loads models that onnx.checker rejects for unrelated
    reasons.)"""
    validate_nodes(model)
    return _types_of(onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True))


def node_problems(model: ModelProto) -> list[tuple[str, str]]:
    """(node, problem) for every node of the main graph that strict type and shape inference rejects, in
    graph order (each node is inferred alone, from the types inferred before it), then onnx.checker's
    verdict on the whole model if nothing else was found. An empty list means the model is valid."""
    problems = [("model", p) for p in import_problems(model)]
    types = {v.name: v.type for v in model.graph.input}
    for t in model.graph.initializer:
        types[t.name] = helper.make_tensor_type_proto(t.data_type, list(t.dims))
    for k, node in enumerate(model.graph.node):
        label = node_label(node, k)
        invalid = lossops_node_problems(node, labelled=False) if node.domain == DOMAIN else []
        if invalid:
            problems.extend((label, p) for p in invalid)
            continue
        known = dict.fromkeys(n for n in node.input if n in types)
        single = helper.make_model(
            helper.make_graph([node], "node", [helper.make_value_info(n, types[n]) for n in known],
                              [ValueInfoProto(name=o) for o in node.output if o]),
            opset_imports=model.opset_import, ir_version=IR_VERSION, functions=model.functions)
        try:
            inferred = onnx.shape_inference.infer_shapes(single, check_type=True, strict_mode=True)
        except Exception as e:
            problems.append((label, str(e).strip()))
            continue
        types.update({v.name: v.type for v in inferred.graph.output if v.type.WhichOneof("value")})
    if not problems:
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as e:
            problems.append(("model", str(e).strip()))
    return problems
