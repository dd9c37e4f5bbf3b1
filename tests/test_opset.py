"""Schemas, shape inference, functions and model helpers."""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, defs, helper

from lossops import opset

ROOT = Path(__file__).resolve().parent.parent


def test_register_is_idempotent_and_complete():
    opset.register()
    opset.register()
    for name in opset.OPS:
        schema = defs.get_schema(name, opset.VERSION, opset.DOMAIN)
        assert schema.doc and schema.has_type_and_shape_inference_function
        indices = [["tensor(int64)"]] if any(i.indices for i in opset.OPS[name].inputs) else []  # class indices
        assert [t.allowed_type_strs for t in schema.type_constraints] == [
            ["tensor(float16)", "tensor(bfloat16)", "tensor(float)", "tensor(double)"], *indices]


@pytest.mark.parametrize(("op", "inputs", "shapes", "attrs", "expected"), [
    ("BinaryCrossEntropyWithLogits", ["x", "t"], {"x": ["N", 3], "t": ["N", 3]}, {"reduction": "none"}, ["N", 3]),
    ("BinaryCrossEntropyWithLogits", ["x", "t", "", "p"], {"x": ["N", 3], "t": ["N", 3], "p": [3]}, {}, []),
    ("BinaryCrossEntropyWithLogits", ["x", "t"], {"x": [], "t": []}, {"reduction": "sum"}, []),
    ("BinaryCrossEntropyBackward", ["g", "x", "t", "w"], {"g": [], "x": ["N", 3], "t": ["N", 3], "w": [3]}, {},
     ["N", 3]),
    ("KlDivBackward", ["g", "x", "t"], {"g": [], "x": [1, 5], "t": [4, 5]}, {"reduction": "batchmean"}, [1, 5]),
    ("KlDivBackward", ["g", "x", "t"], {"g": [4, 5], "x": [4, 5], "t": [1, 5]}, {"reduction": "none"}, [4, 5]),
    ("NLLLoss", ["x", "t"], {"x": ["N", 3], "t": ["N"]}, {"reduction": "none"}, ["N"]),
    ("NLLLoss", ["x", "t", "w"], {"x": ["N", 3, 4, 5], "t": ["N", 4, 5], "w": [3]}, {"reduction": "none"},
     ["N", 4, 5]),
    ("NLLLoss", ["x", "t"], {"x": [2, 3, 4], "t": [2, 4]}, {"reduction": "sum"}, []),
    ("NLLLossBackward", ["g", "x", "t"], {"g": ["N", 4], "x": ["N", 3, 4], "t": ["N", 4]}, {"reduction": "none"},
     ["N", 3, 4]),
    ("SoftTargetCrossEntropyLoss", ["x", "p"], {"x": ["N", 3, 4], "p": ["N", 3, 4]}, {"reduction": "none"},
     ["N", 4]),
    ("SoftTargetCrossEntropyLossGrad", ["g", "x", "p"], {"g": [], "x": ["N", 3], "p": ["N", 3]}, {}, ["N", 3]),
    ("MultilabelMarginLoss", ["x", "t"], {"x": ["N", 3, 4], "t": ["N", 3, 4]}, {"reduction": "none"}, ["N", 4]),
    ("MultilabelMarginLossBackward", ["g", "x", "t"], {"g": [], "x": ["N", 3], "t": ["N", 3]}, {}, ["N", 3]),
    ("CtcLoss", ["x", "t", "il", "tl"], {"x": ["T", "N", 5], "t": ["N", "S"], "il": ["N"], "tl": ["N"]},
     {"reduction": "none"}, ["N"]),
    ("CtcLoss", ["x", "t", "il", "tl"], {"x": [7, 4, 5], "t": [9], "il": [4], "tl": [4]}, {}, []),
    ("CtcLossBackward", ["g", "x", "t", "il", "tl"], {"g": [], "x": ["T", "N", 5], "t": [9], "il": ["N"],
                                                      "tl": ["N"]}, {"reduction": "sum"}, ["T", "N", 5]),
])
def test_shape_inference(op, inputs, shapes, attrs, expected):
    node = opset.make_node(op, inputs, ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        n, TensorProto.INT64 if n in ("t", "il", "tl") and (opset.get(op).classes or opset.get(op).sequences)
        else TensorProto.FLOAT16, s)
        for n, s in shapes.items()], [])
    model = onnx.shape_inference.infer_shapes(opset.make_model(graph), strict_mode=True)
    (y,) = [v for v in model.graph.value_info if v.name == "y"]
    assert y.type.tensor_type.elem_type == TensorProto.FLOAT16
    dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in y.type.tensor_type.shape.dim]
    assert dims == expected


