"""`lossops demo`: a model with three of the operators (the Ascend aclnn ones), run on the kernels and on the
decomposition, in float32 unless more element types are asked for."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper

from . import opset
from .opset.spec import DTYPE_NAMES
from .ort_ext import InferenceSession
from .ort_ext.session import run_with_bfloat16
from .timing import median_seconds

DTYPES = DTYPE_NAMES
OUTPUTS = {"bce_with_logits_loss": "BinaryCrossEntropyWithLogits", "bce_grad": "BinaryCrossEntropyBackward",
           "kl_grad": "KlDivBackward"}


def demo_model(elem_type: int, outputs: tuple[str, ...] = tuple(OUTPUTS)) -> onnx.ModelProto:
    """A loss 'head': BCE-with-logits (mean, pos_weight), BCE backward (none), KL backward (batchmean);
    `outputs` keeps only some of the three nodes (to time one operator)."""
    T = elem_type
    nodes = [
        opset.make_node("BinaryCrossEntropyWithLogits", ["logits", "labels", "", "pos_weight"],
                        ["bce_with_logits_loss"], name="bce_with_logits", reduction="mean"),
        opset.make_node("BinaryCrossEntropyBackward", ["grad", "probs", "labels"], ["bce_grad"],
                        name="bce_backward", reduction="none"),
        opset.make_node("KlDivBackward", ["one", "log_probs", "target_probs"], ["kl_grad"], name="kl_backward",
                        reduction="batchmean", log_target=0),
    ]
    vi = helper.make_tensor_value_info
    shapes = {"logits": ["batch", "classes"], "labels": ["batch", "classes"], "pos_weight": ["classes"],
              "grad": ["batch", "classes"], "probs": ["batch", "classes"], "one": [],
              "log_probs": ["batch", "classes"], "target_probs": [1, "classes"],
              "bce_with_logits_loss": [], "bce_grad": ["batch", "classes"], "kl_grad": ["batch", "classes"]}
    nodes = [n for n in nodes if n.output[0] in outputs]
    inputs = dict.fromkeys(i for n in nodes for i in n.input if i)
    graph = helper.make_graph(nodes, "lossops_demo", [vi(i, T, shapes[i]) for i in inputs],
                              [vi(o, T, shapes[o]) for o in outputs])
    return opset.make_model(graph)


def demo_inputs(size: int, seed: int = 0) -> dict[str, np.ndarray]:
    classes = 100
    batch = max(size // classes, 1)
    r = np.random.default_rng(seed)
    logits = r.normal(size=(batch, classes))
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return {
        "logits": logits * 4, "labels": (r.uniform(size=(batch, classes)) < 0.3).astype(np.float64),
        "pos_weight": r.uniform(0.5, 3, size=classes), "grad": r.normal(size=(batch, classes)),
        "probs": r.uniform(0.01, 0.99, size=(batch, classes)), "one": np.array(1.0),
        "log_probs": log_probs, "target_probs": r.dirichlet(np.ones(classes), size=1),
    }


def _np_dtype(name: str) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(DTYPES[name]))


def run_demo(output: Path, repeat: int = 7, size: int = 100_000, dtypes: tuple[str, ...] = ("float32",)) -> int:
    from .ort_ext.host import why_no_kernels

    model = demo_model(TensorProto.FLOAT)
    onnx.save(model, output)
    n = sum(node.domain == opset.DOMAIN for node in model.graph.node)
    print(f"saved {output}: {n} lossops nodes and their {len(model.functions)} standard-op functions, "
          "opsets " + ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import))
    feeds64 = demo_inputs(size)
    # The float64 reference is the decomposition run in float64 on plain onnxruntime, from the inputs rounded
    # to the dtype under test: a formulation independent of the kernels (the tests hold both against PyTorch).
    plain64 = onnxruntime.InferenceSession(demo_model(TensorProto.DOUBLE).SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    print(f"{size} elements per tensor; max relative error against float64 (absolute below the dtype's smallest "
          f"normal); time: median of {repeat} runs of a one-operator model")
    why = why_no_kernels()
    if why:
        print(f"no lossops kernels here ({why}): the first column is lossops' InferenceSession running the "
              "decomposition")
    first = "lossops kernels" if not why else "lossops, decomposition"
    print(f"{'operator':30s} {'dtype':9s} {first:>24s} {'decomposition (plain ORT)':>27s}", flush=True)
    for name in dtypes:
        elem = DTYPES[name]
        feeds = {k: v.astype(_np_dtype(name)) for k, v in feeds64.items()}
        reference = dict(zip(OUTPUTS, plain64.run(list(OUTPUTS), {k: v.astype(np.float64) for k, v in feeds.items()}),
                             strict=True))
        for out, op in OUTPUTS.items():
            m = demo_model(elem, (out,)).SerializeToString()
            cells = []
            for session in (InferenceSession(m, mode="kernels"),
                            onnxruntime.InferenceSession(m, providers=["CPUExecutionProvider"])):
                op_feeds = {i.name: feeds[i.name] for i in session.get_inputs()}
                got = run_with_bfloat16(session, None, op_feeds)[0].astype(np.float64)
                seconds = median_seconds(lambda s=session, f=op_feeds: run_with_bfloat16(s, None, f), repeat)
                ref = reference[out]
                # relative error; below the dtype's smallest normal number, absolute (subnormals)
                tiny = float(ml_dtypes.finfo(_np_dtype(name)).smallest_normal)
                err = np.max(np.abs(got - ref) / np.maximum(np.abs(ref), tiny)) if ref.size else 0.0
                cells.append(f"{err:9.2g} {seconds * 1e3:8.3f} ms")
            print(f"{op:30s} {name:9s} {cells[0]:>24s} {cells[1]:>27s}", flush=True)
    return 0
