"""Models that carry the lossops functions, so that any ONNX consumer (a plain onnxruntime) runs them."""

from __future__ import annotations

from collections.abc import Iterator

import onnx
import onnx.version_converter
from onnx import GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto, helper

from .builder import Static
from .registry import MIN_FUNCTION_OPSET, OPS, expand, functions, get, opset_imports, register
from .versions import DOMAIN, IR_VERSION, ONNX_OPSET, VERSION


def graphs(graph: GraphProto) -> Iterator[GraphProto]:
    """`graph` and every subgraph nested in its nodes' attributes."""
    yield graph
    for node in graph.node:
        for a in node.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from graphs(g)


def lossops_nodes(model: ModelProto) -> Iterator[tuple[GraphProto, NodeProto]]:
    for g in graphs(model.graph):
        for node in g.node:
            if node.domain == DOMAIN:
                yield g, node


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


FILL_SUFFIX = "__lossops_one"  # names the constant 1 that stands for absent optional inputs


def unfill_optional_inputs(model: ModelProto) -> None:
    """Undo `fill_optional_inputs`: inputs it filled become absent again, and its nodes go."""
    for g in graphs(model.graph):
        filled = {o for n in g.node if n.domain == DOMAIN for o in n.input if o.endswith(FILL_SUFFIX)}
        for node in g.node:
            if node.domain == DOMAIN:
                node.input[:] = ["" if i in filled else i for i in node.input]
                while node.input and not node.input[-1]:
                    del node.input[-1]
        keep = [n for n in g.node if not any(o in filled or o in {f + "_f" for f in filled} for o in n.output)]
        del g.node[:]
        g.node.extend(keep)


def fill_optional_inputs(model: ModelProto) -> None:
    """Give every lossops node all its inputs: an absent optional input becomes a constant 1 of the node's
    type, which is what the operators mean by an absent weight. The function bodies need this."""
    for g in graphs(model.graph):
        i = 0
        while i < len(g.node):
            node = g.node[i]
            if node.domain == DOMAIN and node.op_type in OPS:
                formal = get(node.op_type).inputs
                missing = [k for k in range(len(formal)) if k >= len(node.input) or not node.input[k]]
                if missing:
                    one = f"{node.output[0]}{FILL_SUFFIX}"
                    const = helper.make_node("Constant", [], [one + "_f"],
                                             value=helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]))
                    like = helper.make_node("CastLike", [one + "_f", node.input[0]], [one])
                    while len(node.input) < len(formal):
                        node.input.append("")
                    for k in missing:
                        node.input[k] = one
                    g.node.insert(i, like)
                    g.node.insert(i, const)
                    i += 2
            i += 1


def default_opset(model: ModelProto) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def with_functions(model: ModelProto) -> ModelProto:
    """A copy of `model` that carries the lossops FunctionProtos (replacing any it had) and runs on a plain
    onnxruntime: optional inputs filled, IR version stamped. The functions import the model's default-domain
    opset; a model below opset 19 is first converted to ONNX_OPSET with onnx's version converter."""
    register()
    out = ModelProto()
    out.CopyFrom(model)
    stamp(out)
    version = default_opset(out)
    if version < MIN_FUNCTION_OPSET:
        converted = onnx.version_converter.convert_version(out, ONNX_OPSET)
        out.CopyFrom(converted)
        version = ONNX_OPSET
    fill_optional_inputs(out)
    kept = [f for f in out.functions if f.domain != DOMAIN]
    del out.functions[:]
    out.functions.extend(kept + functions(version))
    stamp(out)
    return out


def make_model(graph: GraphProto, **kwargs) -> ModelProto:
    """`onnx.helper.make_model` for graphs with lossops nodes: opsets, IR version and functions included."""
    register()
    kwargs.setdefault("opset_imports", opset_imports())
    kwargs.setdefault("ir_version", IR_VERSION)
    return with_functions(helper.make_model(graph, **kwargs))


def check(model: ModelProto) -> None:
    """onnx.checker (full) and strict shape inference with the lossops schemas; raises on the first problem."""
    register()
    onnx.checker.check_model(model, full_check=True)


def validate(model: ModelProto) -> None:
    """Strict type and shape inference with the lossops schemas: what must hold before a model runs.
    (Lighter than `check`: onnxruntime loads models that onnx.checker rejects for unrelated reasons.)"""
    register()
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


def node_problems(model: ModelProto) -> list[tuple[str, str]]:
    """(node, problem) for every node of the main graph that strict type and shape inference rejects, in
    graph order (each node is inferred alone, from the types inferred before it), then onnx.checker's
    verdict on the whole model if nothing else was found. An empty list means the model is valid."""
    register()
    problems = []
    types = {v.name: v.type for v in model.graph.input}
    for t in model.graph.initializer:
        types[t.name] = helper.make_tensor_type_proto(t.data_type, list(t.dims))
    for k, node in enumerate(model.graph.node):
        label = f"#{k} {node.name or '(unnamed)'} {node.domain + '::' if node.domain else ''}{node.op_type}"
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

def _value_types(model: ModelProto) -> dict[str, onnx.TypeProto]:
    inferred = onnx.shape_inference.infer_shapes(model)
    types: dict[str, onnx.TypeProto] = {}
    for g in graphs(inferred.graph):
        types.update({v.name: v.type for v in (*g.input, *g.value_info, *g.output)})
        types.update({t.name: helper.make_tensor_type_proto(t.data_type, list(t.dims)) for t in g.initializer})
    return types


def _static_shape(t: onnx.TypeProto) -> tuple | None:
    if not t.tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim)


def lower(model: ModelProto, for_provider: str | None = None) -> tuple[ModelProto, list[str]]:
    """(copy of `model` with every lossops node replaced by its decomposition specialised to the node, one line
    per node). `for_provider="cann"`: constants as initializers, no Constant/Concat/NonZero where shapes are
    static, absent weights as constant 1 (what the CANN provider's graph mode can claim)."""
    register()
    out = ModelProto()
    out.CopyFrom(model)
    if for_provider not in (None, "cann"):
        raise ValueError(f"for_provider is {for_provider!r}; expected None or 'cann'")
    if for_provider is None:
        fill_optional_inputs(out)
    else:  # a provider gets absent weights as a constant 1 made in the compute type, not Constant+CastLike
        unfill_optional_inputs(out)
    types = _value_types(out)
    report = []
    count = 0
    for g in graphs(out.graph):
        nodes = list(g.node)
        del g.node[:]
        for node in nodes:
            if node.domain != DOMAIN:
                g.node.append(node)
                continue
            t = types.get(node.input[0])
            if t is None or not t.tensor_type.elem_type:
                raise ValueError(f"{node.op_type} node '{node.name}': cannot lower, the element type of input "
                                 f"'{node.input[0]}' is unknown (give the graph inputs types)")
            count += 1
            static = None
            if for_provider == "cann":
                static = Static({n: _static_shape(types[n]) for n in node.input if n in types},
                                {i.name: i for i in g.initializer})
            expanded = expand(node, t.tensor_type.elem_type, prefix=f"_lossops{count}_", static=static)
            g.node.extend(expanded)
            if static is not None:
                g.initializer.extend(static.initializers)
            report.append(f"lowered {node.op_type} '{node.name or node.output[0]}' "
                          f"({helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type)}) into "
                          f"{len(expanded)} standard nodes" + (" for CANN" if for_provider else ""))
    kept = [f for f in out.functions if f.domain != DOMAIN]
    del out.functions[:]
    out.functions.extend(kept)
    stamp(out, lossops=False)
    return out, report