@pytest.mark.parametrize(("op", "shapes", "attrs", "message"), [
    ("NLLLoss", {"x": [3], "t": []}, {}, "input 'input' has shape (3,); expected (N, C, d1, ...): rank 2 or more"),
    ("NLLLoss", {"x": [2, 3], "t": [3]}, {}, "input 'target' has shape (3,); expected input's shape without its "
     "class axis (2,)"),
    ("NLLLoss", {"x": [2, 3, 4], "t": [2, 4], "w": [4]}, {}, "input 'weight' has shape (4,); expected (3,), one "
     "value per class"),
    ("NLLLossBackward", {"g": [2], "x": [2, 3], "t": [2]}, {"reduction": "mean"}, "input 'grad_output' has shape "
     "(2,); expected the loss's shape ()"),
    ("SoftTargetCrossEntropyLoss", {"x": [2, 3], "p": [2]}, {}, "input 'target' has shape (2,); expected exactly "
     "input's shape (2, 3)"),
])
def test_class_shape_rules_are_refused_by_name(op, shapes, attrs, message):
    """A class loss's shape rules, broken where shapes are static: inference names the operator, the input and
    the expectation."""
    names = {"g": "grad_output", "x": "input", "t": "target", "p": "target", "w": "weight"}  # p: probabilities
    node = opset.make_node(op, list(shapes), ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        n, TensorProto.INT64 if n == "t" else TensorProto.FLOAT, s) for n, s in shapes.items()], [])
    assert all(names[n] in {i.name for i in opset.get(op).inputs} for n in shapes)
    with pytest.raises(Exception, match=re.escape(f"{op}: {message}")):
        onnx.shape_inference.infer_shapes(opset.make_model(graph), strict_mode=True)


@pytest.mark.parametrize(("op", "shapes", "attrs", "message"), [
    ("CtcLoss", {"x": [7, 5], "t": [4, 2], "il": [4], "tl": [4]}, {}, "input 'log_probs' has shape (7, 5); expected "
     "(T, N, C): T frames of N sequences over C classes"),
    ("CtcLoss", {"x": [7, 4, 5], "t": [3, 2], "il": [4], "tl": [4]}, {}, "input 'targets' has shape (3, 2); "
     "expected (N, S), padded, or (sum of target_lengths,), concatenated, for the batch (4,)"),
    ("CtcLoss", {"x": [7, 4, 5], "t": [4, 2, 1], "il": [4], "tl": [4]}, {}, "input 'targets' has shape (4, 2, 1)"),
    ("CtcLoss", {"x": [7, 4, 5], "t": [9], "il": [3], "tl": [4]}, {}, "input 'input_lengths' has shape (3,); "
     "expected (4,), one length per sequence"),
    ("CtcLoss", {"x": [7, 4, 5], "t": [9], "il": [4], "tl": [4]}, {"blank": 5}, "attribute 'blank' is 5; expected "
     "a class in [0, C) (C = 5)"),
    ("CtcLossBackward", {"g": [4], "x": [7, 4, 5], "t": [9], "il": [4], "tl": [4]}, {}, "input 'grad_output' has "
     "shape (4,); expected the loss's shape ()"),
])
def test_sequence_shape_rules_are_refused_by_name(op, shapes, attrs, message):
    """A sequence loss's shape rules, and its blank against C, broken where shapes are static: inference names
    the operator, the input (or attribute) and the expectation."""
    node = opset.make_node(op, list(shapes), ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        n, TensorProto.INT64 if n in ("t", "il", "tl") else TensorProto.FLOAT, s) for n, s in shapes.items()], [])
    with pytest.raises(Exception, match=re.escape(f"{op}: {message}")):
        onnx.shape_inference.infer_shapes(opset.make_model(graph), strict_mode=True)


