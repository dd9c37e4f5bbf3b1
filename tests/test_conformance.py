"""The conformance suite: stored goldens are current, every backend passes, drift is caught, and onnx's
backend-test Runner can run the suite."""

from __future__ import annotations

import shutil
import subprocess
import sys
import unittest

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import numpy_helper

from lossops import opset
from lossops.conformance import golden, runner
from lossops.conformance.cases import DTYPES, ELEM
from lossops.conformance.consumers import CONSUMERS
from lossops.conformance.onnx_backend import ConformanceRunner, LossopsKernelsBackend, OnnxRuntimeBackend
from lossops.conformance.tolerance import compare
from lossops.ort_ext.session import run_with_bfloat16


def test_suite_size_and_coverage():
    """Every operator in every element type and reduction, and the forms that take other paths."""
    goldens = golden.load_all()
    assert len(goldens) >= 150
    names = " ".join(g.name for g in goldens)
    covered = set()
    for g in goldens:
        dtype = next(name for name, elem in ELEM.items() if elem == g.model.graph.input[0].type.tensor_type.elem_type)
        for node in g.model.graph.node:
            if node.domain == opset.DOMAIN:
                attrs = opset.get(node.op_type).resolve(opset.node_attributes(node))
                covered.add((node.op_type, attrs["reduction"], dtype))
    for op in opset.OPS.values():
        for red in op.attribute("reduction").allowed:
            for dtype in DTYPES:
                assert (op.name, red, dtype) in covered
    for fragment in ("batchmean_lt1", "rank0", "rank8", "empty", "extreme", "edges", "target_zero", "symbolic",
                     "pos_weight", "weight_scalar", "target_batch1", "test_graph_"):
        assert fragment in names, fragment


def test_goldens_match_the_generator():
    """CI's drift check: the stored goldens are what PyTorch gives now for the cases as written."""
    assert golden.drift() == []


def test_drift_is_detected(tmp_path):
    shutil.copytree(golden.DATA_DIR, tmp_path, dirs_exist_ok=True)
    victim = tmp_path / "test_bce_backward_plain_none_float32" / "test_data_set_0" / "output_0.pb"
    tensor = numpy_helper.to_array(onnx.load_tensor(str(victim)))
    victim.write_bytes(numpy_helper.from_array(tensor * np.float32(1.001), "output").SerializeToString())
    shutil.rmtree(tmp_path / "test_kl_div_backward_rank0_sum_lt1_float16")
    problems = golden.drift(tmp_path)
    assert "test_bce_backward_plain_none_float32: expected output differs by more than one ulp" in problems
    assert "test_kl_div_backward_rank0_sum_lt1_float16: generated but not stored" in problems
    # without the oracle (check --inputs): the models and inputs only
    assert golden.drift(tmp_path, outputs=False) == ["test_kl_div_backward_rank0_sum_lt1_float16: generated but not "
                                                     "stored"]
    assert runner.run(["kernels"], "test_bce_backward_plain_none_float32", tmp_path) == 1


def test_inputs_a_last_bit_apart_are_the_same_golden(tmp_path):
    """Another CPU's numpy can draw a log-probability a float64 ulp apart: the check takes the stored inputs (and
    holds the expected output computed from them), and generating again keeps them; an input far off is drift."""
    case = "test_kl_div_backward_plain_mean_lt0_float64"
    shutil.copytree(golden.DATA_DIR / case, tmp_path / case)
    path = tmp_path / case / "test_data_set_0" / "input_1.pb"
    stored = numpy_helper.to_array(onnx.load_tensor(str(path)))
    nudged = np.nextafter(stored, np.inf)
    path.write_bytes(numpy_helper.from_array(nudged, "input").SerializeToString())
    problems = [p for p in golden.drift(tmp_path) if p.startswith(case)]
    assert problems == [], problems
    kept = golden._kept_inputs(next(c for c in golden.all_cases() if c.name == case), golden.read(tmp_path / case))
    np.testing.assert_array_equal(kept.inputs[1], nudged)
    path.write_bytes(numpy_helper.from_array(stored * 1.001, "input").SerializeToString())
    assert f"{case}: inputs differ by more than 4 float64 ulps" in golden.drift(tmp_path)
    assert f"{case}: inputs differ by more than 4 float64 ulps" in golden.drift(tmp_path, outputs=False)


