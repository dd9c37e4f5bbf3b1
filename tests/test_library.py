"""The native custom-op library (ort_ext/machine_code/custom_ops.c with the tables that machine_code/library.py
generates from the records) as any ONNX Runtime host uses it: plain onnxruntime's `register_custom_ops_library`, with
no lossops, numba, torch or onnxruntime-extensions in the process, and a host written in C
(conformance/node_test_runner.c) on ONNX Runtime's C API, with no Python at all. It computes every case of the
conformance suite bit for bit as `lossops.ort_ext.InferenceSession` does, refuses bad attributes and inputs with the
Python path's messages, chooses its level by the CPU's flags, and refuses a damaged install in one line.

The library is built with the kernels (ort_ext/machine_code/aot.py): CI copies the wheel's into the checkout, and a
local run builds the host's level once (tests/machine_code_once.py). Without it the tests are skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

from lossops import opset
from lossops.conformance import c_runner, golden
from lossops.conformance.cases import node_model
from lossops.opset.spec import LABEL_LIST, NOT_ALLOWED
from lossops.ort_ext import InferenceSession
from lossops.ort_ext.kernels import targets
from lossops.ort_ext.machine_code import library, loader
from lossops.ort_ext.machine_code.library import _format
from lossops.ort_ext.session import run_with_bfloat16

_BUILT = (loader.LIBRARIES / library.FILE).is_file() and isinstance(
    loader.manifest(), dict) and loader.manifest().get("stamp") == loader.source_stamp()
pytestmark = pytest.mark.skipif(
    not _BUILT, reason="no native library for these sources in ort_ext/machine_code/prebuilt/ (CI copies the built "
    "wheel's there; python -m lossops.ort_ext.machine_code.aot ort_ext/machine_code/prebuilt builds it)")

# plain onnxruntime and onnx only: every case of the suite through the library, outputs saved as bytes
_PLAIN = """
    import ctypes, glob, os, sys
    import numpy as np, onnx, onnxruntime as ort
    from onnx import numpy_helper
    options = ort.SessionOptions()
    options.register_custom_ops_library(sys.argv[1])
    options.intra_op_num_threads = 2
    out = {}
    for directory in sorted(glob.glob(os.path.join(sys.argv[2], "test_*"))):
        model = onnx.load(os.path.join(directory, "model.onnx"))
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        feeds = {}
        for k, formal in enumerate(model.graph.input):
            tensor = onnx.load_tensor(os.path.join(directory, "test_data_set_0", f"input_{k}.pb"))
            a = numpy_helper.to_array(tensor)
            a = np.require(a, requirements="C")  # keeps rank 0
            if tensor.data_type == onnx.TensorProto.BFLOAT16:
                value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16), tensor.data_type)
            else:
                value = ort.OrtValue.ortvalue_from_numpy(a)
            feeds[formal.name] = value
        result = session.run_with_ort_values([session.get_outputs()[0].name], feeds)[0]
        count = int(np.prod(result.shape(), dtype=np.int64))
        itemsize = {"tensor(float)": 4, "tensor(double)": 8}.get(result.data_type(), 2)
        raw = (ctypes.c_uint8 * (count * itemsize)).from_address(result.data_ptr()) if count else b""
        out[os.path.basename(directory)] = np.frombuffer(bytes(raw), np.uint8)
    loaded = sorted(m for m in sys.modules
                    if m.split(".")[0] in ("lossops", "numba", "torch", "onnxruntime_extensions"))
    assert not loaded, loaded
    np.savez(sys.argv[3], **out)
