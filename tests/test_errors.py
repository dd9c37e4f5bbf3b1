"""Invalid nodes and inputs end in a clear Python exception naming the operator, the input and the
expectation; the process lives on (crash-prone cases run in a subprocess)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import ml_dtypes
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

from lossops import opset
from lossops.conformance.cases import node_model
from lossops.ort_ext import InferenceSession, add_kernels, arrays, prepare
from lossops.ort_ext.arrays import InvalidInput
from lossops.ort_ext.host import KERNEL_DOMAIN, kernel_op_type

MODES = ["kernels", "decomposition"]
f32 = np.float32


def raw_model(op, inputs, types, shapes, **attrs):
    """A model built with plain onnx.helper, bypassing make_node's own attribute check."""
    node = helper.make_node(op, [n for n in inputs], ["output"], domain=opset.DOMAIN, **attrs)
    graph = helper.make_graph([node], "bad", [
        helper.make_tensor_value_info(n, types.get(n, TensorProto.FLOAT), shapes[n]) for n in inputs if n],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=opset.opset_imports(), ir_version=opset.IR_VERSION)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("op", "attrs", "expected"), [
    ("BinaryCrossEntropyWithLogits", {"reduction": "batchmean"},
     "attribute 'reduction' is 'batchmean'; expected one of"),
    ("BinaryCrossEntropyBackward", {"reduction": "avg"}, "attribute 'reduction' is 'avg'"),
    ("KlDivBackward", {"reduction": "MEAN"}, "attribute 'reduction' is 'MEAN'"),
    ("KlDivBackward", {"log_target": 2}, "attribute 'log_target' is 2; expected one of 0, 1"),
    ("SigmoidFocalLoss", {"gamma": -0.5}, r"attribute 'gamma' is -0.5; expected a finite float in \[0, inf\]"),
    ("SigmoidFocalLoss", {"alpha": float("nan")}, r"attribute 'alpha' is nan; expected a finite float in \[-1, 1\]"),
    ("SigmoidFocalLossGrad", {"alpha": 1.5}, r"attribute 'alpha' is 1.5; expected a finite float in \[-1, 1\]"),
    ("SigmoidFocalLoss", {"gamma": "2"}, r"attribute 'gamma' is '2' \(str\); expected a float"),
])
def test_bad_attribute(op, attrs, expected, mode):
    with pytest.raises(ValueError, match=f"{op}: {expected}"):
        opset.make_node(op, ["a", "b", "c"], ["y"], **attrs)
    inputs = ["x", "t"] if op in ("BinaryCrossEntropyWithLogits", "SigmoidFocalLoss") else ["g", "x", "t"]
    model = raw_model(op, inputs, {}, {n: [3] for n in inputs}, **attrs)
    with pytest.raises(ValueError, match=f"{op} node 'output': {expected}"):
        InferenceSession(model.SerializeToString(), mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_float_attributes_reach_every_path(mode):
    """alpha and gamma given on the node reach the kernels (parameters) and the decomposition (attribute
    references in the function, values in an expansion): each mode agrees with the oracle, and an INT where a
    FLOAT is declared is refused, not read as another value."""
    from lossops.conformance.oracle import ORACLES

    r = np.random.default_rng(0)
    x, t = r.normal(size=(3, 4)).astype(np.float32), r.uniform(size=(3, 4)).astype(np.float32)
    for alpha, gamma in ((0.75, 3.0), (-1.0, 0.5)):
        model = raw_model("SigmoidFocalLoss", ["x", "t"], {}, {"x": [3, 4], "t": [3, 4]}, reduction="none",
                          alpha=alpha, gamma=gamma)
        got = InferenceSession(opset.with_functions(model).SerializeToString(), mode=mode).run(
            None, {"x": x, "t": t})[0]
        expected = ORACLES["SigmoidFocalLoss"](x, t, None, reduction="none", alpha=alpha, gamma=gamma)
        np.testing.assert_allclose(got, expected, rtol=2e-6)
    model = raw_model("SigmoidFocalLoss", ["x", "t"], {}, {"x": [3], "t": [3]}, gamma=2)
    with pytest.raises(ValueError, match=r"attribute 'gamma' is 2 \(int\); expected a float"):
        InferenceSession(model.SerializeToString(), mode=mode)


def test_bad_attribute_reaches_the_kernel_host():
    """A model prepared by hand for the kernels (no schema check) still fails cleanly at session creation."""
    node = helper.make_node(kernel_op_type("KlDivBackward"), ["g", "x", "t"], ["y"], domain=KERNEL_DOMAIN,
                            reduction="bogus")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in "gxt"],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(KERNEL_DOMAIN, 1)],
                              ir_version=10)
    so = onnxruntime.SessionOptions()
    add_kernels(so)
    with pytest.raises(Exception, match="KlDivBackward: attribute 'reduction' is 'bogus'"):
        onnxruntime.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("types", "expected"), [
    ({"t": TensorProto.DOUBLE}, "BinaryCrossEntropyBackward.*target has inconsistent type tensor.double"),
    ({n: TensorProto.INT32 for n in "gxt"}, "BinaryCrossEntropyBackward.*unsupported type: tensor.int32"),
])
def test_bad_element_types(types, expected, mode):
    model = raw_model("BinaryCrossEntropyBackward", ["g", "x", "t"], types, {"g": [], "x": [3], "t": [3]})
    with pytest.raises(onnx.shape_inference.InferenceError, match=expected):
        InferenceSession(model.SerializeToString(), mode=mode)


