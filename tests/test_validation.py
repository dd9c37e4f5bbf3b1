"""Every malformed model, careless name and bad argument ends in a clear error, the same in every entry point
(issue 15's findings, one regression test each). The model-level cases run through `prepare` in both modes,
`InferenceSession`, `with_functions`, CANN lowering and `lossops check`."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from onnx import TensorProto, helper

from lossops import opset
from lossops.conformance.cases import node_model
from lossops.converters.lowering import lower
from lossops.ort_ext import InferenceSession, prepare

f32 = np.float32
vi = helper.make_tensor_value_info
FEEDS = {"x": np.zeros((2, 3), f32), "y": np.full((2, 3), 0.5, f32)}


def _model(node: onnx.NodeProto, lossops_version: int = opset.VERSION) -> onnx.ModelProto:
    graph = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, [2, 3]), vi("y", TensorProto.FLOAT, [2, 3])],
                              [vi("out", TensorProto.FLOAT, None)])
    return helper.make_model(graph, ir_version=opset.IR_VERSION, opset_imports=[
        helper.make_opsetid("", 21), helper.make_opsetid(opset.DOMAIN, lossops_version)])


def _node(op: str = "BinaryCrossEntropyWithLogits", inputs=("x", "y"), outputs=("out",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), domain=opset.DOMAIN, **attrs)


BAD_MODELS = {
    "unknown attribute": (_model(_node(reduce="sum")),
                          "BinaryCrossEntropyWithLogits node 'out': unknown attribute 'reduce'; "
                          "BinaryCrossEntropyWithLogits has reduction"),
    "aclnn's spelling": (_model(_node("KlDiv", logTarget=1)), "KlDiv node 'out': unknown attribute 'logTarget'"),
    "attribute type": (_model(_node("KlDiv", log_target=1.0)),
                       "KlDiv node 'out': attribute 'log_target' is 1.0 (float); expected an int, one of 0, 1"),
    "not UTF-8": (_model(_node(reduction=b"\xff\xfe")),
                  "attribute 'reduction' is '\\xff\\xfe'; expected one of 'none', 'mean', 'sum'"),
    "a NUL inside": (_model(_node(reduction=b"sum\0garbage")),
                     "attribute 'reduction' is 'sum\\x00garbage'; expected one of 'none', 'mean', 'sum'"),
    "a list": (_model(_node(reduction=["sum"])), "attribute 'reduction' is a list of strings; expected a str, one of"),
    "a tensor": (_model(_node("SmoothL1Loss", beta=helper.make_tensor("b", TensorProto.FLOAT, [1], [0.5]))),
                 "attribute 'beta' is a tensor; expected a float, a finite float in [0, inf]"),
    "value": (_model(_node(reduction="batchmean")), "attribute 'reduction' is 'batchmean'; expected one of"),
    "domain version 2": (_model(_node(), lossops_version=2),
                         "imports the 'lossops' domain at version 2; lossops defines version 1 only"),
    "domain version 0": (_model(_node(), lossops_version=0), "at version 0; lossops defines version 1 only"),
    "required input ''": (_model(_node(inputs=("x", ""))),
                          "input 'target' (#1) is required; expected a tensor name, got ''"),
    "required input missing": (_model(_node(inputs=("x",))), "input 'target' (#1) is required"),
    "no output": (_model(_node(outputs=())), "node '(unnamed)': has 0 output(s) []; expected exactly one"),
}


@pytest.mark.parametrize("case", list(BAD_MODELS))
@pytest.mark.parametrize("entry", ["kernels", "decomposition", "with_functions", "lower-cann", "check"])
def test_bad_models_fail_the_same_everywhere(case, entry):
    model, message = BAD_MODELS[case]
    with pytest.raises(ValueError) as info:
        if entry in ("kernels", "decomposition"):
            InferenceSession(model.SerializeToString(), mode=entry).run(None, FEEDS)
        elif entry == "with_functions":
            opset.with_functions(model)
        elif entry == "lower-cann":
            lower(model, for_provider="cann")
        else:
            opset.check(model)
    assert message in str(info.value)


def test_make_node_refuses_what_validation_refuses():
    with pytest.raises(ValueError, match="input 'target' \\(#1\\) is required"):
        opset.make_node("BinaryCrossEntropyWithLogits", ["x"], ["o"])
    with pytest.raises(ValueError, match="expected exactly one"):
        opset.make_node("BinaryCrossEntropyWithLogits", ["x", "y"], [])


def test_not_a_model():
    for data, message in [(b"", "not an ONNX model: it has no graph"), (b"\x08\x01garbage\xff", "not an ONNX model")]:
        with pytest.raises(ValueError, match=message):
            InferenceSession(data)


def test_zero_elements_with_huge_dims():
    model, _ = node_model("BinaryCrossEntropyWithLogits", [np.zeros((0, 3), f32)] * 2 + [None, None], "float32",
                          {"reduction": "none"}, symbolic=True)
    empty = np.zeros((0, 2**40), f32)
    for mode in ("kernels", "decomposition"):
        (out,) = InferenceSession(model.SerializeToString(), mode=mode).run(None, {"input": empty, "target": empty})
        assert out.shape == (0, 2**40)


def test_prepare_names_extensions_already_loaded():
    import onnxruntime
    from onnxruntime_extensions import get_library_path

    so = onnxruntime.SessionOptions()
    so.register_custom_ops_library(get_library_path())
    with pytest.raises(ValueError, match="already have onnxruntime-extensions registered"):
        InferenceSession(_model(_node(reduction="sum")).SerializeToString(), so, mode="kernels")
    # the same through prepare() with the user's own options, which used to end in onnxruntime's message about
    # ArgSort at the user's own session creation
    so = onnxruntime.SessionOptions()
    so.register_custom_ops_library(get_library_path())
    with pytest.raises(ValueError, match="already have onnxruntime-extensions registered"):
        prepare(_model(_node(reduction="sum")), so)


def test_lossops_reads_no_thread_variable():
    """LOSSOPS_NUM_THREADS once sized a private pool, and 'abc' made every run fail; the kernels now use the
    session's intra-op threads and lossops reads no such variable."""
    code = ("import numpy as np; from lossops.conformance.cases import node_model; "
            "from lossops.ort_ext import InferenceSession; "
            "m, f = node_model('KlDivBackward', [np.ones((), 'f4'), np.ones(300000, 'f4'), np.ones(300000, 'f4')], "
            "'float32', {}); print(InferenceSession(m.SerializeToString()).run(None, f)[0][:2])")
    for value in ("abc", "2.5", "-1"):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                              env={**os.environ, "LOSSOPS_NUM_THREADS": value})
        assert done.returncode == 0, done.stderr[-2000:]