"""


def _python(script: str, *args: str, **env_vars: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != loader.ENV} | env_vars
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True, text=True,
                          timeout=600, env=env, cwd="/")


def _options(path: str | None = None) -> onnxruntime.SessionOptions:
    options = onnxruntime.SessionOptions()
    options.register_custom_ops_library(path or library.library_path())
    return options


def _plain(model, path: str | None = None) -> onnxruntime.InferenceSession:
    return onnxruntime.InferenceSession(model.SerializeToString(), _options(path), providers=["CPUExecutionProvider"])


def test_plain_onnxruntime_and_a_c_host_compute_every_case_as_the_lossops_session_does(tmp_path):
    """Every case of the suite, bit for bit as lossops' session computes it, in plain onnxruntime (Python, no
    lossops imported) and in conformance/node_test_runner.c (C reading the suite's node-test files, ONNX Runtime's
    C API, no Python in the process)."""
    cases = golden.load_all()
    done = _python(_PLAIN, library.library_path(), str(_for_native_library(cases, tmp_path / "suite")),
                   str(tmp_path / "out.npz"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""
    plain = dict(np.load(tmp_path / "out.npz"))
    assert sorted(plain) == sorted(g.name for g in cases)
    # every operator: each has a kernel
    assert {n.op_type for g in cases for n in g.model.graph.node if n.domain == opset.DOMAIN} == set(
        loader.code().ops) | {name for name, op in opset.OPS.items() if op.classes}
    first, c_host = _c_host([g.name for g in cases])
    assert first.endswith(f", lossops kernels: {targets.cpu_levels()[-1]}"), first
    differ, c_differs = [], []
    for g in cases:
        feeds = {i.name: a for i, a in zip(g.model.graph.input, g.inputs, strict=True)}
        ours = run_with_bfloat16(InferenceSession(g.model.SerializeToString()), None, feeds)[0]
        if not np.array_equal(np.ascontiguousarray(ours).view(np.uint8).ravel(), plain[g.name]):
            differ.append(g.name)
        got = c_host[g.name]
        if isinstance(got, str) or got.shape != np.shape(ours) or got.tobytes() != ours.tobytes():
            c_differs.append(f"{g.name}: {got if isinstance(got, str) else 'other bits'}")
    assert not differ, f"{len(differ)} of {len(cases)} cases differ, e.g. {differ[:5]}"
    assert not c_differs, f"{len(c_differs)} of {len(cases)} cases differ in the C host, e.g. {c_differs[:5]}"


def test_the_c_host_says_what_it_cannot_read_and_goes_on(tmp_path):
    """A case whose input is not raw data (float_data here), or whose model ONNX Runtime refuses, is that case's
    error; the cases after it run."""
    import onnx
    from onnx import numpy_helper

    names = [g.name for g in golden.load_all()][:3]
    for name in names:
        shutil.copytree(golden.DATA_DIR / name, tmp_path / name)
    first_input = tmp_path / names[0] / "test_data_set_0" / "input_0.pb"
    stored = onnx.load_tensor(str(first_input))
    array = numpy_helper.to_array(stored).astype(np.float32)
    tensor = helper.make_tensor(stored.name, TensorProto.FLOAT, array.shape, array.ravel().tolist())
    first_input.write_bytes(tensor.SerializeToString())
    (tmp_path / names[1] / "model.onnx").write_bytes(b"not a model")
    _, outputs = _c_host(names, tmp_path)
    assert outputs[names[0]] == "input_0.pb is not a TensorProto with raw_data"
    assert "model" in outputs[names[1]].lower() or "protobuf" in outputs[names[1]].lower(), outputs[names[1]]
    assert not isinstance(outputs[names[2]], str)


def _inputs(op: str) -> list[np.ndarray | None]:
    """Valid inputs of `op` (its default reduction): 6 values each, a class loss's (2, 3) logits and targets
    (class indices, label lists or probabilities), or a sequence loss's (3, 2, 3) log-probabilities, targets and
    lengths."""
    record = opset.get(op)
    if record.sequences:  # three frames of two sequences over three classes
        given = {"grad_output": np.float32(1), "log_probs": np.log(np.full((3, 2, 3), 1 / 3, np.float32)),
                 "targets": np.array([[1, 2], [2, 0]]), "input_lengths": np.array([3, 2]),
                 "target_lengths": np.array([2, 1])}
        return [given[i.name] for i in record.inputs]
    if not record.classes:
        return [np.linspace(-1, 1, 6, dtype=np.float32)] * len(record.inputs)
    target = record.input("target")
    given = {"grad_output": np.float32(1), "input": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
             "target": np.array([[0, -1, 1], [2, 1, -1]]) if target.domain == LABEL_LIST else
             np.array([0, 2]) if target.indices else np.full((2, 3), 1 / 3, np.float32)}
    return [given.get(i.name) for i in record.inputs]


def _bad_values(a) -> list:
    """Values of an attribute the record refuses, as ONNX Runtime hands them over: one of its own kind (not
    allowed, or out of range, or not finite) and one of another kind."""
    if a.kind is str:
        return ["mean2", "it's", 1, 0.5]
    if a.kind is int:  # any int (ignore_index): only another kind is refused
        return ([max(a.allowed) + 7] if a.allowed else []) + ([a.low - 1] if a.low is not None else []) + ["1", 1.0]
    out_of_range = [a.low - 0.1 if a.low is not None else None, a.high + 0.1 if a.high is not None else None]
    return [v for v in out_of_range if v is not None] + [float("inf"), float("nan"), "0.5", 2]


_CASES = [(op, a.name, v) for op in loader.code().ops for a in opset.get(op).attributes
          for v in _bad_values(a)] if _BUILT else []


@pytest.mark.parametrize(("op", "name", "value"), _CASES, ids=[f"{o}-{n}-{v!r}" for o, n, v in _CASES])
def test_a_bad_attribute_is_refused_with_the_python_paths_message(op, name, value):
    """Session creation fails, in the library and in lossops' own session, with the record's message (the value
    as ONNX Runtime holds it: a FLOAT attribute is a float32)."""
    model, _ = node_model(op, _inputs(op), "float32", {})
    model.graph.node[0].attribute.append(helper.make_attribute(name, value))
    held = float(np.float32(value)) if isinstance(value, float) else value
    with pytest.raises(ValueError) as python_path:
        opset.get(op).resolve({name: held})
    with pytest.raises(Exception) as plain:
        _plain(model)
    with pytest.raises(Exception) as ours:
        InferenceSession(model.SerializeToString())
    assert str(python_path.value) in str(plain.value)
    assert str(python_path.value).split(": ", 1)[1] in str(ours.value)  # which names the node too


_FOREIGN = [(op, name) for op in loader.code().ops for name in sorted(
    {a.name for other in loader.code().ops for a in opset.get(other).attributes}
    - {a.name for a in opset.get(op).attributes})] if _BUILT else []


@pytest.mark.parametrize(("op", "name"), _FOREIGN, ids=[f"{o}-{n}" for o, n in _FOREIGN])
def test_another_operators_attribute_is_refused_with_the_python_paths_message(op, name):
    """ONNX Runtime's C API cannot list a node's attributes, so the library asks for the names it knows: those
    of the other operators (an attribute on the wrong operator), refused as the Python path refuses them."""
    model, _ = node_model(op, _inputs(op), "float32", {})
    model.graph.node[0].attribute.append(helper.make_attribute(name, 0.5))
    with pytest.raises(ValueError) as python_path:
        opset.get(op).resolve({name: 0.5})
    with pytest.raises(Exception) as plain:
        _plain(model)
    assert str(python_path.value) in str(plain.value)


@pytest.mark.parametrize("value", [0.1, 1e-45, 1e-5, 1.5e-7, 3e-4, 123456.0, 1e16, 1.5e16, 2.0 ** 60, 3.4e38, 0.3333])
def test_a_refused_float_reads_as_pythons_repr(value):
    """The library writes a float attribute as Python's repr() of the float32 ONNX holds (shortest digits, its
    notation), so its message is the Python path's for every magnitude."""
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    model, _ = node_model("SmoothL1Loss", [x, x], "float32", {})
    model.graph.node[0].attribute.append(helper.make_attribute("beta", -value))  # beta must be >= 0
    with pytest.raises(ValueError) as python_path:
        opset.get("SmoothL1Loss").resolve({"beta": float(np.float32(-value))})
    with pytest.raises(Exception) as plain:
        _plain(model)
    assert str(python_path.value) in str(plain.value)


