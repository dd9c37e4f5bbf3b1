"""One corpus of malformed lossops nodes through both hosts: lossops' own session (the Python host) and a plain
onnxruntime with the native library registered (what C, C++, Java, C# and Triton hosts load), each in a process of
its own. Every model gets the same verdict on both (refused or run), and a refusal reads the same sentence: an
attribute given as a list or a tensor, a string with a NUL or bytes that are not UTF-8, a value of another kind or
out of range, another operator's attribute. Two limits of ONNX Runtime's C API are declared, not hidden: a kernel
cannot list a node's attributes (so a name no lossops operator has goes unseen by the native library) nor learn
the model's version of the domain."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import AttributeProto, TensorProto, helper

from lossops import opset
from lossops.opset.spec import LABEL_LIST
from lossops.ort_ext.host import why_no_native_kernels
from lossops.ort_ext.kernels.registry import KERNELS

pytestmark = pytest.mark.skipif(bool(why_no_native_kernels()),
                                reason=f"no native library here ({why_no_native_kernels()})")

# what the native library cannot see, with the reason (the Python host refuses these)
NATIVE_LIMITS = {
    "typo": "ONNX Runtime's C API cannot list a node's attributes; the library asks for the names lossops operators "
            "have",
    "domain version 2": "ONNX Runtime registers a custom domain for versions 1-1000 with one schema per operator name, "
                        "and a kernel cannot learn the model's version of the domain",
}


def _bad_values(a) -> dict[str, object]:
    """Malformed values of one attribute, by case name (`helper.make_attribute` picks the ONNX type)."""
    found = {"a list of strings": ["sum"], "a list of floats": [1.0, 2.0], "a list of ints": [1],
             "a tensor": helper.make_tensor("t", TensorProto.FLOAT, [1], [1.0])}
    if a.kind is str:
        found |= {"a NUL inside": b"sum\0garbage", "not UTF-8": b"\x8asum\xff", "not allowed": "mean2",
                  "an int": 1, "a float": 0.5}
    elif a.kind is int:  # any int is allowed where the record lists none (ignore_index)
        found |= {"a str": "1", "a float": 1.0} | ({"not allowed": 7} if a.allowed else {})
    else:
        found |= {"inf": float("inf"), "nan": float("nan"), "a str": "0.5", "an int": 2}
        found |= {"below its range": a.low - 0.5} if a.low is not None else {}
        found |= {"above its range": a.high + 0.5} if a.high is not None else {}
    return found


# the operators the native library registers: those with a kernel
NATIVE = [op for op in opset.OPS.values() if op.name in KERNELS]


def corpus() -> dict[str, tuple[str, list]]:
    """Case name -> (operator, the node's extra attributes as (name, value)); one float32 node each."""
    cases: dict[str, tuple[str, list]] = {}
    for op in NATIVE:
        for a in op.attributes:
            for what, value in _bad_values(a).items():
                cases[f"{op.name} {a.name} {what}"] = (op.name, [(a.name, value)])
        foreign = sorted({a.name for o in opset.OPS.values() for a in o.attributes} - {a.name for a in op.attributes})
        if foreign:
            cases[f"{op.name} another operator's attribute"] = (op.name, [(foreign[0], 0.5)])
        cases[f"{op.name} valid"] = (op.name, [])
    cases["typo"] = ("KlDiv", [("reduce", "sum")])
    cases["domain version 2"] = ("KlDiv", [])
    return cases


_RUN = """
    import json, sys
    import numpy as np, onnxruntime
    from onnx import helper, TensorProto
    import pickle
    cases, path = pickle.loads(sys.stdin.buffer.read()), sys.argv[1]
    if path == "native":
        from lossops.ort_ext import library_path
        options = onnxruntime.SessionOptions()
        options.register_custom_ops_library(library_path())
    else:
        from lossops.ort_ext import InferenceSession
    out = {}
    for name, (op, feeds, model) in cases.items():
        try:
            if path == "native":
                session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
            else:
                session = InferenceSession(model)
            value = session.run(None, feeds)[0]
            out[name] = ["ran", np.asarray(value, np.float64).tolist()]
        except Exception as e:  # the sentence from "attribute" on: each host names the node in its own way
            text = str(e)
            starts = [k for k in (text.find("unknown attribute '"), text.find("attribute '")) if k >= 0]
            out[name] = ["refused", text[min(starts) if starts else 0:].strip().splitlines()[0]]
    print(json.dumps(out))
"""


def _models() -> dict[str, tuple[str, dict, bytes]]:
    """Case name -> (operator, feeds, model): float32 inputs of 6 values, a class loss's (2, 3) logits and int64
    targets (or probabilities), or a sequence loss's (3, 2, 3) log-probabilities, int64 targets and lengths."""
    found = {}
    for name, (op_name, attrs) in corpus().items():
        op = opset.get(op_name)
        required = [i for i in op.inputs if not i.optional]
        inputs = [f"in{k}" for k in range(len(required))]
        values = {"grad_output": np.array(1, np.float32),  # an array: onnxruntime refuses a numpy scalar
                  "input": np.linspace(0.1, 0.9, 6, dtype=np.float32).reshape(2, 3),
                  "target": np.array([[0, -1, 1], [2, 1, -1]]) if op.input("target").domain == LABEL_LIST else
                  np.array([0, 2]) if op.input("target").indices else
                  np.full((2, 3), 1 / 3, np.float32)} if op.classes else {
                  "grad_output": np.array(1, np.float32), "log_probs": np.log(np.full((3, 2, 3), 1 / 3, np.float32)),
                  "targets": np.array([[1, 2], [2, 0]]), "input_lengths": np.array([3, 2]),
                  "target_lengths": np.array([2, 1])} if op.sequences else {}
        feeds = {n: values.get(i.name, np.linspace(0.1, 0.9, 6, dtype=np.float32))
                 for n, i in zip(inputs, required, strict=True)}
        node = helper.make_node(op_name, inputs, ["out"], domain=opset.DOMAIN)
        node.attribute.extend(helper.make_attribute(k, v) for k, v in attrs)
        declared = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                    for n, a in feeds.items()]
        graph = helper.make_graph([node], "g", declared,
                                  [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
        version = 2 if name == "domain version 2" else opset.VERSION
        model = helper.make_model(graph, ir_version=opset.IR_VERSION, opset_imports=[
            helper.make_opsetid("", 21), helper.make_opsetid(opset.DOMAIN, version)])
        found[name] = (op_name, feeds, model.SerializeToString())
    return found


def _verdicts(path: str, models: dict) -> dict[str, list]:
    import pickle

    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_RUN), path], input=pickle.dumps(models),
                          capture_output=True, timeout=600)
    done = subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())
    assert done.returncode == 0, f"the {path} host's process did not survive the corpus: {done.stderr[-3000:]}"
    return json.loads(done.stdout.splitlines()[-1])


