"""Lowering: every lossops node becomes its standard-op decomposition, specialised to the node's attributes
and element type, so the model imports no lossops domain and runs on any ONNX runtime."""

from __future__ import annotations

import onnx
from onnx import ModelProto, TypeProto

from .. import opset
from ..opset.model import fill_optional_inputs, graphs, stamp


def _types(model: ModelProto) -> dict[str, TypeProto]:
    inferred = onnx.shape_inference.infer_shapes(model)
    types: dict[str, TypeProto] = {}
    for g in graphs(inferred.graph):
        types.update({v.name: v.type for v in (*g.input, *g.value_info, *g.output)})
        types.update({t.name: onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)) for t in g.initializer})
    return types


def lower(model: ModelProto) -> tuple[ModelProto, list[str]]:
    """(lowered copy of `model`, one line per node replaced)."""
    opset.register()
    out = ModelProto()
    out.CopyFrom(model)
    fill_optional_inputs(out)
    types = _types(out)
    report = []
    count = 0
    for g in graphs(out.graph):
        nodes = list(g.node)
        del g.node[:]
        for node in nodes:
            if node.domain != opset.DOMAIN:
                g.node.append(node)
                continue
            t = types.get(node.input[0])
            if t is None or not t.tensor_type.elem_type:
                raise ValueError(f"{node.op_type} node '{node.name}': cannot lower, the element type of input "
                                 f"'{node.input[0]}' is unknown (give the graph inputs types)")
            count += 1
            expanded = opset.expand(node, t.tensor_type.elem_type, prefix=f"_lossops{count}_")
            g.node.extend(expanded)
            report.append(f"lowered {node.op_type} '{node.name or node.output[0]}' "
                          f"({onnx.helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type)}) into "
                          f"{len(expanded)} standard nodes")
    kept = [f for f in out.functions if f.domain != opset.DOMAIN]
    del out.functions[:]
    out.functions.extend(kept)
    stamp(out, lossops=False)
    return out, report