@pytest.mark.parametrize("backend", ["kernels", "decomposition", "lowered", "reference"])
def test_every_backend_passes_the_suite(backend, capsys):
    """Every case, but those a declared limit covers (onnx.reference's LogSoftmax underflows at extreme logits)."""
    from lossops.conformance.backends import known_limit

    assert runner.run([backend], failures_only=True) == 0
    limited = sum(known_limit(backend, g.name, g.dtype) is not None for g in golden.load_all())
    assert limited < 20
    assert f"conformance: {len(golden.load_all()) - limited} passed, 0 failed" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_other_consumers_pass_the_suite_but_their_declared_limits(consumer, capsys):
    """OpenVINO, tract, TVM, onnxruntime-node/-web, onnx2torch, onnx2pytorch, onnxoptimizer, onnxsim and onnx's
    version converter run the portable form: every case passes but those a declared limit of the consumer
    covers, which are reported as skipped with the reason. onnxruntime-node/-web are npm's, not pip's, and
    onnx2torch/onnx2pytorch need a torchvision built for the installed torch: where one is missing the test
    says so and skips (CI installs the npm packages). Each is held to every case form in one element type, the
    types taking turns, a quarter of the suite: what these consumers get wrong is an operator or a form, which
    every type meets here, and onnxruntime runs the whole suite in every type (above); `lossops conformance
    --backend NAME` runs it all on one of them."""
    missing = CONSUMERS[consumer].missing() if CONSUMERS[consumer].missing else None
    if missing:
        pytest.skip(missing)
    assert runner.run([consumer], failures_only=True, sample=True) == 0, capsys.readouterr().out[-3000:]
    out = capsys.readouterr().out
    cases = runner.one_type_each(golden.load_all())
    total = len(cases)
    skipped = sum(1 for g in cases if CONSUMERS[consumer].limit(g.name, g.dtype))
    assert f"conformance: {total - skipped} passed, 0 failed" in out
    assert skipped < total / 3  # the limits are limits, not the rule (float64 on OpenVINO is the largest)


@pytest.mark.slow
@pytest.mark.parametrize("form", ["cann", "functions"])
@pytest.mark.parametrize("consumer", ["onnxsim", "onnxoptimizer"])
def test_model_rewriting_tools_keep_every_form_running(consumer, form):
    """onnxsim and onnxoptimizer, then onnxruntime, on the other forms lossops writes: the CANN form and the
    lossops nodes with their functions (which the tools must carry through). Every case form passes, in one
    element type (as above)."""
    from lossops.conformance.consumers import runner as consumer_runner

    run = consumer_runner(consumer, form)
    failed = []
    for g in runner.one_type_each(golden.load_all()):
        try:
            ok, _, message = compare(run(g.model, g.inputs), g.expected, g.dtype, g.summed, g.slack, g.output_dtype)
        except Exception as e:  # reported with the case
            ok, message = False, f"{type(e).__name__}: {e}"
        if not ok:
            failed.append(f"{g.name}: {message}"[:200])
    assert not failed, failed[:10]


def test_cann_is_reported_unavailable_not_failed(capsys):
    assert runner.run(["cann"]) == 0
    assert "cann: unavailable (" in capsys.readouterr().out


@pytest.mark.parametrize("backend", [OnnxRuntimeBackend, LossopsKernelsBackend])
def test_onnx_backend_test_runner(backend):
    suite = ConformanceRunner(backend).include("graph|rank8|extreme|empty").test_suite
    result = unittest.TextTestRunner(verbosity=0).run(suite)
    assert result.wasSuccessful(), result.failures + result.errors
    assert result.testsRun - len(result.skipped) >= 30


@pytest.mark.slow
def test_cli_export_and_run(tmp_path):
    done = subprocess.run([sys.executable, "-m", "lossops", "conformance", "--export", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    case = tmp_path / "test_graph_sigmoid_to_bce_backward_float32"
    assert (case / "model.onnx").exists() and (case / "test_data_set_0" / "input_2.pb").exists()
    stored = len(golden.load_all())
    assert len(list(tmp_path.glob("test_*/model.onnx"))) == 2 * stored and f"wrote {stored} cases" in done.stdout
    # each form runs on a plain onnxruntime and meets the stored expectation: with its functions, and expanded
    # (no lossops domain, no function left)
    for name in ("test_kl_div_backward_rank3_batchmean_lt0_float32", "test_bce_with_logits_both_mean_bfloat16"):
        for form in (name, f"{name}_expanded"):
            g = golden.read(tmp_path / form)
            assert bool(g.model.functions) == (form == name)
            assert all(n.domain != opset.DOMAIN for n in g.model.graph.node) == (form != name)
            got = run_with_bfloat16(onnxruntime.InferenceSession(g.model.SerializeToString()), None,
                                    {v.name: a for v, a in zip(g.model.graph.input, g.inputs, strict=True)})[0]
            assert compare(got, g.expected, g.dtype, g.summed, g.slack, g.output_dtype)[0], form
    done = subprocess.run([sys.executable, "-m", "lossops", "conformance", "--backend", "kernels", "-k", "rank8"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "conformance: 12 passed, 0 failed" in done.stdout


def test_the_c_runner_says_what_it_lacks_in_one_line(tmp_path, capsys):
    """python -m lossops.conformance.c_runner without a native library (or, for aarch64, without qemu, the
    aarch64 C library or root): one line and exit status 2, no traceback."""
    from lossops.conformance import c_runner

    assert c_runner.main(["--kernels", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"lossops: no lossops_custom_ops.so in {tmp_path}\n"