def test_the_library_chooses_the_level_the_python_package_chooses():
    assert library.choice(library.library_path()) == targets.cpu_levels()[-1]
    assert loader.code().source == f"prebuilt {targets.cpu_levels()[-1]}"


def test_threads_registering_and_running_at_once_agree():
    """Sessions of a server's threads: each registers the library on its own options and runs at once."""
    import concurrent.futures

    x = np.linspace(-4, 4, 100_001, dtype=np.float32)
    model, feeds = node_model("SigmoidFocalLoss", [x, (x > 0).astype(np.float32)], "float32", {"reduction": "sum"})
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: _plain(model).run(None, feeds)[0], range(16)))
    expected = InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    assert all(r.tobytes() == expected.tobytes() for r in results)


def _for_native_library(cases: list, root: Path) -> Path:
    """The suite in `root` as a host of the native library loads it: the models of operators without a kernel
    carry their functions (ort_ext.session.for_native_library); the other cases are links to the stored ones."""
    from lossops.ort_ext.session import for_native_library

    root.mkdir()
    for g in cases:
        native = for_native_library(g.model)
        if native is g.model:
            (root / g.name).symlink_to(golden.DATA_DIR / g.name)
        else:
            shutil.copytree(golden.DATA_DIR / g.name, root / g.name)
            onnx.save(native, str(root / g.name / "model.onnx"))
    return root


