"""bfloat16 graphs for onnxruntime's CPU provider, which has bfloat16 kernels for few ops (not Relu, not MatMul):
every standard node that reads or writes bfloat16 runs in float32 between Casts, its result rounded to bfloat16
once, which is how PyTorch computes a bfloat16 op on the CPU. bfloat16 -> float32 is exact, and float32 ->
bfloat16 of a bfloat16 value is too, so only each op's own result is rounded, as in PyTorch. lossops nodes keep
their bfloat16 inputs (their kernels and functions compute in float32 themselves)."""

from __future__ import annotations

import onnx
from onnx import ModelProto, TensorProto, helper

from ..opset import DOMAIN

_BF16, _F32 = TensorProto.BFLOAT16, TensorProto.FLOAT
_KEEP = {"Cast", "CastLike", "Constant", "ConstantOfShape", "Shape", "Size", "If", "Loop", "Scan"}


def in_float32(model: ModelProto) -> ModelProto:
    """A copy of `model` whose standard bfloat16 nodes compute in float32 (module docstring); `model` itself
    where no value is bfloat16."""
    if not _mentions_bfloat16(model):  # most models: no shape inference needed to know
        return model
    types = _elem_types(model)
    out = ModelProto()
    out.CopyFrom(model)
    nodes = []
    for k, node in enumerate(out.graph.node):
        touched = [n for n in [*node.input, *node.output] if n and types.get(n) == _BF16]
        if not touched or node.domain == DOMAIN or node.op_type in _KEEP:
            nodes.append(node)
            continue
        prefix = f"{node.name or node.op_type}_{k}/float32"
        inputs = []
        for j, name in enumerate(node.input):
            if name and types.get(name) == _BF16:
                nodes.append(helper.make_node("Cast", [name], [f"{prefix}/in{j}"], to=_F32))
                name = f"{prefix}/in{j}"
            inputs.append(name)
        outputs, back = [], []
        for j, name in enumerate(node.output):
            if name and types.get(name) == _BF16:
                back.append(helper.make_node("Cast", [f"{prefix}/out{j}"], [name], to=_BF16))
                name = f"{prefix}/out{j}"
            outputs.append(name)
        del node.input[:], node.output[:]
        node.input.extend(inputs)
        node.output.extend(outputs)
        nodes += [node, *back]
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def _mentions_bfloat16(model: ModelProto) -> bool:
    """Whether a bfloat16 value can arise: a typed input, output or initializer, or a node that makes one."""
    g = model.graph
    typed = [v.type.tensor_type.elem_type for v in [*g.input, *g.output, *g.value_info]]
    made = [a.i for n in g.node for a in n.attribute if a.name in ("to", "dtype")]
    made += [a.t.data_type for n in g.node for a in n.attribute if a.HasField("t")]
    return _BF16 in typed + made + [t.data_type for t in g.initializer]


def _elem_types(model: ModelProto) -> dict[str, int]:
    """Every value's element type, as onnx's shape inference sees it (the lossops schemas registered)."""
    from ..opset import register

    register()
    inferred = onnx.shape_inference.infer_shapes(model)
    values = [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]
    types = {v.name: v.type.tensor_type.elem_type for v in values if v.type.HasField("tensor_type")}
    types.update({t.name: t.data_type for t in model.graph.initializer})
    for node in model.graph.node:  # a Constant's value is typed by its attribute
        if node.op_type == "Constant" and node.attribute and node.attribute[0].HasField("t"):
            types[node.output[0]] = node.attribute[0].t.data_type
    return types
