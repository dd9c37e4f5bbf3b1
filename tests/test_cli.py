"""The command line, run as a user runs it."""

from __future__ import annotations

import subprocess
import sys

import onnx
from onnx import TensorProto, helper

from lossops import opset


def lossops(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lossops", *args], capture_output=True, text=True, timeout=300)


def test_every_verb_has_help():
    for verb in ("demo", "check", "bench", "conformance", "fuse", "lower", "train-demo"):
        done = lossops(verb, "--help")
        assert done.returncode == 0 and "usage: lossops" in done.stdout


def test_demo(tmp_path):
    path = tmp_path / "demo.onnx"
    done = lossops("demo", "-o", str(path), "--size", "2000", "--repeat", "2")
    assert done.returncode == 0, done.stderr
    assert f"saved {path}" in done.stdout
    rows = [line.split() for line in done.stdout.splitlines() if line.split()[:1] and line.split()[0] in opset.OPS]
    assert len(rows) == 3 * 4
    for row in rows:  # operator dtype err_k time ms err_d time ms
        dtype, err_kernels, err_decomposition = row[1], float(row[2]), float(row[5])
        limit = {"float64": 1e-14, "float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}[dtype]
        assert err_kernels <= limit and err_decomposition <= limit, row
    assert lossops("check", str(path)).returncode == 0


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
    assert "#0 kl lossops::KlDivBackward: KlDivBackward node 'kl': attribute 'log_target' is 5" in done.stdout
    assert "#1 bce lossops::BinaryCrossEntropyWithLogits: BinaryCrossEntropyWithLogits: input 'target' has shape (3,)" \
        in done.stdout
    assert "2 problem(s)" in done.stdout


def test_check_missing_file():
    done = lossops("check", "/nonexistent.onnx")
    assert done.returncode == 2 and "lossops check:" in done.stderr
