"""The Ascend path, checked without an NPU: lowering for CANN's graph mode, the placement and product checks,
and a CANN session's behaviour when CANN cannot run. Tests that need Ascend hardware carry the `cann` marker
and skip, with the reason, where the toolkit is absent."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from lossops import opset
from lossops.conformance.cases import DTYPES, node_model, node_specs, spec_case
from lossops.converters.lowering import lower
from lossops.opset.model import default_opset
from lossops.ort_ext import InferenceSession, cann

STATIC = [spec_case(s, d) for s in node_specs() for d in DTYPES]


# The cross entropy's softmax: graph mode's list as recorded (ort_ext/cann_support.json, quoted there as what it
# "includes") has neither Softmax nor LogSoftmax, nor a max reduction to write them with; CANN's ONNX parser has
# both. Without an NPU to settle it, those nodes are reported as CPU fallbacks, and nothing else may be.
SOFTMAX = ("Softmax", "LogSoftmax")


def unclaimed(model) -> list:
    return [p for p in cann.placement(model, "graph") if not p.claimed and p.node.split()[1] not in SOFTMAX]


def sequences(case) -> bool:
    """A sequence loss (CTC): graph mode claims no Scan, so its recursion runs on the provider's CPU fallback and
    its lowering for CANN is the portable form, held to exactness only."""
    return any(n.domain == opset.DOMAIN and opset.get(n.op_type).sequences for n in case.model.graph.node)


@pytest.mark.parametrize("case", STATIC[::7], ids=[c.name for c in STATIC[::7]])
def test_cann_lowering_is_claimable_and_exact(case):
    lowered, report = lower(case.model, for_provider="cann")
    assert report and opset.DOMAIN not in {n.domain for n in lowered.graph.node}
    unclaimed_nodes = unclaimed(lowered)
    if sequences(case):
        assert {p.node.split()[1] for p in unclaimed_nodes} >= {"Scan"}
    else:
        assert not unclaimed_nodes, unclaimed_nodes
        assert not {"Constant", "CastLike", "NonZero", "Concat"} & {n.op_type for n in lowered.graph.node}
    onnx.checker.check_model(lowered, full_check=True)
    from lossops.conformance.backends import cann_lowered

    ok, _, msg = case.check(cann_lowered(case.model, case.inputs))
    assert ok, msg


def test_every_operator_dtype_reduction_is_claimable():
    seen = set()
    for case in STATIC:
        if sequences(case):
            continue
        node = next(n for n in case.model.graph.node if n.domain == opset.DOMAIN)
        key = (node.op_type, case.dtype, opset.get(node.op_type).resolve(opset.node_attributes(node))["reduction"])
        if key in seen:
            continue
        seen.add(key)
        lowered, _ = lower(case.model, for_provider="cann")
        assert not unclaimed(lowered), case.name
    assert len(seen) == sum(4 * len(op.attribute("reduction").allowed) for op in opset.OPS.values()
                            if not op.sequences)


def _model(nodes, inputs, outputs, initializers=(), opset_version=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)], ir_version=10)


def test_placement_reasons():
    vi = helper.make_tensor_value_info
    model = _model([helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Exp", ["x"], ["y"]),
                    helper.make_node("NonZero", ["x"], ["z"])],
                   [vi("x", TensorProto.FLOAT, [3])], [vi("c", TensorProto.FLOAT, [3]), vi("y", TensorProto.FLOAT, [3]),
                                                       vi("z", TensorProto.INT64, None)],
                   [helper.make_tensor("a", TensorProto.FLOAT, [3], [1, 2, 3]),
                    helper.make_tensor("b", TensorProto.FLOAT, [3], [1, 2, 3])])
    graph = {p.node.split()[1]: p for p in cann.placement(model, "graph")}
    assert not graph["Add"].claimed and graph["Add"].reason == "all its inputs are initializers"
    assert graph["Exp"].claimed and not graph["NonZero"].claimed
    single = {p.node.split()[1]: p for p in cann.placement(model, "single-op")}
    assert "Exp has no float kernel" in single["Exp"].reason  # single-op Exp is float16 only
    node = opset.make_node("KlDivBackward", ["g", "x", "t"], ["y"])
    custom = cann.placement(_model([node], [vi(n, TensorProto.FLOAT, [3]) for n in "gxt"],
                                   [vi("y", TensorProto.FLOAT, [3])]), "graph")
    assert "custom domain 'lossops' is never claimed" in custom[0].reason


def test_parser_opsets_and_lowered_opset():
    """CANN's ONNX parser lists each op for opsets up to 18: a node at opset 21 is reported, and lowering for
    CANN restamps the lowest opset the lowered ops need (the lossops floor, 13, for every operator here)."""
    vi = helper.make_tensor_value_info
    model = _model([helper.make_node("Exp", ["x"], ["y"])], [vi("x", TensorProto.FLOAT, [3])],
                   [vi("y", TensorProto.FLOAT, [3])], opset_version=21)
    (exp,) = cann.placement(model, "graph")
    assert not exp.claimed and exp.reason.startswith("CANN's ONNX parser has no Exp at opset 21 (it lists opsets 8-18)")
    for case in STATIC[::40]:
        lowered, _ = lower(case.model, for_provider="cann")
        assert default_opset(case.model) == 21 and default_opset(lowered) <= 18, case.name


def test_ascend_product_limits():
    model, _ = node_model("KlDivBackward", [np.ones((), np.float32), np.ones((2, 3), np.float32),
                                           np.ones((2, 3), np.float32)], "float32", {})
    assert cann.soc_problems(model, "A2") == []
    assert "not supported on 910" in cann.soc_problems(model, "910")[0][1]
    import ml_dtypes

    bf = ml_dtypes.bfloat16
    model, _ = node_model("BinaryCrossEntropyBackward", [np.ones((), bf), np.ones((1,) * 9, bf),
                                                         np.ones((1,) * 9, bf), None], "bfloat16", {})
    problems = [p for _, p in cann.soc_problems(model, "310P")]
    assert any("bfloat16, which 310P does not support" in p for p in problems)
    assert any("rank 9; aclnn takes at most 8" in p for p in problems)
    with pytest.raises(ValueError, match="expected one of 910, 310P, A2, A3, 950"):
        cann.soc_problems(model, "910B")


def test_ascend_limits_of_the_class_losses():
    """aclnnCrossEntropyLoss is listed for A2, A3 and 950 only, and takes (N, C); aclnnNLLLoss is listed for every
    part, and takes (N, C) too (its (N, C, H, W) form is another API); aclnnNLLLossBackward is not listed for
    310P, aclnnCrossEntropyLossGrad supports no label smoothing. aclnnMultilabelMarginLoss is listed for 910, A2 and
    A3, and takes (N, C). The CTC APIs are listed for every part."""
    x, t = np.zeros((4, 3), np.float32), np.zeros(4, np.int64)
    model, _ = node_model("CrossEntropyLoss", [x, t, None], "float32", {})
    assert cann.soc_problems(model, "A2") == []
    assert [p for _, p in cann.soc_problems(model, "910")] == ["CrossEntropyLoss is not supported on 910 (aclnn page)"]
    model, _ = node_model("CrossEntropyLoss", [np.zeros((4, 3, 2), np.float32), np.zeros((4, 2), np.int64), None],
                          "float32", {})
    assert [p for _, p in cann.soc_problems(model, "A3")] == ["input 'input' has rank 3; aclnnCrossEntropyLoss takes "
                                                              "rank 2"]
    model, _ = node_model("NLLLoss", [x, t, None], "float32", {})
    assert cann.soc_problems(model, "910") == cann.soc_problems(model, "310P") == []
    model, _ = node_model("NLLLossBackward", [np.float32(1), x, t, None], "float32", {})
    assert cann.soc_problems(model, "A2") == []
    assert [p for _, p in cann.soc_problems(model, "310P")] == ["NLLLossBackward is not supported on 310P (aclnn page)"]
    model, _ = node_model("CrossEntropyLossGrad", [np.float32(1), x, t, None], "float32", {"label_smoothing": 0.1})
    assert [p for _, p in cann.soc_problems(model, "950")] == [
        "label_smoothing is 0.1; aclnnCrossEntropyLossGrad supports labelSmoothing 0 only (aclnn page)"]
    model, _ = node_model("SoftTargetCrossEntropyLossGrad", [np.float32(1), x, np.full((4, 3), 1 / 3, np.float32),
                                                            None], "float32", {})
    assert "has no aclnn counterpart" in cann.soc_problems(model, "A2")[0][1]
    lp, lengths = np.zeros((5, 2, 3), np.float32), np.array([5, 4])
    model, _ = node_model("CtcLoss", [lp, np.ones((2, 2), np.int64), lengths, np.array([2, 1])], "float32", {})
    assert all(cann.soc_problems(model, part) == [] for part in ("910", "310P", "A2", "A3", "950"))
    labels = np.array([[0, -1, 1], [2, 1, 0], [-1, 0, 0], [1, 2, -1]])
    model, _ = node_model("MultilabelMarginLoss", [x, labels], "float32", {})
    assert cann.soc_problems(model, "910") == cann.soc_problems(model, "A2") == []
    assert [p for _, p in cann.soc_problems(model, "310P")] == [
        "MultilabelMarginLoss is not supported on 310P (aclnn page)"]
    model, _ = node_model("MultilabelMarginLoss", [np.zeros((4, 3, 2), np.float32), np.zeros((4, 3, 2), np.int64)],
                          "float32", {})
    assert [p for _, p in cann.soc_problems(model, "A3")] == [
        "input 'input' has rank 3; aclnnMultilabelMarginLoss takes rank 2"]


def _demo_model():
    from lossops.demo import demo_inputs, demo_model

    return demo_model(TensorProto.FLOAT), {k: v.astype(np.float32) for k, v in demo_inputs(500).items()}


def test_cann_session_never_runs_silently_on_cpu():
    model, feeds = _demo_model()
    reason = cann.why_unavailable()
    if reason is None:
        pytest.skip("CANN can run here: covered by the hardware tests")
    with pytest.raises(cann.CannUnavailable, match="CANNExecutionProvider was requested but cannot run: "):
        InferenceSession(model.SerializeToString(), providers=["CANNExecutionProvider", "CPUExecutionProvider"])
    with pytest.warns(RuntimeWarning, match="running on the CPU as allowed"):
        session = InferenceSession(model.SerializeToString(), providers=["CANNExecutionProvider"],
                                   allow_cpu_fallback=True)
    expected = InferenceSession(model.SerializeToString()).run(None, feeds)
    for got, want in zip(session.run(None, feeds), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    assert session.lossops_mode == "cann"


def test_provider_options_user_wins():
    assert cann.provider_options({"precision_mode": "force_fp16", "device_id": "1"}) == {
        "enable_cann_subgraph": "1", "precision_mode": "force_fp16", "dump_om_model": "0", "device_id": "1"}


def test_doctor_and_check_cli(tmp_path):
    model, _ = _demo_model()
    path = tmp_path / "demo.onnx"
    onnx.save(model, path)
    lowered = tmp_path / "cann.onnx"
    run = lambda *a: subprocess.run([sys.executable, "-m", "lossops", *a], capture_output=True, text=True,  # noqa: E731
                                    timeout=300)
    assert "a CANN session: " in run("doctor").stdout
    assert run("lower", "--for", "cann", str(path), "-o", str(lowered)).returncode == 0
    done = run("check", "--provider", "cann", str(lowered))
    nodes = len(onnx.load(lowered).graph.node)
    assert done.returncode == 0 and f"CANN graph mode claims {nodes} of {nodes} nodes" in done.stdout
    single = run("check", "--provider", "cann", "--cann-mode", "single-op", str(lowered))
    assert "falls back to CPU" in single.stdout
    soc = run("check", "--soc", "910", str(path))
    assert soc.returncode == 1 and "KlDivBackward is not supported on 910" in soc.stdout


@pytest.mark.cann
def test_on_ascend_hardware():
    """Runs the CANN-lowered demo on an NPU and compares with the kernels (needs Ascend hardware)."""
    reason = cann.why_unavailable()
    if reason:
        pytest.skip(f"no usable CANN here: {reason}")
    model, feeds = _demo_model()
    session = InferenceSession(model.SerializeToString(), providers=["CANNExecutionProvider"])
    assert "CANNExecutionProvider" in session.get_providers()
    expected = InferenceSession(model.SerializeToString()).run(None, feeds)
    for got, want in zip(session.run(None, feeds), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