def _c_host(cases: list[str], root: Path = golden.DATA_DIR) -> tuple[str, dict]:
    """conformance/node_test_runner.c, compiled here, on the onnxruntime wheel's own libonnxruntime.so."""
    return c_runner.run(targets.ARCH, loader.LIBRARIES, c_runner.onnxruntime_library(targets.ARCH),
                        cases, root=root)


def _node_test(root: Path, name: str, model, feeds: dict, output: np.ndarray) -> str:
    """`model` as a node-test case in `root` (what node_test_runner.c reads)."""
    golden.write(golden.Golden(name, model, list(feeds.values()), output, "float32", 0, 0.0, 0.0, 0.0), root)
    return name


@pytest.mark.parametrize(("reduction", "n"), [("none", 1000), ("sum", 300_001)])
def test_a_host_written_in_c_runs_the_kernels(tmp_path, reduction, n):
    """No Python in the process: ONNX Runtime's C API registers the library and runs the model on two threads
    (above the engine's task threshold for `sum`); every element as lossops' session computes it, bit for bit."""
    i = np.arange(n, dtype=np.float64)
    x, y = (3.0 * np.sin(0.37 * i)).astype(np.float32), (0.5 + 0.5 * np.cos(0.11 * i)).astype(np.float32)
    model, feeds = node_model("SigmoidFocalLoss", [x, y], "float32", {"reduction": reduction, "gamma": 1.5})
    expected = InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    case = _node_test(tmp_path, f"test_focal_{reduction}", model, feeds, expected)
    _, outputs = _c_host([case], tmp_path)
    assert not isinstance(outputs[case], str), outputs[case]
    assert outputs[case].shape == expected.shape and outputs[case].tobytes() == expected.tobytes()


def test_a_host_written_in_c_gets_the_attribute_message(tmp_path):
    x = np.zeros(4, np.float32)
    model, feeds = node_model("SigmoidFocalLoss", [x, x], "float32", {})
    model.graph.node[0].attribute.append(helper.make_attribute("alpha", 2.0))
    case = _node_test(tmp_path, "test_focal_alpha_2", model, feeds, x)
    _, outputs = _c_host([case], tmp_path)
    with pytest.raises(ValueError) as python_path:
        opset.get("SigmoidFocalLoss").resolve({"alpha": 2.0})
    assert str(python_path.value) in outputs[case]


def test_a_bad_input_is_refused_with_the_kernels_message():
    """Shapes that do not broadcast: the run raises what the Python path's kernels say, the process lives on."""
    x = np.ones((3, 4), np.float32)
    model, _ = node_model("MseLoss", [x, x], "float32", {"reduction": "none"})
    for value in (model.graph.input[1], model.graph.output[0]):
        value.type.tensor_type.ClearField("shape")  # unknown: only the run can tell
    feeds = {"input": x, "target": np.ones((5,), np.float32)}
    with pytest.raises(Exception) as plain:
        _plain(model).run(None, feeds)
    with pytest.raises(Exception) as ours:
        InferenceSession(model.SerializeToString()).run(None, feeds)
    message = str(ours.value).split("Status Message: ")[-1]
    assert "MseLoss" in message and "'target' (5,)" in message
    assert str(plain.value).endswith(message)


def _model_text() -> str:
    return textwrap.dedent("""
        import sys, numpy as np, onnxruntime as ort
        from onnx import helper, TensorProto
        node = helper.make_node("MseLoss", ["input", "target"], ["output"], domain="lossops", reduction="sum")
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4])
                                                for n in ("input", "target")],
                                  [helper.make_tensor_value_info("output", TensorProto.FLOAT, [])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                        helper.make_opsetid("lossops", 1)], ir_version=8)
        options = ort.SessionOptions()
        try:
            options.register_custom_ops_library(sys.argv[1])
            session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
            x = np.arange(4, dtype=np.float32)
            print(session.run(None, {"input": x, "target": x + 1})[0])
        except Exception as e:
            print("refused:", str(e).splitlines()[0])
    """)


