"""`lossops bench --classes`: cross entropy at a classifier's and a language model's sizes, float32, `mean`, a
quarter of the rows ignored, against probabilities (SoftTargetCrossEntropyLoss), the multi-label hinge loss
(MultilabelMarginLoss, up to five labels a row) and CTC at a speech model's size (CtcLoss, (T, N, C) =
(200, 16, 32), targets of 50 labels): the forward alone and a
training step's forward and backward, each on the lossops kernels, on ONNX Runtime's standard ops
(SoftmaxCrossEntropyLoss for the forward of class indices; the lossops decomposition, which has no standard-op
backward to compare with, for both), in PyTorch eager and in torch.compile, with the memory roofline measured
alongside, side by side in one run (timing.py)."""

from __future__ import annotations

import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

from . import opset
from .bench import Stream, cpu_model, kernels_source
from .conformance.specs import label_lists, log_softmax, target_sequences
from .extras import available
from .ort_ext import InferenceSession
from .ort_ext.arrays import workspace_bytes
from .timing import steady

SHAPES = [(64, 10), (4096, 1000), (2048, 32000)]
LARGE_SHAPES = [(512, 128256)]  # a Llama 3 vocabulary


SOFT = "SoftTargetCrossEntropyLoss"  # probabilities as targets: a distillation's loss
LABELS = "MultilabelMarginLoss"  # label lists as targets: a multi-label tagger's loss
CTC, CTC_SHAPE, CTC_LABELS = "CtcLoss", (200, 16, 32), 50  # a speech model's frames, batch and characters
# the bytes a row's target moves, in units of its logits' (float32): probabilities 4, label lists int64 8
TARGET_BYTES = {SOFT: 1, LABELS: 2}