STATIC_SHAPE_ERRORS = [
    ("BinaryCrossEntropyWithLogits", ["x", "t"], {"x": [4, 3], "t": [1, 3]},
     "input 'target' has shape \\(1, 3\\); expected exactly input's shape \\(4, 3\\)"),
    ("BinaryCrossEntropyWithLogits", ["x", "t", "w"], {"x": [4, 3], "t": [4, 3], "w": [2]},
     "input 'weight' has shape \\(2,\\); expected a shape broadcastable to \\(4, 3\\)"),
    ("BinaryCrossEntropyWithLogits", ["x", "t", "", "p"], {"x": [3], "t": [3], "p": [2, 3]},
     "input 'pos_weight' has shape \\(2, 3\\); expected a shape broadcastable to \\(3,\\)"),
    ("BinaryCrossEntropyBackward", ["g", "x", "t"], {"g": [], "x": [3], "t": [4, 3]},
     "input 'target' has shape \\(4, 3\\); expected a shape broadcastable to \\(3,\\)"),
    ("BinaryCrossEntropyBackward", ["g", "x", "t"], {"g": [5], "x": [3], "t": [3]},
     "input 'grad_output' has shape \\(5,\\)"),
    ("KlDivBackward", ["g", "x", "t"], {"g": [], "x": [4, 3], "t": [2, 3]},
     "inputs 'input' \\(4, 3\\) and 'target' \\(2, 3\\) do not broadcast"),
    ("KlDivBackward", ["g", "x", "t"], {"g": [2, 4, 3], "x": [4, 3], "t": [1, 3]},
     "input 'grad_output' has shape \\(2, 4, 3\\); expected a shape broadcastable to \\(4, 3\\)"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("op", "inputs", "shapes", "expected"), STATIC_SHAPE_ERRORS)
def test_bad_static_shapes(op, inputs, shapes, expected, mode):
    model = raw_model(op, inputs, {}, shapes)
    with pytest.raises(ValueError, match=f"{op}: {expected}"):
        InferenceSession(model.SerializeToString(), mode=mode)


def test_static_and_runtime_shape_errors_read_the_same():
    """Each broken rule says the same sentence from shape inference (static shapes) and from the kernels
    (symbolic shapes, found at run time): both fill opset/shapes.py's templates."""
    cases = [("BinaryCrossEntropyWithLogits", {"input": (4, 3), "target": (1, 3)}),
             ("BinaryCrossEntropyWithLogits", {"input": (3,), "target": (3,), "weight": (2,)}),
             ("KlDivBackward", {"grad_output": (), "input": (4, 3), "target": (2, 3)})]
    for op, shapes in cases:
        with pytest.raises(ValueError) as static:
            opset.shapes.infer(opset.get(op), shapes, opset.get(op).defaults())
        inputs = [None if i.name not in shapes else np.ones(shapes[i.name], f32) for i in opset.get(op).inputs]
        with pytest.raises(InvalidInput) as run_time:
            arrays.run(op, inputs)
        assert str(run_time.value) == f"{op}: {static.value}"


RUNTIME_SHAPE_ERRORS = [
    ("BinaryCrossEntropyWithLogits", [np.ones((4, 3)), np.ones((1, 3)), None, None],
     "input 'target' has shape \\(1, 3\\); expected exactly input's shape \\(4, 3\\)"),
    ("BinaryCrossEntropyWithLogits", [np.ones(3), np.ones(3), np.ones(2), None],
     "input 'weight' has shape \\(2,\\); expected a shape broadcastable to \\(3,\\)"),
    ("BinaryCrossEntropyBackward", [np.ones(()), np.ones(3), np.ones(4), None],
     "input 'target' has shape \\(4,\\); expected a shape broadcastable to \\(3,\\)"),
    ("BinaryCrossEntropyBackward", [np.ones(()), np.ones((1, 3)), np.ones((4, 3)), None],
     "input 'target' has shape \\(4, 3\\); expected a shape broadcastable to \\(1, 3\\)"),
    ("KlDivBackward", [np.ones(()), np.ones((4, 3)), np.ones((2, 3))],
     "inputs 'input' \\(4, 3\\) and 'target' \\(2, 3\\) do not broadcast"),
    ("KlDivBackward", [np.ones((2, 3)), np.ones((1, 3)), np.ones((1, 3))],
     "input 'grad_output' has shape \\(2, 3\\); expected a shape broadcastable to \\(1, 3\\)"),
]


@pytest.mark.parametrize(("op", "inputs", "expected"), RUNTIME_SHAPE_ERRORS)
def test_bad_runtime_shapes_on_kernels(op, inputs, expected):
    """Symbolic dims hide the problem from shape inference: the kernel reports it from run()."""
    inputs = [None if a is None else a.astype(f32) for a in inputs]
    model, feeds = node_model(op, inputs, "float32", {"reduction": "none"}, symbolic=True)
    session = InferenceSession(model.SerializeToString(), mode="kernels")
    with pytest.raises(Exception, match=f"{op}: {expected}"):
        session.run(None, feeds)


def test_bad_runtime_shape_on_decomposition():
    """The decomposition of BCE backward guards target's shape; the failing node is named with the rule."""
    model, feeds = node_model("BinaryCrossEntropyBackward", [np.ones((), f32), np.ones((1, 3), f32),
                                                                     np.ones((4, 3), f32), None],
                                     "float32", {"reduction": "none"}, symbolic=True)
    session = InferenceSession(model.SerializeToString(), mode="decomposition")
    with pytest.raises(Exception, match="BinaryCrossEntropyBackward: input 'target' must broadcast to input's "
                       "shape without enlarging it"):
        session.run(None, feeds)


def test_wrong_feed_dtype_is_an_exception():
    model, feeds = node_model("KlDivBackward", [np.ones((), f32), np.ones(3, f32), np.ones(3, f32)],
                                     "float32", {})
    session = InferenceSession(model.SerializeToString())
    with pytest.raises(Exception, match="Unexpected input data type"):
        session.run(None, {**feeds, "input": np.ones(3, np.float64)})
    bf16 = np.ones(3, np.dtype(ml_dtypes.bfloat16))  # onnxruntime: "Numpy_type 256 can't be converted to MLDataType"
    with pytest.raises(TypeError, match=r"input 'target' is a numpy array of bfloat16; the model expects tensor\(flo"):
        session.run(None, {**feeds, "target": bf16})
    # and the session lives on: -target * grad_output / input.shape[0] (the default reduction, batchmean)
    np.testing.assert_allclose(session.run(None, feeds)[0], np.full(3, -1 / 3, f32), rtol=2**-20)


def test_session_options_of_the_wrong_type():
    model, _ = node_model("KlDivBackward", [np.ones((), f32), np.ones(3, f32), np.ones(3, f32)], "float32", {})
    with pytest.raises(TypeError, match=r"sess_options is a dict; expected onnxruntime\.SessionOptions"):
        InferenceSession(model.SerializeToString(), {"intra_op_num_threads": 1})


@pytest.mark.parametrize(("attrs", "expected"), [
    ({"reduce": "none"}, "unknown attribute 'reduce'; BinaryCrossEntropyWithLogits has reduction"),
    ({"log_target": 1}, "unknown attribute 'log_target'"),
    ({"reduction": "batchmean"}, "attribute 'reduction' is 'batchmean'; expected one of"),
])
def test_hand_written_kernel_nodes_are_validated(attrs, expected):
    """A node written directly in the kernels' domain is held to the lossops node's rules: onnxruntime hands
    the kernel only the attributes it asks for, so an unknown one would be ignored silently."""
    node = helper.make_node(kernel_op_type("BinaryCrossEntropyWithLogits"), ["x", "t"], ["y"], domain=KERNEL_DOMAIN,
                            **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in "xt"],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(KERNEL_DOMAIN, 1)],
                              ir_version=10)
    with pytest.raises(ValueError, match=f"{KERNEL_DOMAIN}::LossopsBinaryCrossEntropyWithLogits .*{expected}"):
        InferenceSession(model.SerializeToString())