def test_a_level_this_cpu_cannot_run_is_refused_in_one_line():
    beyond = [level for level in targets.levels_of() if level not in targets.cpu_levels()]
    if not beyond:
        pytest.skip("this CPU runs every level, so none can be refused here")
    done = _python(_model_text(), library.library_path(), LOSSOPS_KERNELS=beyond[0])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "4.0"  # chosen as without the override
    assert done.stderr == (f"lossops: LOSSOPS_KERNELS={beyond[0]} refused: this CPU cannot run {beyond[0]} code; "
                           "choosing as without it\n")


def test_kernels_turned_off_register_nothing():
    """LOSSOPS_KERNELS=none: as the Python package runs the decomposition, the library registers no kernel."""
    done = _python(_model_text(), library.library_path(), LOSSOPS_KERNELS="none")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("refused:") and "MseLoss" in done.stdout


_WITH_FUNCTIONS = """
    import sys, numpy as np, onnx, onnxruntime as ort
    options = ort.SessionOptions()
    options.register_custom_ops_library(sys.argv[1])
    session = ort.InferenceSession(onnx.load(sys.argv[2]).SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    x = np.arange(4, dtype=np.float32)
    print(session.run(None, {"input": x, "target": x + 1})[0])
"""


def _mse_with_functions(path: Path) -> str:
    """A MseLoss model that carries its functions (as lossops makes every model), saved at `path`."""
    node = opset.make_node("MseLoss", ["input", "target"], ["output"], reduction="sum")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4])
                                            for n in ("input", "target")],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [])])
    onnx.save(opset.make_model(graph), path)
    return str(path)


