"""The command line, run as a user runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from lossops import opset


def lossops(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lossops", *args], capture_output=True, text=True, timeout=300,
                          env=None if env is None else {**os.environ, **env})


def test_every_verb_has_help():
    for verb in ("demo", "check", "bench", "conformance", "fuse", "lower", "train-demo"):
        done = lossops(verb, "--help")
        assert done.returncode == 0 and "usage: lossops" in done.stdout


def test_demo(tmp_path):
    path = tmp_path / "demo.onnx"
    dtypes = ["float64", "float32", "float16", "bfloat16"]
    done = lossops("demo", "-o", str(path), "--size", "2000", "--repeat", "2", *(f"--dtype={d}" for d in dtypes))
    assert done.returncode == 0, done.stderr
    assert f"saved {path}" in done.stdout
    rows = [line.split() for line in done.stdout.splitlines() if line.split()[:1] and line.split()[0] in opset.OPS]
    assert len(rows) == 3 * 4 and [r[1] for r in rows[::3]] == dtypes
    assert "lossops kernels" in done.stdout
    for row in rows:  # operator dtype err_k time ms err_d time ms
        dtype, err_kernels, err_decomposition = row[1], float(row[2]), float(row[5])
        limit = {"float64": 1e-14, "float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}[dtype]
        assert err_kernels <= limit and err_decomposition <= limit, row
    assert lossops("check", str(path)).returncode == 0


def test_demo_without_kernels_says_so_and_labels_the_column(tmp_path):
    done = lossops("demo", "-o", str(tmp_path / "demo.onnx"), "--size", "200", "--repeat", "1",
                   env={"LOSSOPS_KERNELS": "none"})
    assert done.returncode == 0, done.stderr
    assert "no lossops kernels here (turned off by LOSSOPS_KERNELS=none)" in done.stdout
    (header,) = [line for line in done.stdout.splitlines() if line.startswith("operator")]
    assert "kernels" not in header and "lossops, decomposition" in header
    rows = [line for line in done.stdout.splitlines() if line.split()[:1] and line.split()[0] in opset.OPS]
    assert len(rows) == 3 and all(" float32 " in r for r in rows)


def test_doctor_says_kernels_are_turned_off():
    done = lossops("doctor", env={"LOSSOPS_KERNELS": "none"})
    expected = "lossops kernels: turned off by LOSSOPS_KERNELS=none: lossops nodes run as their decomposition"
    assert expected in done.stdout


def test_check_reports_bad_nodes(tmp_path):
    nodes = [helper.make_node("KlDivBackward", ["g", "x", "t"], ["y"], domain=opset.DOMAIN, name="kl", log_target=5),
             helper.make_node("BinaryCrossEntropyWithLogits", ["x", "t2"], ["z"], domain=opset.DOMAIN, name="bce")]
    graph = helper.make_graph(nodes, "g", [
        helper.make_tensor_value_info("g", TensorProto.FLOAT, []),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3]),
        helper.make_tensor_value_info("t", TensorProto.FLOAT, [4, 3]),
        helper.make_tensor_value_info("t2", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [])])
    path = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(graph, opset_imports=opset.opset_imports(), ir_version=10), path)
    done = lossops("check", str(path))
    assert done.returncode == 1
    assert "#0 lossops::KlDivBackward node 'kl': attribute 'log_target' is 5" in done.stdout
    assert ("#1 lossops::BinaryCrossEntropyWithLogits node 'bce': BinaryCrossEntropyWithLogits: input 'target' has "
            "shape (3,)") in done.stdout
    assert "2 problem(s)" in done.stdout


def test_check_missing_file():
    done = lossops("check", "/nonexistent.onnx")
    assert done.returncode == 2 and "lossops check:" in done.stderr


def test_check_verdict_is_the_last_line_and_the_exit_status(tmp_path):
    """A valid model that the CANN provider would not claim as it is: the last line says not OK, naming why,
    and the exit status agrees (no "OK" followed by a failure)."""
    path = tmp_path / "demo.onnx"
    assert lossops("demo", "-o", str(path), "--size", "200", "--repeat", "1").returncode == 0
    plain = lossops("check", str(path))
    assert plain.returncode == 0 and plain.stdout.splitlines()[-1] == f"{path}: OK"
    assert "other ONNX consumers do not expand model-local functions: run `lossops lower`" in plain.stdout
    cann = lossops("check", str(path), "--provider", "cann")
    last = cann.stdout.splitlines()[-1]
    assert cann.returncode == 1 and last.startswith(f"{path}: not OK: CANN claims 0 of 3 nodes"), cann.stdout


def test_check_a_directory(tmp_path):
    done = lossops("check", str(tmp_path))
    assert done.returncode == 2 and "is a directory; expected an ONNX model file" in done.stderr


def test_ctrl_c_during_a_compile_is_one_line(tmp_path):
    """SIGINT while numba compiles the kernels (the JIT, an empty cache directory: nothing to load) ends the verb
    with one line and the shell's status for SIGINT; before it, one line said what was compiling."""
    import os
    import signal
    import time

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "LOSSOPS_KERNELS": "jit"}
    process = subprocess.Popen([sys.executable, "-m", "lossops", "demo", "-o", str(tmp_path / "m.onnx")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               preexec_fn=_sigint_default)
    time.sleep(8)  # imports done, compiling (a compile takes tens of seconds)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err[-2000:]
    lines = err.strip().splitlines()
    assert lines[-1] == "lossops demo: interrupted" and len(lines) == 2, err[-2000:]
    assert lines[0].startswith("lossops: compiling the kernels of ") and "with numba" in lines[0]


def _sigint_default() -> None:
    """In the child before it starts Python: Ctrl-C as a terminal gives it, whatever this test runner inherited (a
    runner started in the background by a script has SIGINT ignored, and its children inherit that)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_verb_started_with_sigint_ignored_keeps_ignoring_it(tmp_path):
    """A background job of a script is started with SIGINT ignored, so that Ctrl-C reaches only the foreground: the
    CLI must not install its handler over that."""
    import os
    import signal

    def ignore() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    process = subprocess.Popen([sys.executable, "-m", "lossops", "conformance", "-k", "float64", "--backend",
                                "reference", "--backend", "lowered", "--backend", "decomposition"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ignore,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert process.stdout.readline().startswith("case")  # the table's header: the verb is running (seconds)
    assert process.poll() is None, "the verb ended before the signal: this test needs a longer one"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0 and "interrupted" not in err, err[-2000:]
    assert out.splitlines()[-1].endswith(" passed, 0 failed"), out[-500:]


def test_conformance_says_each_backend_as_it_finishes_and_what_finished_on_ctrl_c():
    """The default set is lossops' own forms; each backend's summary line comes when it finishes, before the next
    backend's rows; Ctrl-C prints the summaries of the backends that finished and exits 130."""
    import signal

    from lossops.conformance.runner import DEFAULT_BACKENDS

    assert DEFAULT_BACKENDS == ["kernels", "native", "decomposition", "lowered", "cann-lowered", "reference", "cann"]
    process = subprocess.Popen([sys.executable, "-m", "lossops", "conformance", "--backend", "reference",
                                "--backend", "lowered", "--backend", "decomposition"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    seen = []
    for line in process.stdout:
        seen.append(line)
        if line.startswith("reference: "):  # the first backend's summary, while the second runs
            break
    assert process.poll() is None, "the verb ended before the signal: this test needs a longer one"
    assert not any(line.startswith("test_") and " lowered " in line for line in seen)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=600)
    assert process.returncode == 130 and err.strip().splitlines()[-1] == "lossops conformance: interrupted", err
    tail = out.split("interrupted; the backends that finished:\n", 1)[1].splitlines()
    assert tail[0].startswith("reference: ") and " passed, 0 failed" in tail[0]


@pytest.mark.parametrize(("content", "said"), [
    ('[{"op": 1}]', "is JSON but not a benchmark run"),
    (b"\x8a\x00\xff binary", "is not text (a binary file?)"),
    ("{not json", "is not JSON"),
    (None, "is a directory"),
])
def test_a_file_that_is_not_a_benchmark_run_is_one_line(tmp_path, content, said):
    """Each option that reads a stored run (--summary, --markdown, --update) says in one line what the file is not
    and what it expected, whatever the file holds."""
    path = tmp_path / "run.json"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    for option in ("--summary", "--markdown", "--update"):
        extra = ["--op", "KlDiv", "--quick"] if option == "--update" else []
        done = lossops("bench", *extra, option, str(path))
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith(f"lossops bench: {path} {said}"), done.stderr
        assert done.stderr.endswith("; expected a saved `lossops bench --json` run (JSON text)\n")
        assert len(done.stderr.splitlines()) == 1


def test_conformance_export_onto_a_file_is_one_line(tmp_path):
    (tmp_path / "suite").write_text("")
    done = lossops("conformance", "--export", str(tmp_path / "suite"))
    assert done.returncode == 2 and done.stderr == (f"lossops conformance: {tmp_path / 'suite'} is a file; expected a "
                                                    "directory to write the suite into (new, or one that exists)\n")


def test_bench_update_measures_one_operator_beside_the_stored_runs(tmp_path):
    """`--op OP --update RUN.json` measures OP alone: its rows and memory figure are replaced, the other
    operators' rows stay with the run that measured them, and the pages render every run's heading."""
    import json

    from lossops.bench import report, runs, summary

    stored = tmp_path / "bench.json"
    stored.write_text((Path(__file__).parents[1] / "docs" / "bench.json").read_text())
    before = runs(json.loads(stored.read_text()))
    done = lossops("bench", "--op", "KlDiv", "--quick", "--blocks", "1", "--update", str(stored))
    assert done.returncode == 0, done.stderr[-3000:]
    after = runs(json.loads(stored.read_text()))
    assert len(after) == len(before) + 1
    new = after[-1]
    assert {r["op"] for r in new["rows"]} == {"KlDiv"} and set(new["extra_memory_in_outputs"]) == {"KlDiv"}
    assert new["fixed_cost_s"]["op"] == "KlDiv"
    kept = [r for run in after[:-1] for r in run["rows"]]
    assert kept == [r for run in before for r in run["rows"] if r["op"] != "KlDiv"]
    assert all("KlDiv" not in run["extra_memory_in_outputs"] for run in after[:-1])
    page = report(json.loads(stored.read_text()))
    assert page.count("`lossops bench`, ") == len(after) and "KlDiv: `lossops bench`, " in page
    assert "| KlDiv | float32 | none | 1e+03 |" in page
    table = summary(json.loads(stored.read_text()))  # a --quick run has no 1e7 row: its cells say so
    assert f"| KlDiv | {len(after)} | " in table and "not measured" in table
    # and its bandwidth was timed on data in the caches: its heading alone says at which size
    assert page.count("GB/s at 1e+05 elements, kernels: ") == 1


def test_bench_threads_sweep_times_each_count_side_by_side():
    """`--threads 1,2`: one row per case, one cell per count, the first count's speed-up 1.00x."""
    done = lossops("bench", "--threads", "1,2", "--op", "L1Loss", "--quick", "--blocks", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| operator | dtype | reduction | elements | 1 thread | 2 threads |" in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.startswith("| L1Loss |")]
    assert len(rows) == 2 * 2 * 2  # float32 and float16, none and mean, 1e3 and 1e5
    cell = r" [0-9.]+ ms · [0-9.]+× · [0-9]+% "
    assert all(re.fullmatch(rf"\| L1Loss \| float(32|16) \| (none|mean) \| 1e\+0[35] \|{cell}\|{cell}\|", row)
               for row in rows), rows
    assert all(" · 1.00× · " in row.split("|")[5] for row in rows)


def test_bench_classes_times_every_runner_side_by_side():
    """`--classes --quick`: a forward row and a forward+backward row per loss and shape (CTC's (T, N, C)), each
    with the kernels' time, every other runner's ratio (torch.compile left out by --quick; ORT's
    SoftmaxCrossEntropyLoss has no backward, nor other targets than class indices) and the share of the
    roofline."""
    done = lossops("bench", "--classes", "--quick", "--blocks", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if "Loss | (" in line]
    cases = [("CrossEntropyLoss", shape) for shape in ((64, 10), (4096, 1000), (2048, 32000))]
    cases += [("SoftTargetCrossEntropyLoss", shape) for shape in ((4096, 1000), (2048, 32000))]
    cases += [("MultilabelMarginLoss", shape) for shape in ((64, 10), (4096, 1000))]
    cases += [("CtcLoss", (200, 16, 32))]
    assert [row.split(" | ")[:3] for row in rows] == [
        [f"| {op}", "(" + ", ".join(map(str, shape)) + ")", call] for op, shape in cases
        for call in ("forward", "forward+backward")]
    ratio = r"[0-9.]+×"
    for row in rows:
        standard = "| forward |" in row and "| CrossEntropyLoss |" in row
        assert re.fullmatch(rf"\| \w+ \| \(\d+(, \d+)+\) \| forward(\+backward)? \| [0-9.]+ ms \| "
                            rf"{ratio} \| "
                            rf"{ratio if standard else '-'} \| {ratio} \| - \| [0-9]+% \| \d+ B \|", row), row


@pytest.mark.parametrize(("args", "said"), [
    (["--threads", "1,2", "--json"], "a --threads sweep prints its table only"),
    (["--classes", "--threads", "1,2"], "--classes takes one --threads count"),
    (["--threads", "1,1"], "'1,1' names a count twice"),
    (["--threads", "0"], "0 is not a count"),
    (["--threads", "2,x"], "'x' is not a whole number"),
    (["--training", "--threads", "1,2"], "--training takes one --threads count"),
    (["--transformers"], "--transformers is a workload of --training"),
    (["--op", "CrossEntropyLoss"],
     "CrossEntropyLoss is a class or sequence loss, which `lossops bench --classes` measures"),
])
def test_bench_thread_counts_it_cannot_take_are_one_line(args, said):
    done = lossops("bench", *args)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert said in done.stderr.strip().splitlines()[-1], done.stderr  # after argparse's usage, where it prints one


def test_the_pages_show_torch_compile_where_a_run_measured_it():
    """A stored row with a torch.compile timing gets its ratio in both tables and in the count of faster rows; a
    row without one shows '-' and is not counted."""
    import copy
    import json

    from lossops.bench import report, runs, summary

    data = json.loads((Path(__file__).parents[1] / "docs" / "bench.json").read_text())
    run = copy.deepcopy(runs(data)[0])
    for r in run["rows"]:
        r["compiled"] = {"median": 4 * r["kernels"]["median"], "spread": 1.0}
    run["rows"][0]["compiled"] = None
    page, table = report({"runs": [run]}), summary({"runs": [run]})
    measured = len(run["rows"]) - 1
    assert f"Against torch.compile: faster in {measured} of {measured} rows." in page
    assert "| 4.00× |" in page and " · 4.00× |" in table
    op = run["rows"][0]
    assert f"| {op['op']} | {op['dtype']} | {op['reduction']} | {op['elements']:.0e} |" in page


@pytest.mark.slow  # inductor compiles C++ for each case: a minute
def test_torch_compile_is_a_runner_of_the_same_computation():
    """The bench's torch.compile runner computes what PyTorch eager does, and a full (not --quick) run times it
    beside the others."""
    import numpy as np

    from lossops.bench import run_bench, sample, torch_compiled, torch_eager

    for reduction in ("none", "mean"):
        feeds = sample("BinaryCrossEntropyWithLogits", 1000, "float32", reduction)
        compiled = torch_compiled("BinaryCrossEntropyWithLogits", feeds, reduction)
        eager = torch_eager("BinaryCrossEntropyWithLogits", feeds, reduction)
        np.testing.assert_allclose(compiled().numpy(), eager().numpy(), rtol=2e-6)
    (row,) = run_bench(["KlDiv"], [1000], ["float32"], ["mean"], threads=1, blocks=1)
    assert row.compiled is not None and row.compiled.median > 0


def test_doctor_with_jit_asked_for_and_no_numba_is_one_line(tmp_path):
    (tmp_path / "numba.py").write_text("raise ImportError('no numba here')\n")  # shadows the real one
    (tmp_path / "sitecustomize.py").write_text("import sys; sys.modules['numba'] = None\n")
    done = lossops("doctor", env={"LOSSOPS_KERNELS": "jit", "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "LOSSOPS_KERNELS=jit, but numba is not installed" in done.stderr
