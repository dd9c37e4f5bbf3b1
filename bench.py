"""`lossops bench`: the kernels against the decomposition on ONNX Runtime, PyTorch eager and the memory
roofline, measured side by side in one run."""

from __future__ import annotations

import json
import os
import platform
import time
import tracemalloc
from dataclasses import asdict, dataclass

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

from . import opset
from .ort_ext import InferenceSession
from .ort_ext.kernels import KERNELS, parallel
from .ort_ext.kernels.parallel import for_each_range, num_threads

OPS = ("BinaryCrossEntropyWithLogits", "BinaryCrossEntropyBackward", "KlDivBackward")
ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}


@dataclass
class Row:
    op: str
    dtype: str
    reduction: str
    elements: int
    kernels_s: float
    decomposition_s: float
    torch_s: float | None
    stream_s: float  # STREAM copy or add (the faster) of the same bytes, timed with the case
    bytes: int
    roofline_s: float = 0.0  # bytes / the run's memory bandwidth (`roofline`)

    @property
    def gbps(self) -> float:
        return self.bytes / self.kernels_s / 1e9

    @property
    def of_roofline(self) -> float:
        return self.roofline_s / self.kernels_s


def inputs_for(op: str, n: int, dtype: str, reduction: str, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs of one benchmark case: full-size tensors, grad_output a scalar for reduced losses."""
    r = np.random.default_rng(seed)
    d = np.dtype(dtype)
    full = lambda a: a.astype(d)  # noqa: E731
    grad = np.array(1.0, d) if reduction != "none" else full(r.normal(size=n))
    if op == "BinaryCrossEntropyWithLogits":
        return {"input": full(r.normal(scale=3, size=n)), "target": full(r.uniform(size=n))}
    if op == "BinaryCrossEntropyBackward":
        return {"grad_output": grad, "input": full(r.uniform(0.01, 0.99, size=n)), "target": full(r.uniform(size=n))}
    return {"grad_output": grad, "input": full(r.normal(size=n)), "target": full(r.uniform(size=n))}


def bytes_moved(op: str, feeds: dict[str, np.ndarray], reduction: str) -> int:
    """Bytes the operator must read and write at least. KlDivBackward reads only input's shape, not its data."""
    read = sum(a.nbytes for k, a in feeds.items() if not (op == "KlDivBackward" and k == "input"))
    out = feeds["input"].nbytes if not (op == "BinaryCrossEntropyWithLogits" and reduction != "none") else 0
    return read + out


def model_for(op: str, feeds: dict[str, np.ndarray], dtype: str, reduction: str):
    node = opset.make_node(op, list(feeds), ["output"], reduction=reduction)
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([node], "bench", [vi(k, ELEM[dtype], list(a.shape)) for k, a in feeds.items()],
                              [vi("output", ELEM[dtype], None)])
    return opset.make_model(graph)


def torch_eager(op: str, feeds: dict[str, np.ndarray], reduction: str):
    """The same computation in PyTorch eager (KL's backward has no aten op: autograd computes -t * g)."""
    import torch

    t = {k: torch.from_numpy(v) for k, v in feeds.items()}
    codes = {"none": 0, "mean": 1, "sum": 2}
    if op == "BinaryCrossEntropyWithLogits":
        return lambda: torch.nn.functional.binary_cross_entropy_with_logits(t["input"], t["target"],
                                                                            reduction=reduction)
    if op == "BinaryCrossEntropyBackward":
        g = t["grad_output"].expand(t["input"].shape)
        return lambda: torch.ops.aten.binary_cross_entropy_backward(g, t["input"], t["target"], None,
                                                                    codes[reduction])
    n = t["input"].numel()
    if reduction == "mean":
        return lambda: torch.neg(t["target"]).mul_(t["grad_output"]).div_(n)
    return lambda: torch.neg(t["target"]).mul_(t["grad_output"])


class Stream:
    """STREAM's copy (b = a) or add (c = a + b) over arrays that hold `nbytes` in all, on the kernels' threads,
    timed interleaved with the case that moves those bytes (measured once per run instead, this VM's copy
    bandwidth read anywhere from 21 to 41 GB/s)."""

    def __init__(self, kind: str, nbytes: int):
        arrays = 2 if kind == "copy" else 3
        self.kind = kind
        self.a, *self.rest = (np.ones(max(1, nbytes // (4 * arrays)), np.float32) for _ in range(arrays))

    def __call__(self) -> None:
        a, rest = self.a, self.rest
        if self.kind == "copy":
            for_each_range(a.size, lambda lo, hi: np.copyto(rest[0][lo:hi], a[lo:hi]))
        else:
            for_each_range(a.size, lambda lo, hi: np.add(a[lo:hi], rest[0][lo:hi], out=rest[1][lo:hi]))


# From 1e6 elements, each timed call starts on a quiet machine: ORT's and PyTorch's (OpenMP) worker threads spin
# after a call, for longer than 50 ms in ORT's case. Measured on 2 cores at 1e7: a copy right after the
# decomposition took 13.4 ms, 6.8 ms elsewhere in the round. Not below: there the wait costs more than it saves
# (a sleeping core's wake-up: at 1e3 BCE backward took 0.32 ms after a 10 ms sleep, 0.09 ms without; at 1e5
# 0.7 ms against 0.2 ms).
SETTLE_FROM = 10**6


def settle(limit_s: float = 1.0) -> None:
    """Sleep until this process's threads stop using CPU (less than 1 ms of CPU time in a 5 ms sleep)."""
    end = time.perf_counter() + limit_s
    while time.perf_counter() < end:
        cpu = time.process_time()
        time.sleep(0.005)
        if time.process_time() - cpu < 0.001:
            return


def timed(fns: dict[str, object], repeat: int, quiet: bool) -> dict[str, float]:
    """Median seconds of each callable, run interleaved (round robin) after one warm-up each; with `quiet`,
    each call waits for the machine to settle first."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            if quiet:
                settle()
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


def run_bench(sizes: list[int], dtypes: list[str], reductions: list[str], repeat: int, threads: int) -> list[Row]:
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        torch = None
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = threads
    rows = []
    for op in OPS:
        for dtype in dtypes:
            for reduction in reductions:
                for n in sizes:
                    feeds = inputs_for(op, n, dtype, reduction)
                    model = model_for(op, feeds, dtype, reduction).SerializeToString()
                    kernels = InferenceSession(model, so, mode="kernels")
                    plain = onnxruntime.InferenceSession(model, so, providers=["CPUExecutionProvider"])
                    moved = bytes_moved(op, feeds, reduction)
                    fns = {"kernels": lambda s=kernels, f=feeds: s.run(None, f),
                           "decomposition": lambda s=plain, f=feeds: s.run(None, f),
                           "copy": Stream("copy", moved), "add": Stream("add", moved)}
                    if torch is not None:
                        fns["torch"] = torch_eager(op, feeds, reduction)
                    t = timed(fns, repeat, quiet=n >= SETTLE_FROM)
                    rows.append(Row(op, dtype, reduction, n, t["kernels"], t["decomposition"], t.get("torch"),
                                    min(t["copy"], t["add"]), moved))
    return rows


def fixed_cost(rounds: int = 5, calls: int = 200) -> tuple[float, float]:
    """Seconds of one run at 1e3 float32 elements, an Identity model and BCE backward on the kernels: medians
    of `calls` interleaved runs, then the round with the median difference (this VM's speed drifts by 2x
    over minutes; the two move together)."""
    feeds = inputs_for("BinaryCrossEntropyBackward", 1000, "float32", "none")
    identity = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["input"], ["output"])], "identity",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1000])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1000])]),
        opset_imports=opset.opset_imports(), ir_version=opset.IR_VERSION)
    s_id = onnxruntime.InferenceSession(identity.SerializeToString(), providers=["CPUExecutionProvider"])
    s_k = InferenceSession(model_for("BinaryCrossEntropyBackward", feeds, "float32", "none").SerializeToString())
    results = [timed({"identity": lambda: s_id.run(None, {"input": feeds["input"]}),
                      "kernel": lambda: s_k.run(None, feeds)}, calls, quiet=False) for _ in range(rounds)]
    results.sort(key=lambda t: t["kernel"] - t["identity"])
    return results[len(results) // 2]["identity"], results[len(results) // 2]["kernel"]


def peak_memory(n: int) -> dict[str, float]:
    """Peak numpy memory a kernel allocates (tracemalloc), plus the block scratch its threads keep (allocated
    once per thread, so tracemalloc may not see it), as a multiple of the output's size."""
    out = {}
    for op in OPS:
        feeds = inputs_for(op, n, "float32", "none")
        kernel = KERNELS[op]
        args = list(feeds.values()) + ([None] * (len(opset.get(op).inputs) - len(feeds)))
        attrs = opset.get(op).resolve({"reduction": "none"})
        output = np.empty(n, np.float32)
        tracemalloc.start()
        kernel(*args, **attrs, alloc=lambda shape, o=output: o)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out[op] = (peak + parallel.SCRATCH_BYTES * num_threads()) / output.nbytes
    return out


def roofline(rows: list[Row]) -> float:
    """The run's memory bandwidth: the best of the STREAM passes timed at the largest size (STREAM reports its
    best too). Every row's roofline is its bytes over this one figure, so the rows compare."""
    largest = [r for r in rows if r.elements == max(r.elements for r in rows)]
    bandwidth = max(r.bytes / r.stream_s for r in largest)
    for r in rows:
        r.roofline_s = r.bytes / bandwidth
    return bandwidth


def environment(threads: int, bandwidth: float) -> dict:
    versions = {"numpy": np.__version__, "onnxruntime": onnxruntime.__version__}
    try:
        import torch

        versions["torch"] = torch.__version__
    except ImportError:
        pass
    return {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(), "cpus": os.cpu_count(),
            "processor": platform.processor(), "threads": threads, "stream_GBps": bandwidth / 1e9,
            "versions": versions}


def render(rows: list[Row], env: dict, fixed: tuple[float, float], memory: dict[str, float]) -> str:
    lines = [f"lossops bench {env['date']}: {env['machine']}, {env['cpus']} cpus, {env['threads']} threads, "
             f"memory bandwidth {env['stream_GBps']:.1f} GB/s (best STREAM pass); "
             + ", ".join(f"{k} {v}" for k, v in env["versions"].items()),
             "medians; speed-up = other's time / kernels' time; roofline = bytes the operator moves / memory "
             "bandwidth, the best of STREAM copy and add timed alongside the 1e7 (or largest) cases",
             f"{'operator':29s} {'dtype':8s} {'red':5s} {'elements':>9s} {'kernels':>10s} {'GB/s':>6s} "
             f"{'roofline':>8s} {'vs decomp':>9s} {'vs torch':>8s}"]
    for r in rows:
        torch_ratio = f"{r.torch_s / r.kernels_s:7.2f}x" if r.torch_s else "      -"
        lines.append(f"{r.op:29s} {r.dtype:8s} {r.reduction:5s} {r.elements:9.0e} {_ms(r.kernels_s):>10s} "
                     f"{r.gbps:6.1f} {r.of_roofline:8.0%} {r.decomposition_s / r.kernels_s:8.2f}x {torch_ratio}")
    lines.append(f"fixed cost at 1e3 float32: Identity model {fixed[0] * 1e6:.1f} us, BCE backward on the kernels "
                 f"{fixed[1] * 1e6:.1f} us (+{(fixed[1] - fixed[0]) * 1e6:.1f} us)")
    lines.append("peak extra memory during a 1e7 'none' call (numpy's, plus the kernels' per-thread block scratch), "
                 "in output sizes: "
                 + ", ".join(f"{k} {v:.2f}" for k, v in memory.items()))
    return "\n".join(lines)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"


def plot(rows: list[Row], path: str) -> None:
    from .extras import require

    require("matplotlib", "lossops bench --plot").use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(OPS), figsize=(5 * len(OPS), 4), sharey=True)
    for ax, op in zip(axes, OPS, strict=True):
        for dtype in sorted({r.dtype for r in rows}):
            sel = [r for r in rows if r.op == op and r.dtype == dtype and r.reduction == "none"]
            ax.loglog([r.elements for r in sel], [r.gbps for r in sel], "o-", label=f"kernels {dtype}")
            ax.loglog([r.elements for r in sel], [r.bytes / r.decomposition_s / 1e9 for r in sel], "x--",
                      label=f"decomposition {dtype}")
        ax.set_title(op)
        ax.set_xlabel("elements")
    axes[0].set_ylabel("GB/s (reduction none)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path)


def main(large: bool, repeat: int, as_json: bool, plot_path: str | None, quick: bool) -> int:
    threads = num_threads()
    sizes = [10**k for k in range(3, 9 if large else 8)]
    if quick:
        sizes = [1000, 100_000]
    fixed = fixed_cost()  # first, before PyTorch's thread pool and the 1e7 tensors exist
    rows = run_bench(sizes, ["float32", "float16"], ["none", "mean"], repeat, threads)
    env = environment(threads, roofline(rows))
    memory = peak_memory(10**7 if not quick else 10**5)
    if as_json:
        print(json.dumps({"environment": env, "rows": [asdict(r) for r in rows],
                          "fixed_cost_s": {"identity": fixed[0], "kernel": fixed[1]},
                          "peak_memory_in_outputs": memory}, indent=1))
    else:
        print(render(rows, env, fixed, memory))
    if plot_path:
        plot(rows, plot_path)
    return 0
