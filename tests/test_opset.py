"""Schemas, shape inference, functions and model helpers."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, defs, helper

from lossops import opset
from lossops.opset.docs import operator_reference

ROOT = Path(__file__).resolve().parent.parent


def test_register_is_idempotent_and_complete():
    opset.register()
    opset.register()
    for name in opset.OPS:
        schema = defs.get_schema(name, opset.VERSION, opset.DOMAIN)
        assert schema.doc and schema.has_type_and_shape_inference_function
        assert [t.allowed_type_strs for t in schema.type_constraints] == [
            ["tensor(float16)", "tensor(bfloat16)", "tensor(float)", "tensor(double)"]]


@pytest.mark.parametrize(("op", "inputs", "shapes", "attrs", "expected"), [
    ("BinaryCrossEntropyWithLogits", ["x", "t"], {"x": ["N", 3], "t": ["N", 3]}, {"reduction": "none"}, ["N", 3]),
    ("BinaryCrossEntropyWithLogits", ["x", "t", "", "p"], {"x": ["N", 3], "t": ["N", 3], "p": [3]}, {}, []),
    ("BinaryCrossEntropyWithLogits", ["x", "t"], {"x": [], "t": []}, {"reduction": "sum"}, []),
    ("BinaryCrossEntropyBackward", ["g", "x", "t", "w"], {"g": [], "x": ["N", 3], "t": ["N", 3], "w": [3]}, {},
     ["N", 3]),
    ("KlDivBackward", ["g", "x", "t"], {"g": [], "x": [1, 5], "t": [4, 5]}, {"reduction": "batchmean"}, [1, 5]),
    ("KlDivBackward", ["g", "x", "t"], {"g": [4, 5], "x": [4, 5], "t": [1, 5]}, {"reduction": "none"}, [4, 5]),
])
def test_shape_inference(op, inputs, shapes, attrs, expected):
    node = opset.make_node(op, inputs, ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT16, s)
                                            for n, s in shapes.items()], [])
    model = onnx.shape_inference.infer_shapes(opset.make_model(graph), strict_mode=True)
    (y,) = [v for v in model.graph.value_info if v.name == "y"]
    assert y.type.tensor_type.elem_type == TensorProto.FLOAT16
    dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in y.type.tensor_type.shape.dim]
    assert dims == expected


def test_made_models_pass_the_full_checker():
    node = opset.make_node("BinaryCrossEntropyWithLogits", ["x", "t"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N"]) for n in "xt"],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    model = opset.make_model(graph)
    opset.check(model)
    assert model.ir_version == opset.IR_VERSION
    assert {f.name for f in model.functions} == set(opset.OPS)
    for f in model.functions:  # the functions are standard ops only
        assert {n.domain for n in f.node} <= {""}


def test_functions_use_no_log_of_sigmoid():
    """The decompositions are the stable ones: no Log fed by a Sigmoid, no Softplus (onnxruntime's loses
    precision below -17), and the losses on logits use no Sigmoid at all."""
    nodes = [n for f in opset.functions() for n in _all_nodes(f.node)]
    sigmoid_outputs = {o for n in nodes if n.op_type == "Sigmoid" for o in n.output}
    assert not [n for n in nodes if n.op_type == "Log" and set(n.input) & sigmoid_outputs]
    assert "Softplus" not in {n.op_type for n in nodes}
    logits_loss = next(f for f in opset.functions() if f.name == "BinaryCrossEntropyWithLogits")
    assert "Sigmoid" not in {n.op_type for n in _all_nodes(logits_loss.node)}


def _all_nodes(nodes):
    for n in nodes:
        yield n
        for a in n.attribute:
            if a.HasField("g"):
                yield from _all_nodes(a.g.node)


def test_operator_reference_is_generated():
    assert (ROOT / "docs/operators.md").read_text() == operator_reference(), \
        "docs/operators.md is stale: run python -m lossops.opset.docs"
    for op in opset.OPS.values():
        for a in op.attributes:
            assert f"`{a.name}`" in operator_reference()