def test_both_hosts_give_every_malformed_node_the_same_verdict_in_the_same_words():
    models = _models()
    python, native = _verdicts("python", models), _verdicts("native", models)
    table = {"refused by both, the same words": 0, "run by both": 0, "native limit": 0}
    for name in models:
        if name in NATIVE_LIMITS:
            assert python[name][0] == "refused" and native[name][0] == "ran", (name, python[name], native[name])
            table["native limit"] += 1
            continue
        assert python[name][0] == native[name][0], f"{name}: python {python[name]}, native {native[name]}"
        if python[name][0] == "refused":
            assert python[name][1] == native[name][1], f"{name}:\n python {python[name][1]}\n native {native[name][1]}"
            table["refused by both, the same words"] += 1
        else:
            assert python[name][1] == native[name][1], name  # the same kernels: the same numbers
            table["run by both"] += 1
    print(f"\nmalformed corpus, {len(models)} models: {table}")
    assert table["run by both"] == len(NATIVE)  # the valid ones only


def test_every_kind_of_attribute_value_is_told_apart():
    """The corpus covers each ONNX attribute type a node can carry in place of a single value."""
    kinds = {AttributeProto.AttributeType.Name(helper.make_attribute("a", v).type)
             for op in opset.OPS.values() for a in op.attributes for v in _bad_values(a).values()}
    assert {"STRINGS", "FLOATS", "INTS", "TENSOR", "STRING", "INT", "FLOAT"} <= kinds