def test_made_models_pass_the_full_checker():
    node = opset.make_node("BinaryCrossEntropyWithLogits", ["x", "t"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N"]) for n in "xt"],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    model = opset.make_model(graph)
    opset.check(model)
    assert model.ir_version == opset.IR_VERSION
    (f,) = model.functions  # only the specialisation the node uses, named on the node
    assert (f.name, f.overload) == ("BinaryCrossEntropyWithLogits", "float-mean") == (node.op_type,
                                                                                     model.graph.node[0].overload)
    assert {n.domain for n in f.node} <= {""}  # standard ops only
    assert [n.op_type for n in model.graph.node] == ["BinaryCrossEntropyWithLogits"]  # nothing added


def test_functions_are_specialised_and_stable():
    """Every specialisation is straight-line standard ops: no If, no run-time dispatch on attributes or types;
    no Sigmoid or Softplus (onnxruntime's float32 Sigmoid is 0 at x = -17.8) and no Log fed by either. The one
    subgraph: a sequence loss's recursion over time, a Scan whose body is straight-line too."""
    fs = opset.functions()
    assert len({(f.name, f.overload) for f in fs}) == len(fs) == sum(
        len(list(opset.specialisations(op))) for op in opset.OPS.values())
    bodies = [a.g for f in fs for n in f.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
    nodes = [n for f in fs for n in f.node] + [n for g in bodies for n in g.node]
    assert not {"If", "Loop", "Sigmoid", "Softplus", "CastLike"} & {n.op_type for n in nodes}
    graph_types = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    scans = [(f.name, n) for f in fs for n in f.node if any(a.type in graph_types for a in n.attribute)]
    assert {name for name, _ in scans} == {op.name for op in opset.OPS.values() if op.sequences}
    assert {n.op_type for _, n in scans} == {"Scan"}
    assert not [a for g in bodies for n in g.node for a in n.attribute if a.type in (onnx.AttributeProto.GRAPH,
                                                                                     onnx.AttributeProto.GRAPHS)]


def test_every_operator_has_a_worked_example_from_the_suite():
    """docs/operators.md shows each operator on one of the suite's cases: a new operator's cases must include a
    small float32 one for it (conformance/examples.py)."""
    from lossops.conformance.examples import worked_example
    from lossops.conformance.golden import load_all

    goldens = load_all()
    for name in opset.OPS:
        example = worked_example(name, goldens)
        assert example and f"= {name}(" in example[3], name


def test_with_functions_is_idempotent(monkeypatch):
    """A model that already carries this version's functions comes back byte for byte, without being taken
    apart and rebuilt; a model saved by an older version gets today's bodies instead of its own."""
    from lossops.conformance.golden import load_all
    from lossops.opset import model as model_module

    rebuilt = model_module.inline_lossops_callers
    for case in load_all()[::7]:
        once = opset.with_functions(case.model)
        assert model_module.carries_its_functions(once) and not model_module.carries_its_functions(case.model)
        with monkeypatch.context() as patch:
            patch.setattr(model_module, "inline_lossops_callers", lambda _: pytest.fail("rebuilt a current model"))
            assert opset.with_functions(once).SerializeToString() == once.SerializeToString(), case.name
        assert model_module.inline_lossops_callers is rebuilt
        stale = onnx.ModelProto()
        stale.CopyFrom(once)
        stale.functions[0].node[0].op_type = "Identity" if stale.functions[0].node[0].op_type != "Identity" else "Neg"
        assert not model_module.carries_its_functions(stale)
        assert opset.with_functions(stale).SerializeToString() == once.SerializeToString(), case.name