GARBAGE = {
    "empty.onnx": b"",
    "random.onnx": bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8)),
    "text.onnx": b"this is not a model\n",
    "tensor.onnx": helper.make_tensor("t", TensorProto.FLOAT, [3], [1, 2, 3]).SerializeToString(),
}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lossops", *args], capture_output=True, text=True, timeout=600)


def test_cli_one_line_errors(tmp_path):
    model, _ = node_model("KlDivBackward", [np.ones((), f32), np.ones(3, f32), np.ones(3, f32)], "float32", {})
    good = tmp_path / "good.onnx"
    onnx.save(model, good)
    truncated = good.read_bytes()[: len(good.read_bytes()) // 2]
    files = {**GARBAGE, "truncated.onnx": truncated}
    external = tmp_path / "external.onnx"  # refers to a data file that is not there
    init = onnx.numpy_helper.from_array(np.arange(3, dtype=f32), "w")  # raw data: what goes external
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Identity", ["w"], ["o"])], "g", [],
                                                  [vi("o", TensorProto.FLOAT, [3])], [init])),
              external, save_as_external_data=True, all_tensors_to_one_file=True, location="gone.bin",
              size_threshold=0)
    (tmp_path / "gone.bin").unlink()
    paths = [external, tmp_path / "missing.onnx"]
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        paths.append(tmp_path / name)
    calls = [[verb, str(p), *extra] for p in paths for verb, extra in
             (("check", []), ("lower", ["-o", str(tmp_path / "out.onnx")]), ("fuse", ["-o", str(tmp_path / "o.onnx")]))]
    calls += [["conformance", "-k", "("], ["conformance", "-k", "nomatch_at_all"], ["demo", "--size", "-5"],
              ["demo", "--repeat", "0"], ["train-demo", "--steps", "-1"], ["bench", "--threads", "0"]]
    for call in calls:
        done = _cli(*call)
        assert done.returncode != 0, call
        assert "Traceback" not in done.stderr, (call, done.stderr[-1500:])
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert lines and (lines[-1].startswith("lossops ") or "error:" in lines[-1]), (call, lines)
    assert not (tmp_path / "out.onnx").exists() and not (tmp_path / "o.onnx").exists()