@pytest.mark.parametrize("damage", ["truncated", "another level's file", "stale", "one bit flipped"])
def test_a_damaged_install_runs_the_decomposition_said_once(tmp_path, damage):
    """Every kernel library this CPU runs damaged: each is refused before it is mapped (by its size, or by its
    SHA-256 where the size is the build's), each refusal said once, the levels tried best first, and then
    nothing is registered: the model's functions run, as the Python package falls back to the decomposition."""
    copy = tmp_path / "prebuilt"
    shutil.copytree(loader.LIBRARIES, copy)
    runs = [level for level in targets.cpu_levels() if (copy / loader.level_file(level)).is_file()]
    for level in runs:
        path = copy / loader.level_file(level)
        data = path.read_bytes()
        if damage == "truncated":
            path.write_bytes(data[:len(data) // 2])
        elif damage == "another level's file":  # the same size, another level's name inside
            path.write_bytes(data.replace(b"\0" + level.encode() + b"\0", b"\0" + b"x" * len(level) + b"\0"))
        elif damage == "stale":  # built from other sources: another stamp of the same length
            stamp = loader.source_stamp().encode()
            path.write_bytes(data.replace(stamp, stamp[::-1]))
        else:  # in its machine code, where nothing else would notice before it ran
            flipped = bytearray(data)
            flipped[len(data) // 2] ^= 1
            path.write_bytes(bytes(flipped))
    done = _python(_WITH_FUNCTIONS, str(copy / library.FILE), _mse_with_functions(tmp_path / "mse.onnx"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "4.0"  # the decomposition's answer
    refusals = [loader.DAMAGED.format(level=level, path=copy / loader.level_file(level)) for level in runs[::-1]]
    said = [loader.TRYING.format(why=why, level=below) for why, below in zip(refusals, runs[::-1][1:], strict=False)]
    said.append(loader.DECOMPOSITION.format(why=refusals[-1]))
    assert done.stderr == "".join(f"lossops: {line}\n" for line in said)


def test_a_damaged_best_level_gives_way_to_the_one_below(tmp_path):
    runs = [level for level in targets.cpu_levels()
            if (loader.LIBRARIES / loader.level_file(level)).is_file()]
    if len(runs) < 2:
        pytest.skip(f"this install has one level this CPU runs ({runs}): the wheel has all four")
    copy = tmp_path / "prebuilt"
    shutil.copytree(loader.LIBRARIES, copy)
    best = copy / loader.level_file(runs[-1])
    best.write_bytes(best.read_bytes()[:1000])
    done = _python(_model_text(), str(copy / library.FILE))
    assert done.returncode == 0 and done.stdout.strip() == "4.0"
    assert done.stderr == "lossops: " + loader.TRYING.format(
        why=loader.DAMAGED.format(level=runs[-1], path=best), level=runs[-2]) + "\n"


def test_a_directory_in_place_of_a_kernel_library_is_said_so(tmp_path):
    copy = tmp_path / "prebuilt"
    shutil.copytree(loader.LIBRARIES, copy)
    best = copy / loader.level_file(targets.cpu_levels()[-1])
    best.unlink()
    best.mkdir()
    done = _python(_WITH_FUNCTIONS, str(copy / library.FILE), _mse_with_functions(tmp_path / "mse.onnx"))
    assert done.returncode == 0 and done.stdout.strip() == "4.0", done.stderr
    assert loader.NOT_A_FILE.format(level=targets.cpu_levels()[-1], path=best) in done.stderr


def test_the_override_is_read_as_python_reads_it():
    """LOSSOPS_KERNELS with spaces around a level is that level, in both loaders; a name that is none is
    refused in the same words by both."""
    level = targets.cpu_levels()[-1]
    done = _python(_model_text(), library.library_path(), LOSSOPS_KERNELS=f" {level} ")
    assert done.returncode == 0 and done.stdout.strip() == "4.0" and done.stderr == "", done.stderr
    python = _python("from lossops.ort_ext.machine_code import loader; loader.code()", LOSSOPS_KERNELS=" v9\t")
    native = _python(_model_text(), library.library_path(), LOSSOPS_KERNELS=" v9\t")
    assert native.stdout.strip() == "4.0"
    assert python.stderr == native.stderr == "lossops: " + loader.OVERRIDE_UNKNOWN.format(
        env=loader.ENV, value="'v9'", levels=", ".join(targets.levels_of())) + "\n"


def test_a_damaged_native_library_is_refused_before_it_is_mapped(tmp_path, monkeypatch):
    """A half-written lossops_custom_ops.so (an interrupted install or copy): library_path() and everything that
    loads the library say so in one line, naming the file, before it is mapped (mapped, it ends the process with
    SIGBUS); `lossops doctor` says so and goes on."""
    copy = tmp_path / "prebuilt"
    shutil.copytree(loader.LIBRARIES, copy)
    (copy / library.FILE).write_bytes((copy / library.FILE).read_bytes()[:4096])
    monkeypatch.setattr(library, "LIBRARIES", copy)
    monkeypatch.setattr(loader, "LIBRARIES", copy)
    with pytest.raises(RuntimeError) as refused:
        library.library_path()
    assert str(refused.value) == (f"lossops: {copy / library.FILE} is damaged or replaced (it is not the file the "
                                  "build wrote: its size or SHA-256 differs); reinstall lossops")
    doctor = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        from lossops.ort_ext.machine_code import library, loader
        from pathlib import Path
        library.LIBRARIES = loader.LIBRARIES = Path({str(copy)!r})
        from lossops.cli import main
        main(["doctor"])
    """)], capture_output=True, text=True, timeout=300)
    assert doctor.returncode == 0 and "Traceback" not in doctor.stderr, doctor.stderr
    assert "is damaged or replaced" in doctor.stdout


def test_library_path_imports_neither_numba_nor_torch():
    done = _python("""
        import sys
        from lossops.ort_ext import library_path
        print(library_path())
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("numba", "torch", "llvmlite")))
    """)
    assert done.returncode == 0, done.stderr
    path, loaded = done.stdout.splitlines()
    assert Path(path) == loader.LIBRARIES / library.FILE and loaded == "[]"


def test_an_install_without_the_library_says_so_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(library, "LIBRARIES", tmp_path)
    with pytest.raises(RuntimeError, match=r"^lossops: this install has no native custom-op library") as e:
        library.library_path()
    assert "\n" not in str(e.value)


def test_the_tables_come_from_the_records():
    """Every operator with its inputs and attributes, and every OrtApi slot the library calls, is in the
    generated header (so a new operator adds no C)."""
    text = library.tables({}, targets.ARCH)
    for op in loader.code().ops:
        record = opset.get(op)
        assert (f'{{"{op}", {len(record.inputs)}, {op}_optional, {op}_indices, {len(record.attributes)}, '
                f'{op}_attributes, ') in text
        for a in record.attributes:  # the refusals, in opset/spec.py's words, this attribute's filled in
            assert _format(NOT_ALLOWED, op=op, name=a.name, expected=a.expectation()) in text
    assert "#define SLOT_CustomOpDomain_Add 27" in text
    assert f"{{{TensorProto.BFLOAT16}, 2}}" in text and f"{{{TensorProto.DOUBLE}, 8}}" in text