@pytest.mark.parametrize("mode", MODES)
def test_run_behaves_as_onnxruntimes_run(mode, monkeypatch):
    """On a CPU session lossops' run() calls onnxruntime's binding directly (onnxruntime's Python run()
    re-validates every feed): outputs, output selection, OrtValue feeds, run options and bad feeds behave as
    onnxruntime.InferenceSession.run on the same session."""
    inputs = [np.ones((), f32), np.log(np.full(3, 0.5, f32)), np.arange(3, dtype=f32)]
    model, feeds = node_model("KlDivBackward", inputs, "float32", {"reduction": "sum"})
    session = InferenceSession(model.SerializeToString(), mode=mode)
    theirs = onnxruntime.InferenceSession.run
    expected = theirs(session, None, feeds)
    np.testing.assert_array_equal(expected[0], -np.arange(3, dtype=f32))  # d/dx of sum(t * (log t - x)) = -t
    values = {k: onnxruntime.OrtValue.ortvalue_from_numpy(v) for k, v in feeds.items()}
    stop = onnxruntime.RunOptions()
    stop.terminate = True
    bad_feeds = [{k: v for k, v in feeds.items() if k != "target"},  # a required input missing
                 {**feeds, "input": np.ones(3, np.float64)},  # wrong element type
                 {**feeds, "extra": np.ones(3, f32)}]  # a name the graph does not have
    errors = {}
    for run in (theirs, InferenceSession.run):
        assert [a.tolist() for a in run(session, ["output"], feeds)] == [expected[0].tolist()]
        assert run(session, None, values)[0].tolist() == expected[0].tolist()
        with pytest.raises(Exception, match="terminate"):
            run(session, None, feeds, stop)
        for k, bad in enumerate(bad_feeds):
            with pytest.raises(Exception) as raised:
                run(session, None, bad)
            errors.setdefault(k, []).append((type(raised.value), str(raised.value)))
    assert all(a == b for a, b in errors.values()), errors
    assert "Required inputs (['target']) are missing" in errors[0][0][1]
    # and the direct path is the one taken: onnxruntime's run() is never entered for plain numpy feeds
    monkeypatch.setattr(onnxruntime.InferenceSession, "run", lambda *a: pytest.fail("onnxruntime's run() called"))
    np.testing.assert_array_equal(session.run(None, feeds)[0], expected[0])
    session.set_providers(["CPUExecutionProvider"])  # set_providers rebuilds onnxruntime's binding
    np.testing.assert_array_equal(session.run(None, feeds)[0], expected[0])


