"""Lowering: every lossops node becomes its standard-op decomposition, specialised to the node, so the model
imports no lossops domain and runs on any ONNX runtime (the portable form): the shapes the graph declares are
folded in, shape guards stay only where dims are symbolic, constants are initializers, and the default opset
is the lowest its ops need. `for_provider="cann"` shapes it for the CANN provider's graph mode: no guards."""

from __future__ import annotations

import onnx
from onnx import GraphProto, ModelProto, TypeProto, helper

from .. import opset
from ..opset import shapes
from ..opset.builder import Static
from ..opset.model import at_least_floor, default_opset, elem_type_of, inline_lossops_callers, stamp, value_types
from ..opset.registry import MIN_FUNCTION_OPSET
from ..opset.validation import node_label, validate_nodes
from ..opset.walk import graphs

PROVIDERS = (None, "cann")


def lowest_opset(model: ModelProto) -> int:
    """The lowest default-domain opset, from lossops' floor (13) up to the model's own, at which the model is
    still valid: every op exists, takes the attributes its nodes give and the types that reach it (onnx's
    full checker, strict inference). Between 13 and 21 the ops lossops emits were revised only to take more
    types (Cast 19 and 21, Size 21, Reshape 21, ...) or to add attributes whose defaults keep the old meaning
    (Cast's `saturate`), so stamping the lowest valid opset does not change what a lowered graph computes.
    Why: CANN's ONNX parser lists each op for opsets up to 18 (ort_ext/cann_support.json)."""
    version = default_opset(model)
    for candidate in range(MIN_FUNCTION_OPSET, version):
        trial = ModelProto()
        trial.CopyFrom(model)
        _restamp(trial, candidate)
        try:
            onnx.checker.check_model(trial, full_check=True)
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
            continue
        return candidate
    return version


def _restamp(model: ModelProto, version: int) -> None:
    for imports in [model.opset_import, *(f.opset_import for f in model.functions)]:
        for o in imports:
            if o.domain in ("", "ai.onnx"):
                o.version = version


def _lower_graph(g: GraphProto, types: dict[str, TypeProto], for_provider: str | None, count: list[int]) -> list[str]:
    report = []
    nodes = list(g.node)
    del g.node[:]
    for node in nodes:
        if node.domain != opset.DOMAIN:
            g.node.append(node)
            continue
        elem_type = elem_type_of(node, types)
        count[0] += 1
        # what the graph says of the node's inputs: static shapes fold the shape computations and guards away
        # (CANN's graph mode wants no guard nodes)
        cann = for_provider == "cann"
        static = Static({n: shapes.of_type(types[n]) for n in node.input if n in types},
                        {i.name: i for i in g.initializer}, initializers=[], guards=not cann, portable=not cann,
                        cann=cann)
        expanded = _live(opset.expand(node, elem_type, prefix=f"_lossops{count[0]}_", static=static), node.output[0])
        g.node.extend(expanded)
        read = {i for n in expanded for i in n.input}  # constants that folding left unread are not kept (ORT warns)
        g.initializer.extend(t for t in static.initializers if t.name in read)
        report.append(f"lowered {node_label(node)} "
                      f"({helper.tensor_dtype_to_np_dtype(elem_type)}) into {len(expanded)} standard nodes"
                      + (" for CANN" if for_provider else ""))
    return report


def _live(nodes: list, output: str) -> list:
    """The nodes `output` depends on (folding shapes leaves some constants and shape nodes unread)."""
    needed, kept = {output}, []
    for n in reversed(nodes):
        if any(o in needed for o in n.output):
            kept.append(n)
            needed.update(n.input)
    return kept[::-1]


def lower(model: ModelProto, for_provider: str | None = None) -> tuple[ModelProto, list[str]]:
    """(copy of `model` with every lossops node replaced by its decomposition specialised to the node, one line
    per node). Static shapes replace shape computations and guards, and the default opset is the lowest the
    nodes need (consumers and converters lag behind onnx's newest opsets; the CANN ONNX parser lists opsets up
    to 18). Constants are initializers (CANN's graph mode claims no Constant node; onnx2tf turns an Expand
    whose shape comes from one into that shape). `for_provider="cann"`: symbolic shapes are not guarded (graph
    mode claims no Concat)."""
    if for_provider not in PROVIDERS:
        raise ValueError(f"for_provider is {for_provider!r}; expected None or 'cann'")
    validate_nodes(model)
    out = at_least_floor(inline_lossops_callers(model))
    types = value_types(out)
    count = [0]
    report = [line for g in list(graphs(out.graph)) for line in _lower_graph(g, types, for_provider, count)]
    stamp(out, lossops=False)
    _restamp(out, lowest_opset(out))
    return out, report


__all__ = ["PROVIDERS", "lower", "lowest_opset"]