def test_infinities_follow_the_documented_limits():
    """BinaryCrossEntropyWithLogits' doc: an infinite logit gives the loss's limit (+inf, or 0 where the
    coefficient of the infinite term is 0; PyTorch: NaN); an infinite target what PyTorch gives (the loss is
    linear in the target: -inf or +inf by the sign of its slope, NaN where the slope is 0)."""
    inf = np.inf
    x = np.array([-inf, -inf, inf, inf, 1.0, -2.0, 0.0], f32)
    y = np.array([0.5, 0.0, 0.5, 1.0, inf, -inf, inf], f32)
    limits = np.array([inf, 0.0, inf, 0.0, -inf, -inf, np.nan], f32)
    model, feeds = node_model("BinaryCrossEntropyWithLogits", [x, y, None, None], "float32", {"reduction": "none"})
    for mode in ("kernels", "decomposition"):
        (got,) = InferenceSession(model.SerializeToString(), mode=mode).run(None, feeds)
        np.testing.assert_array_equal(got, limits, err_msg=mode)


CLASS_LOSSES = ["NLLLoss", "NLLLossBackward", "CrossEntropyLoss", "CrossEntropyLossGrad"]


def _class_case(op: str, target: list[int], symbolic: bool = True, rows: int = 3):
    """A class loss on (3, 4) float32 input, `target` as given, weight present; `rows`: the target's length."""
    inputs = [np.array(1.0, f32), np.zeros((3, 4), f32), np.array(target[:rows], np.int64), np.ones(4, f32)]
    if opset.get(op).reduces:  # a loss: no grad_output
        inputs = inputs[1:]
    return node_model(op, inputs, "float32", {"reduction": "sum"}, symbolic=symbolic)


@pytest.mark.parametrize("op", CLASS_LOSSES)
@pytest.mark.parametrize("target", [[0, 4, 1], [0, -1, 1]], ids=["above", "negative"])
@pytest.mark.parametrize("mode", ["kernels", "decomposition", "plain onnxruntime"])
def test_a_class_outside_the_classes_is_a_clear_error(op, target, mode):
    """A target of C or a negative one other than ignore_index (Gather would count it from the end) ends in an
    exception naming the operator, the input and the expectation, in every path; the process goes on and the
    same session then runs a valid target."""
    model, feeds = _class_case(op, target)
    if mode == "plain onnxruntime":
        import onnxruntime

        session = onnxruntime.InferenceSession(opset.with_functions(model).SerializeToString(),
                                               providers=["CPUExecutionProvider"])
    else:
        session = InferenceSession(model.SerializeToString(), mode=mode)
    with pytest.raises(Exception, match=f"{op}: input 'target' must hold class indices in \\[0, C\\) or ignore_index"):
        session.run(None, feeds)
    assert np.isfinite(session.run(None, {**feeds, "target": np.array([0, 3, -100], np.int64)})[0]).all()


@pytest.mark.parametrize("op", CLASS_LOSSES)
def test_a_target_of_another_shape_is_refused_by_name(op):
    """Symbolic dims: the class rules are checked when the session runs, and the error names the rule."""
    model, feeds = _class_case(op, [0, 1, 2], rows=2)
    with pytest.raises(Exception, match=f"{op}: input 'target' (must have|has shape .*; expected) input's shape "
                                        "without its class axis"):
        InferenceSession(model.SerializeToString()).run(None, feeds)


def test_a_class_loss_runs_on_its_kernel_beside_an_elementwise_one():
    """A model with an elementwise loss and a class loss (int64 targets) runs in one lossops session, both nodes
    on the kernels (the tile engine's and the rows engine's), with no function left in the prepared model."""
    from lossops.ort_ext import host
    from lossops.ort_ext.session import prepare

    graph = helper.make_graph(
        [opset.make_node("MseLoss", ["x", "y"], ["mse"]), opset.make_node("CrossEntropyLoss", ["x", "t"], ["ce"]),
         helper.make_node("Add", ["mse", "ce"], ["out"])], "g",
        [vi("x", TensorProto.FLOAT, [2, 3]), vi("y", TensorProto.FLOAT, [2, 3]), vi("t", TensorProto.INT64, [2])],
        [vi("out", TensorProto.FLOAT, [])])
    model = opset.make_model(graph)
    if host.kernels_available():
        import onnxruntime

        so = onnxruntime.SessionOptions()
        prepared = onnx.load_from_string(prepare(model, so))
        assert {(n.domain, n.op_type) for n in prepared.graph.node} >= {
            (host.KERNEL_DOMAIN, "LossopsMseLoss"), (host.KERNEL_DOMAIN, "LossopsCrossEntropyLoss")}
        assert not prepared.functions
    x, y, t = np.arange(6, dtype=f32).reshape(2, 3), np.ones((2, 3), f32), np.array([2, 0])
    import torch
    import torch.nn.functional as F

    expected = F.mse_loss(torch.tensor(x).double(), torch.tensor(y).double()) + F.cross_entropy(
        torch.tensor(x).double(), torch.tensor(t))
    got = InferenceSession(model.SerializeToString()).run(None, {"x": x, "y": y, "t": t})[0]
    np.testing.assert_allclose(got, expected.item(), rtol=1e-6)