def test_unknown_operator():
    with pytest.raises(ValueError, match="'SoftmaxLoss' is not a lossops operator"):
        opset.make_node("SoftmaxLoss", ["x"], ["y"])


CRASH_PRONE = textwrap.dedent("""
    import numpy as np
    from lossops.conformance.cases import node_model
    from lossops.ort_ext import InferenceSession
    f32 = np.float32
    failures = 0
    def expect_error(fn):
        global failures
        try:
            fn()
        except Exception:
            failures += 1
    for mode in ("kernels", "decomposition"):
        m, feeds = node_model("KlDivBackward", [np.ones((2, 3), f32)] * 3, "float32",
                                     {}, symbolic=True)
        s = InferenceSession(m.SerializeToString(), mode=mode)
        # bad shapes, wrong dtypes, a missing input
        expect_error(lambda: s.run(None, {**feeds, "target": np.ones((5, 7), f32)}))
        expect_error(lambda: s.run(None, {**feeds, "target": np.ones((2, 3), np.float64)}))
        expect_error(lambda: s.run(None, {"input": feeds["input"]}))
    # half types through the kernels with bad shapes
    for dt in ("float16", "bfloat16"):
        import ml_dtypes
        d = np.float16 if dt == "float16" else ml_dtypes.bfloat16
        m, feeds = node_model("BinaryCrossEntropyWithLogits", [np.ones(3, d), np.ones(3, d), None, None], dt,
                                     {"reduction": "none"}, symbolic=True)
        s = InferenceSession(m.SerializeToString())
        expect_error(lambda: s.run(None, {"input": np.ones(3, d), "target": np.ones(4, d)}))
    print("alive after", failures, "errors")
""")


