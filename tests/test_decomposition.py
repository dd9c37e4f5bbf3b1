"""The portable half: models with the decomposition attached run on plain onnxruntime, at any opset from 13,
without nodes added to the user's graph, reject what the kernels reject, and are accurate where onnxruntime's
float32 operators are not. The oracle is numpy in float64 (and the kernels, which test_operators.py holds to
PyTorch)."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

from lossops import opset
from lossops.conformance.cases import node_model
from lossops.converters.lowering import lower
from lossops.opset.model import default_opset
from lossops.opset.spec import BROADCAST, EXACT, FITS, LOSS, PRINCIPAL, OpDef
from lossops.ort_ext import InferenceSession

f32 = np.float32
ONES = helper.make_tensor_value_info


def _plain(model: onnx.ModelProto) -> onnxruntime.InferenceSession:
    """The model with its functions, on onnxruntime alone (no lossops in the session)."""
    return onnxruntime.InferenceSession(opset.with_functions(model).SerializeToString(),
                                        providers=["CPUExecutionProvider"])


def bad_shapes(op: OpDef) -> list[tuple[str, list, str]]:
    """Shapes the contract rejects, one per rule an input of `op` has (and both ways a weight can break its
    rule), hidden from shape inference by symbolic dims (a rank that differs is not: shape inference rejects
    it): (operator, input shapes, the rule the failing guard node is named with). Optional inputs not under
    test are absent; grad_output is a scalar where it is not."""
    spans = any(i.shape == BROADCAST for i in op.inputs)
    where = "the broadcast shape of 'input' and 'target'" if spans else "input's shape"

    def shapes(**given) -> list:  # a class loss's gradient: the loss of `none` on input's rows, (4,)
        return [given.get(i.name, None if i.optional else () if i.shape == FITS else (4,) if i.shape == LOSS else
                          (1, 3)) for i in op.inputs]

    cases = []
    for i in op.inputs:
        if i.shape == EXACT:
            cases.append((op.name, shapes(input=(4, 3), **{i.name: (1, 3)}),
                          f"input '{i.name}' must have exactly input's shape"))
        elif i.shape == BROADCAST:
            cases.append((op.name, shapes(input=(4, 3), **{i.name: (2, 3)}),
                          f"inputs 'input' and '{i.name}' must broadcast"))
        elif i.shape == FITS:
            cases.append((op.name, shapes(**{i.name: (4, 3)}),
                          f"input '{i.name}' must broadcast to {where} without enlarging it"))
            three = {j.name: (3,) for j in op.inputs if j.shape in (PRINCIPAL, EXACT, BROADCAST)}
            cases.append((op.name, shapes(**three, **{i.name: (2,)}), f"input '{i.name}' must broadcast to {where}"))
    return cases


BAD_SHAPES = [case for op in opset.OPS.values() for case in bad_shapes(op)]


@pytest.mark.parametrize(("op", "shapes", "rule"), BAD_SHAPES, ids=[f"{c[0]}-{k}" for k, c in enumerate(BAD_SHAPES)])
def test_decomposition_rejects_what_the_kernels_reject(op, shapes, rule):
    inputs = [None if s is None else np.full(s, 0.5, f32) for s in shapes]
    attrs = {"reduction": "none"} if "reduction" in opset.get(op).defaults() else {}
    model, feeds = node_model(op, inputs, "float32", attrs, symbolic=True)
    # the failing node's name is the rule; onnxruntime prefixes names of inlined function nodes
    failing_rule = re.escape(f"{op}: {rule}") + r"( \(the sizes onnxruntime names are each dimension plus 2\))?'"
    with pytest.raises(Exception, match=failing_rule):
        _plain(model).run(None, feeds)
    lowered = onnxruntime.InferenceSession(lower(model)[0].SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match=failing_rule):  # where the formula reads no value of the input too
        lowered.run(None, feeds)
    with pytest.raises(Exception, match=f"{op}: input"):
        InferenceSession(model.SerializeToString(), mode="kernels").run(None, feeds)


def _bcewl_graph(version: int, weight_name: str = "weight") -> onnx.ModelProto:
    node = opset.make_node("BinaryCrossEntropyWithLogits", ["x", "y", weight_name, ""], ["loss"], reduction="sum")
    graph = helper.make_graph([helper.make_node("Neg", ["z"], ["x"]), node], "g",
                              [ONES("z", TensorProto.FLOAT, ["N", 3]), ONES("y", TensorProto.FLOAT, ["N", 3]),
                               ONES(weight_name, TensorProto.FLOAT, [3])],
                              [ONES("loss", TensorProto.FLOAT, [])])
    return helper.make_model(graph, ir_version=opset.IR_VERSION, opset_imports=[
        helper.make_opsetid("", version), helper.make_opsetid(opset.DOMAIN, opset.VERSION)])


def _bcewl_sum(z, y, w) -> float:
    x = -z.astype(np.float64)
    return float(np.sum(w * ((1 - y) * np.logaddexp(0, x) + y * np.logaddexp(0, -x))))


@pytest.mark.parametrize("version", [13, 17, 21, 22, 23, onnx.defs.onnx_opset_version()])
def test_any_opset_from_13_without_conversion(version):
    """The functions import the model's own opset; the user's nodes are untouched (no version converter);
    an absent optional input (pos_weight) is simply absent from the specialisation."""
    model = _bcewl_graph(version)
    carried = opset.with_functions(model)
    assert [n.op_type for n in carried.graph.node] == ["Neg", "BinaryCrossEntropyWithLogits"]
    (f,) = carried.functions
    assert f.overload == "float-sum-weight" == carried.graph.node[1].overload
    assert {o.domain: o.version for o in f.opset_import}[""] == version
    r = np.random.default_rng(version)
    feeds = {"z": r.normal(size=(5, 3)).astype(f32), "y": r.uniform(size=(5, 3)).astype(f32),
             "weight": r.uniform(0.5, 2, 3).astype(f32)}
    try:
        session = onnxruntime.InferenceSession(carried.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:
        if "opset" in str(e).lower() and version > 21:
            pytest.skip(f"this onnxruntime does not load default-domain opset {version}: {str(e)[:120]}")
        raise
    (loss,) = session.run(None, feeds)
    np.testing.assert_allclose(loss, _bcewl_sum(**{"z": feeds["z"], "y": feeds["y"], "w": feeds["weight"]}),
                               rtol=1e-6)


def test_below_the_floor_is_converted():
    """Below opset 13 (ReduceSum's axes became an input there) onnx's version converter lifts the model."""
    carried = opset.with_functions(_bcewl_graph(12))
    assert default_opset(carried) == 13
    feeds = {"z": np.ones((2, 3), f32), "y": np.zeros((2, 3), f32), "weight": np.ones(3, f32)}
    (loss,) = onnxruntime.InferenceSession(carried.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds)
    np.testing.assert_allclose(loss, _bcewl_sum(feeds["z"], feeds["y"], feeds["weight"]), rtol=1e-6)


def test_an_input_named_like_an_old_internal_is_not_dropped():
    """The generic functions filled absent weights with inputs named `*__lossops_one`, which the kernels then
    dropped by name: a user's own input of that name lost its weights."""
    model = _bcewl_graph(21, weight_name="w__lossops_one")
    r = np.random.default_rng(1)
    feeds = {"z": r.normal(size=(4, 3)).astype(f32), "y": r.uniform(size=(4, 3)).astype(f32),
             "w__lossops_one": np.full(3, 10, f32)}
    expected = _bcewl_sum(feeds["z"], feeds["y"], feeds["w__lossops_one"])
    for mode in ("kernels", "decomposition"):
        (loss,) = InferenceSession(model.SerializeToString(), mode=mode).run(None, feeds)
        np.testing.assert_allclose(loss, expected, rtol=1e-6, err_msg=mode)


def test_lossops_node_inside_a_user_function():
    """A user's function that calls a lossops operator: inlined (that function only), then run either way."""
    inner = opset.make_node("BinaryCrossEntropyWithLogits", ["a", "b"], ["c"], reduction="mean")
    my_loss = helper.make_function("user", "MyLoss", ["a", "b"], ["c"], [inner],
                                   [helper.make_opsetid("", 21), helper.make_opsetid(opset.DOMAIN, opset.VERSION)])
    graph = helper.make_graph([helper.make_node("MyLoss", ["x", "y"], ["loss"], domain="user")], "g",
                              [ONES("x", TensorProto.FLOAT, [2, 3]), ONES("y", TensorProto.FLOAT, [2, 3])],
                              [ONES("loss", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, functions=[my_loss], ir_version=opset.IR_VERSION, opset_imports=[
        helper.make_opsetid("", 21), helper.make_opsetid(opset.DOMAIN, opset.VERSION), helper.make_opsetid("user", 1)])
    r = np.random.default_rng(2)
    feeds = {"x": r.normal(size=(2, 3)).astype(f32), "y": r.uniform(size=(2, 3)).astype(f32)}
    expected = _bcewl_sum(-feeds["x"], feeds["y"], 1.0) / 6
    (plain,) = _plain(model).run(None, feeds)
    (kernels,) = InferenceSession(model.SerializeToString(), mode="kernels").run(None, feeds)
    np.testing.assert_allclose([plain, kernels], [expected, expected], rtol=1e-6)


def test_float32_mean_over_2e7_elements_is_accurate():
    """onnxruntime's float32 ReduceSum drifted 7e-4 to 7e-3 relative over 2e7 terms; the decomposition sums
    in float64, so only the final rounding to float32 remains."""
    n = 2 * 10**7
    r = np.random.default_rng(3)
    x, y = r.normal(scale=3, size=n).astype(f32), r.uniform(size=n).astype(f32)
    model, feeds = node_model("BinaryCrossEntropyWithLogits", [x, y, None, None], "float32", {"reduction": "mean"})
    (got,) = _plain(model).run(None, feeds)
    exact = _bcewl_sum(-x, y, 1.0) / n
    assert abs(float(got) - exact) <= 2 * np.spacing(f32(exact)), (float(got), exact)


def test_sigmoid_is_accurate_for_every_logit():
    """BinaryCrossEntropyWithLogitsBackward with target 0 is sigmoid(x): onnxruntime's float32 Sigmoid is 0 at
    x = -17.8 (exact 1.9e-8) and 120 % off over [-30, -4]."""
    x = np.concatenate([np.linspace(-30, -4, 2001), [-17.8, -87.0, -103.0, 0.0, 4.0, 30.0]]).astype(f32)
    model, feeds = node_model("BinaryCrossEntropyWithLogitsBackward",
                              [np.ones(x.shape, f32), x, np.zeros_like(x), None, None], "float32",
                              {"reduction": "none"})
    (got,) = _plain(model).run(None, feeds)
    exact = 1 / (1 + np.exp(-x.astype(np.float64)))
    ulps = np.abs(got - exact) / np.spacing(exact.astype(f32))
    assert ulps.max() <= 4, (x[ulps.argmax()], got[ulps.argmax()], exact[ulps.argmax()])