def _feeds(op: str, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    r = np.random.default_rng(0)
    if op == CTC:
        frames, batch, classes = shape
        targets = target_sequences(r, np.full(batch, CTC_LABELS), classes, 0, CTC_LABELS)
        return {"log_probs": log_softmax(r, shape).astype(np.float32), "targets": targets,
                "input_lengths": np.full(batch, frames), "target_lengths": np.full(batch, CTC_LABELS)}
    n, c = shape
    x = r.normal(size=(n, c)).astype(np.float32)
    if op == SOFT:
        t = np.exp(r.normal(size=(n, c)))
        return {"input": x, "target": (t / t.sum(1, keepdims=True)).astype(np.float32)}
    if op == LABELS:
        return {"input": x, "target": label_lists(r, (n, c), 5)}
    t = r.integers(0, c, n)
    t[::4] = -100
    return {"input": x, "target": t}


def _model(nodes: list, feeds: dict, outputs: list[str], grad: bool) -> bytes:
    vi = helper.make_tensor_value_info
    inputs = [vi(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()]
    if grad:
        inputs.insert(0, vi("grad_output", TensorProto.FLOAT, []))
    graph = helper.make_graph(nodes, "bench", inputs, [vi(o, TensorProto.FLOAT, None) for o in outputs])
    return opset.make_model(graph).SerializeToString()


def _runners(op: str, shape: tuple[int, ...], so, compile_torch: bool) -> tuple[dict, dict]:
    """(forward runners, forward-and-backward runners) of loss `op` on the same data."""
    feeds = _feeds(op, shape)
    step_feeds = {"grad_output": np.array(1.0, np.float32), **feeds}
    loss = opset.make_node(op, list(feeds), ["loss"], reduction="mean")
    step = [loss, opset.make_node(opset.get(op).gradient.backward, ["grad_output", *feeds], ["grad"],
                                  reduction="mean")]
    forward_model = _model([loss], feeds, ["loss"], False)
    step_model = _model(step, feeds, ["loss", "grad"], True)
    forward, backward = {}, {}
    for mode in ("kernels", "decomposition"):
        s = InferenceSession(forward_model, so, mode=mode)
        forward[mode] = lambda s=s: s.run(None, feeds)
        s = InferenceSession(step_model, so, mode=mode)
        backward[mode] = lambda s=s: s.run(None, step_feeds)
    if op == "CrossEntropyLoss":  # ONNX's SoftmaxCrossEntropyLoss takes class indices only
        standard = helper.make_node("SoftmaxCrossEntropyLoss", ["input", "target"], ["loss"], ignore_index=-100)
        s = onnxruntime.InferenceSession(_model([standard], feeds, ["loss"], False), so,
                                         providers=["CPUExecutionProvider"])
        forward["ort_standard"] = lambda s=s: s.run(None, feeds)
    if available("torch"):
        import torch
        import torch.nn.functional as F

        x, *rest = (torch.from_numpy(v) for v in feeds.values())
        xg = x.clone().requires_grad_(True)
        loss_fn = F.multilabel_margin_loss if op == LABELS else F.ctc_loss if op == CTC else F.cross_entropy

        def eager_forward():
            return loss_fn(x, *rest)

        def eager_step():
            loss = loss_fn(xg, *rest)
            (grad,) = torch.autograd.grad(loss, xg)
            return loss, grad

        forward["torch"], backward["torch"] = eager_forward, eager_step
        # inductor writes multilabel_margin_loss as PyTorch's decomposition, (N, C, C) tensors: 16 GB at (4096, 1000)
        if compile_torch and not (op == LABELS and shape[0] * shape[1] ** 2 * 4 > 1 << 30):
            torch._dynamo.reset()
            try:
                forward["compiled"] = torch.compile(eager_forward, dynamic=False)
                backward["compiled"] = torch.compile(eager_step, dynamic=False)
                forward["compiled"](), backward["compiled"]()
            except Exception as e:  # inductor's failures have many types: the run goes on without the column
                print(f"lossops bench: torch.compile failed here, its column left out ({type(e).__name__})",
                      file=sys.stderr)
                forward.pop("compiled", None), backward.pop("compiled", None)
    return forward, backward


def bench(blocks: int = 5, threads: int = 1, large: bool = False, compile_torch: bool = True) -> dict:
    """Every shape's forward and step rows, with the run's environment."""
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = threads
    if available("torch"):
        import torch

        torch.set_num_threads(threads)
    rows = []
    cases = [("CrossEntropyLoss", shape) for shape in SHAPES + (LARGE_SHAPES if large else [])]
    cases += [(SOFT, shape) for shape in SHAPES[1:]]
    cases += [(LABELS, shape) for shape in SHAPES[:2]] + [(CTC, CTC_SHAPE)]
    with ThreadPoolExecutor(threads) as pool:
        for op, shape in cases:
            forward, step = _runners(op, shape, so, compile_torch)
            feeds = _feeds(op, shape)
            elements = int(np.prod(shape))
            logits = elements * 4
            # the least either must move: the forward reads the logits once; a step reads them in the forward
            # and in the backward and writes the gradient
            copy = Stream("copy", logits, pool, threads)  # moves the logits' bytes: read half, write half
            calls = max(3, min(50, int(2e7 // elements)))
            quiet = threads > 1 or elements >= 10**6
            timed = steady({**forward, "copy": copy}, blocks=blocks, calls=calls, quiet=quiet)
            timed_step = steady(step, blocks=blocks, calls=calls, quiet=quiet)
            inputs = [*feeds.values(), None][:len(opset.get(op).inputs)]
            extra = max(workspace_bytes(op, inputs, reduction="mean"),
                        workspace_bytes(opset.get(op).gradient.backward, [np.float32(1), *inputs], reduction="mean"))
            # a target of the logits' shape is read alongside them
            per = 1 + TARGET_BYTES.get(op, 0)
            for what, t, moved in (("forward", timed, per * logits), ("forward+backward", timed_step,
                                                                      (2 * per + 1) * logits)):
                rows.append({"op": op, "shape": list(shape), "what": what, "extra_bytes": extra, "bytes": moved,
                             "roofline_s": moved / logits * timed["copy"].median,
                             **{k: {"median": v.median, "spread": v.spread} for k, v in t.items() if k != "copy"}})
            print(table_row(rows[-2]), file=sys.stderr, flush=True)
            print(table_row(rows[-1]), file=sys.stderr, flush=True)
    return {"environment": {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(), "cpu": cpu_model(),
                            "cpus": os.cpu_count(), "threads": threads, "kernels": kernels_source(),
                            "versions": _versions()}, "rows": rows}


def _versions() -> dict:
    found = {"onnxruntime": onnxruntime.__version__}
    if available("torch"):
        import torch

        found["torch"] = torch.__version__
    return found


COLUMNS = {"decomposition": "ORT, lossops decomposition", "ort_standard": "ORT SoftmaxCrossEntropyLoss",
           "torch": "PyTorch eager", "compiled": "torch.compile"}


def _ratio(row: dict, other: str) -> str:
    return f"{row[other]['median'] / row['kernels']['median']:.2f}×" if other in row else "-"


def table_row(row: dict) -> str:
    cells = [row.get("op", "CrossEntropyLoss"), "(" + ", ".join(map(str, row["shape"])) + ")", row["what"],
             f"{row['kernels']['median'] * 1e3:.3f} ms",
             *(_ratio(row, k) for k in COLUMNS), f"{row['roofline_s'] / row['kernels']['median']:.0%}",
             f"{row['extra_bytes']} B"]
    return "| " + " | ".join(cells) + " |"


def table(run: dict) -> str:
    """The run as a Markdown table (what `lossops bench --classes` prints and the README shows)."""
    env = run["environment"]
    cpu = f"{env['cpu']}, " if env.get("cpu") else ""
    kernels = f"kernels: {env['kernels']}, " if env.get("kernels") else ""
    head = (f"`lossops bench --classes`, {env['date']}, {env['machine']}, {cpu}{env['cpus']} CPUs ({env['threads']} "
            f"thread{'s' if env['threads'] > 1 else ''}), {kernels}"
            + ", ".join(f"{k} {v}" for k, v in env["versions"].items()))
    lines = [head, "", "float32, `mean`; CrossEntropyLoss with a quarter of the rows ignored, "
             "SoftTargetCrossEntropyLoss against probabilities, MultilabelMarginLoss with up to five labels a row, "
             f"CtcLoss over (T, N, C) with targets of {CTC_LABELS} labels. "
             "Each other runner's time over the kernels' (above 1: the kernels are faster); of roofline: the least "
             "the call must move (the logits, and a target of their shape, once for the forward; twice and the "
             "gradient written for a step) at numpy's copy bandwidth, over the kernels' time; extra: the kernels' "
             "heap beyond inputs and outputs. No torch.compile for MultilabelMarginLoss at (4096, 1000): inductor "
             "writes it as PyTorch's decomposition, (N, C, C) tensors of 16 GB there.", "",
             "| loss | shape | call | kernels | " + " | ".join(f"vs {v}" for v in COLUMNS.values())
             + " | of roofline | extra |", "|---|---|---|---|" + "---|" * (len(COLUMNS) + 2)]
    lines += [table_row(r) for r in run["rows"]]
    return "\n".join(lines) + "\n"