def test_process_survives_errors(tmp_path):
    script = tmp_path / "crash_prone.py"
    script.write_text(CRASH_PRONE)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "alive after 8 errors" in done.stdout, done.stdout + done.stderr[-2000:]


def test_two_threads_share_a_session():
    rng = np.random.default_rng(7)
    x, t = rng.normal(size=(64, 256)).astype(f32), rng.uniform(size=(64, 256)).astype(f32)
    model, feeds = node_model("BinaryCrossEntropyWithLogits", [x, t, None, None], "float32",
                                     {"reduction": "none"})
    session = InferenceSession(model.SerializeToString())
    expected = session.run(None, feeds)[0]
    from lossops.conformance.oracle import ORACLES

    reference = ORACLES["BinaryCrossEntropyWithLogits"](x.astype(np.float64), t.astype(np.float64), reduction="none")
    np.testing.assert_allclose(expected, reference, rtol=2.0**-20)  # right, not only repeatable
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(100):
                got = session.run(None, {"input": x, "target": t})[0]
                np.testing.assert_array_equal(got, expected)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_prepare_with_own_session_options():
    """The documented one-call way for users with their own SessionOptions."""
    model, feeds = node_model("KlDivBackward", [np.ones((), f32), np.ones(3, f32), np.full(3, 0.5, f32)],
                                     "float32", {"reduction": "sum"})
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(prepare(model, so), so, providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, feeds)[0], np.full(3, -0.5, f32))
    again = onnxruntime.InferenceSession(prepare(model, so), so, providers=["CPUExecutionProvider"])  # idempotent
    np.testing.assert_array_equal(again.run(None, feeds)[0], np.full(3, -0.5, f32))
    assert any(n.domain == KERNEL_DOMAIN for n in onnx.load_from_string(prepare(model, so)).graph.node)
