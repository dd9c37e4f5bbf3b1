"""`lossops bench`: every operator on the kernels against its decomposition on ONNX Runtime, PyTorch eager,
torch.compile and the memory roofline, measured side by side in one run (timing.py: each runner in steady state,
blocks of runners alternated, medians and the spread of the blocks); and the kernels at several thread counts
side by side (`sweep`)."""

from __future__ import annotations

import copy
import json
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

from . import opset
from .conformance.specs import draw
from .extras import available, require
from .opset.spec import DTYPE_NAMES
from .ort_ext import InferenceSession, host
from .ort_ext.arrays import workspace_bytes
from .ort_ext.kernels import layout, targets
from .ort_ext.machine_code import loader
from .timing import Timing, steady

ELEM = {name: DTYPE_NAMES[name] for name in ("float32", "float16")}  # the types the targets are set for
SPREAD_MARK = 2.0  # a row whose kernels or comparison block medians differ by more than this is marked
# Each block starts on a quiet process (timing.settle) from this size on, and at every size where the runners have
# worker threads: a pool still spinning from the block before takes the cores from the next runner's pool
# (docs/design.md, benchmark method).
QUIET_FROM = 10**6


def sample(op: str, n: int, dtype: str, reduction: str, seed: int = 0) -> dict[str, np.ndarray]:
    """The required inputs of `op` as full tensors of n elements, each drawn from its input's domain; the
    loss gradient is a scalar when the reduction reduces."""
    r = np.random.default_rng(seed)
    d = np.dtype(dtype)
    feeds = {}
    for i in opset.get(op).inputs:
        if i.optional:
            continue
        if i.name == "grad_output" and reduction != "none":
            feeds[i.name] = np.array(1.0, d)
        else:
            feeds[i.name] = draw(r, i.domain, n).astype(d)
    return feeds


def bytes_moved(op: str, feeds: dict[str, np.ndarray], reduction: str) -> int:
    """Bytes the operator must read and write at least: the inputs whose data it reads, and its output."""
    reads = loader.reads(op)
    names = [i.name for i in opset.get(op).inputs]
    read = sum(a.nbytes for k, a in feeds.items() if reads[names.index(k)])
    principal = feeds["input"]
    reduced = opset.get(op).reduces and reduction != "none"
    return read + (0 if reduced else principal.nbytes)


def model_for(op: str, feeds: dict[str, np.ndarray], dtype: str, reduction: str):
    node = opset.make_node(op, list(feeds), ["output"], reduction=reduction)
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([node], "bench", [vi(k, ELEM[dtype], list(a.shape)) for k, a in feeds.items()],
                              [vi("output", ELEM[dtype], None)])
    return opset.make_model(graph)


def torch_eager(op: str, feeds: dict[str, np.ndarray], reduction: str):
    """The same computation in PyTorch eager (the operator's `eager` in its conformance module: the functional
    loss, aten's backward where one exists, else the formula autograd evaluates). ValueError for an operator
    without one."""
    import torch

    from .conformance import ops

    eager = getattr(ops.module(op), "eager", None)
    if eager is None:
        raise ValueError(f"bench: {op} has no PyTorch eager baseline (conformance/ops/<operator>.py: eager)")
    return eager({k: torch.from_numpy(v) for k, v in feeds.items()}, reduction)


def torch_compiled(op: str, feeds: dict[str, np.ndarray], reduction: str):
    """`torch_eager`'s computation through torch.compile (inductor, shapes fixed), compiled and run once here;
    None, said once on stderr, where this machine cannot compile it (no C compiler, for one): the cases after a
    failure are not tried again."""
    import torch

    if _COMPILE_FAILED:
        return None

    torch._dynamo.reset()  # each case compiles its own graph; the cases' closures would outgrow dynamo's cache
    compiled = torch.compile(torch_eager(op, feeds, reduction), dynamic=False)
    try:
        compiled()
    except Exception as e:  # inductor's failures have many types; the bench goes on without the column
        if not _COMPILE_FAILED:
            print(f"lossops bench: torch.compile failed here, its column left out ({type(e).__name__}: "
                  f"{str(e).splitlines()[0] if str(e) else ''})", file=sys.stderr)
        _COMPILE_FAILED.append(op)
        return None
    return compiled


_COMPILE_FAILED: list[str] = []


class Stream:
    """STREAM's copy (b = a) or add (c = a + b) over arrays holding `nbytes` in all, split over `threads`
    threads (numpy releases the GIL), timed with the cases that move those bytes."""

    def __init__(self, kind: str, nbytes: int, pool: ThreadPoolExecutor, threads: int):
        arrays = 2 if kind == "copy" else 3
        self.kind, self.pool, self.threads = kind, pool, threads
        self.a, *self.rest = (np.ones(max(1, nbytes // (4 * arrays)), np.float32) for _ in range(arrays))

    def on(self, pool: ThreadPoolExecutor, threads: int) -> Stream:
        """The same pass over the same arrays, split over `threads` threads of `pool`."""
        other = copy.copy(self)
        other.pool, other.threads = pool, threads
        return other

    def _part(self, k: int) -> None:
        lo, hi = self.a.size * k // self.threads, self.a.size * (k + 1) // self.threads
        if self.kind == "copy":
            np.copyto(self.rest[0][lo:hi], self.a[lo:hi])
        else:
            np.add(self.a[lo:hi], self.rest[0][lo:hi], out=self.rest[1][lo:hi])

    def __call__(self) -> None:
        list(self.pool.map(self._part, range(self.threads)))


@dataclass
class Row:
    op: str
    dtype: str
    reduction: str
    elements: int
    kernels: Timing
    decomposition: Timing
    torch: Timing | None
    compiled: Timing | None  # torch.compile
    stream_s: float  # best STREAM pass over the same bytes, timed with the case
    bytes: int
    roofline_s: float = 0.0  # bytes over the run's memory bandwidth (`roofline`)

    @property
    def gbps(self) -> float:
        return self.bytes / self.kernels.median / 1e9

    @property
    def of_roofline(self) -> float:
        return self.roofline_s / self.kernels.median

    @property
    def noisy(self) -> bool:
        return max(t.spread for t in (self.kernels, self.decomposition, self.torch, self.compiled) if t) > SPREAD_MARK


def run_bench(ops: list[str], sizes: list[int], dtypes: list[str], reductions: list[str], threads: int,
              blocks: int, compile_torch: bool = True) -> list[Row]:
    torch = None
    if available("torch"):
        import torch

        torch.set_num_threads(threads)
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = threads
    rows = []
    with ThreadPoolExecutor(threads) as pool:
        for op in ops:
            for dtype in dtypes:
                for reduction in reductions:
                    for n in sizes:
                        feeds = sample(op, n, dtype, reduction)
                        model = model_for(op, feeds, dtype, reduction).SerializeToString()
                        kernels = InferenceSession(model, so, mode="kernels")
                        # the same session class, so both pay the same per-run() cost and only the graph differs
                        decomposed = InferenceSession(model, so, mode="decomposition")
                        moved = bytes_moved(op, feeds, reduction)
                        runners = {"kernels": lambda s=kernels, f=feeds: s.run(None, f),
                                   "decomposition": lambda s=decomposed, f=feeds: s.run(None, f),
                                   "copy": Stream("copy", moved, pool, threads),
                                   "add": Stream("add", moved, pool, threads)}
                        if torch is not None:
                            runners["torch"] = torch_eager(op, feeds, reduction)
                            if compile_torch and (compiled := torch_compiled(op, feeds, reduction)):
                                runners["compiled"] = compiled
                        calls = max(3, min(25, int(2e6 // max(n, 1))))
                        t = steady(runners, blocks=blocks, calls=calls, quiet=threads > 1 or n >= QUIET_FROM)
                        rows.append(Row(op, dtype, reduction, n, t["kernels"], t["decomposition"], t.get("torch"),
                                        t.get("compiled"), min(t["copy"].median, t["add"].median), moved))
    return rows


def sweep(ops: list[str], sizes: list[int], counts: list[int], blocks: int) -> str:
    """The kernels at each thread count of `counts` side by side in one run (one session per count, their blocks
    alternated with STREAM copy split over as many threads), float32 and float16, none and mean: per case each
    count's time, its speed-up over the first count and its share of that count's copy bandwidth."""
    heads = " | ".join(f"{c} thread{'s' if c > 1 else ''}" for c in counts)
    lines = [f"Each cell: the kernels' time · speed-up over {counts[0]} thread{'s' if counts[0] > 1 else ''} · "
             "the bytes moved over that time as a share of STREAM copy's bandwidth on as many threads (above "
             "100 %: the data fit in the caches).", "",
             f"| operator | dtype | reduction | elements | {heads} |", "|---|---|---|---|" + "---|" * len(counts)]
    pools = {c: ThreadPoolExecutor(c) for c in counts}
    try:
        for op in ops:
            for dtype in ELEM:
                for reduction in ("none", "mean"):
                    for n in sizes:
                        feeds = sample(op, n, dtype, reduction)
                        model = model_for(op, feeds, dtype, reduction).SerializeToString()
                        moved = bytes_moved(op, feeds, reduction)
                        runners: dict = {}
                        stream = Stream("copy", moved, pools[counts[0]], counts[0])
                        for c in counts:
                            so = onnxruntime.SessionOptions()
                            so.intra_op_num_threads = c
                            session = InferenceSession(model, so, mode="kernels")
                            runners[c] = lambda s=session, f=feeds: s.run(None, f)
                            runners[f"copy{c}"] = stream.on(pools[c], c)
                        calls = max(3, min(25, int(2e6 // max(n, 1))))
                        t = steady(runners, blocks=blocks, calls=calls, quiet=True)
                        cells = [f"{_ms(t[c].median)} · {t[counts[0]].median / t[c].median:.2f}× · "
                                 f"{t[f'copy{c}'].median / t[c].median:.0%}" for c in counts]
                        lines.append(f"| {op} | {dtype} | {reduction} | {n:.0e} | " + " | ".join(cells) + " |")
                        print(lines[-1], file=sys.stderr, flush=True)  # minutes in all: each row as it is measured
    finally:
        for pool in pools.values():
            pool.shutdown()
    return "\n".join(lines)


def fixed_cost(op: str, blocks: int = 7) -> dict:
    """Seconds of one run with 16 float32 elements, `op` on the kernels against an Identity model, both through
    lossops' InferenceSession, in steady state."""
    feeds = sample(op, 16, "float32", "none")
    identity = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["input"], ["output"])], "identity",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [16])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [16])]),
        opset_imports=opset.opset_imports(), ir_version=opset.IR_VERSION)
    s_identity = InferenceSession(identity.SerializeToString())
    s_kernel = InferenceSession(model_for(op, feeds, "float32", "none").SerializeToString())
    t = steady({"identity": lambda: s_identity.run(None, {"input": feeds["input"]}),
                "kernel": lambda: s_kernel.run(None, feeds)}, blocks=blocks, calls=200)
    return {"op": op, "identity": t["identity"].median, "kernel": t["kernel"].median}


def extra_memory(ops: list[str], n: int, threads: int) -> dict[str, float]:
    """Memory a kernel call takes beyond its inputs and output, in output sizes (reduction none, float32):
    its workspace (heap; what the plan asks for) and the stack of each thread that runs tasks."""
    out = {}
    for op in ops:
        feeds = sample(op, n, "float32", "none")
        inputs = [feeds.get(i.name) for i in opset.get(op).inputs]
        extra = workspace_bytes(op, inputs, reduction="none") + layout.PLAN_BYTES + threads * layout.TASK_STACK_BYTES
        out[op] = extra / (n * 4)
    return out


def roofline(rows: list[Row]) -> tuple[float, int]:
    """The run's memory bandwidth: the best STREAM pass timed at the largest size (STREAM reports its best
    too), and that size. Every row's roofline is its bytes over this one figure, so the rows compare."""
    elements = max(r.elements for r in rows)
    bandwidth = max(r.bytes / r.stream_s for r in rows if r.elements == elements)
    for r in rows:
        r.roofline_s = r.bytes / bandwidth
    return bandwidth, elements


def environment(threads: int, bandwidth: float, elements: int) -> dict:
    versions = {"numpy": np.__version__, "onnxruntime": onnxruntime.__version__}
    if available("torch"):
        import torch

        versions["torch"] = torch.__version__
    return {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(), "cpus": os.cpu_count(),
            "cpu": cpu_model(), "threads": threads, "stream_GBps": bandwidth / 1e9, "stream_elements": elements,
            "versions": versions, "kernels": kernels_source()}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"


def render(rows: list[Row], env: dict, fixed: dict[str, float], memory: dict[str, float]) -> str:
    lines = [f"lossops bench {env['date']}: {env['machine']}, {env['cpus']} cpus, {env['threads']} threads, "
             f"memory bandwidth {env['stream_GBps']:.1f} GB/s (best STREAM pass{_timed_at(env)}); "
             + ", ".join(f"{k} {v}" for k, v in env["versions"].items()),
             "medians of block medians, each runner in steady state; speed-up = other's time / kernels' time; "
             f"roofline = bytes moved / bandwidth; * = a runner's blocks differ by more than {SPREAD_MARK:g}x",
             f"{'operator':37s} {'dtype':8s} {'red':5s} {'elements':>8s} {'kernels':>10s} {'GB/s':>6s} "
             f"{'roofline':>8s} {'vs decomp':>9s} {'vs torch':>8s} {'vs compile':>10s}"]
    for r in rows:
        versus = [f"{other.median / r.kernels.median:.2f}x" if other else "-" for other in (r.torch, r.compiled)]
        lines.append(f"{r.op:37s} {r.dtype:8s} {r.reduction:5s} {r.elements:8.0e} {_ms(r.kernels.median):>10s} "
                     f"{r.gbps:6.1f} {r.of_roofline:8.0%} {r.decomposition.median / r.kernels.median:8.2f}x "
                     f"{versus[0]:>8s} {versus[1]:>10s}{' *' if r.noisy else ''}")
    lines.append(f"fixed cost, 16 float32 elements: Identity {fixed['identity'] * 1e6:.1f} us, "
                 f"{fixed['op']} on the kernels {fixed['kernel'] * 1e6:.1f} us "
                 f"({fixed['kernel'] / fixed['identity']:.2f}x)")
    lines.append("extra memory of a 1e7 'none' call (workspace, plus the stack of the calling thread and of each "
                 "task thread), in output sizes: " + ", ".join(f"{k} {v:.3f}" for k, v in memory.items()))
    return "\n".join(lines)


SUMMARY_SIZES = (1000, 100_000, 10_000_000)


def kernels_source() -> str:
    """Which machine code the kernels run: a prebuilt level's library or numba's JIT."""
    return loader.code().source if loader.code() else "none"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "")
    except OSError:
        return platform.processor()


PEERS = {"torch": "PyTorch eager", "compiled": "torch.compile"}  # a stored row's other runners, where measured


def _ratio(r: dict, other: str) -> float:
    """A stored row's speed-up of the kernels over `other` ("decomposition" or one of PEERS)."""
    return r[other]["median"] / r["kernels"]["median"]


def _versus(r: dict, other: str) -> str:
    return f"{_ratio(r, other):.2f}×" if r.get(other) else "-"


def _heading(env: dict) -> str:
    machine = f"{env['machine']}, {env['cpu']}" if env.get("cpu") else env["machine"]
    return (f"`lossops bench`, {env['date']}, {machine}, {env['cpus']} CPUs ({env['threads']} threads), "
            f"memory bandwidth {env['stream_GBps']:.1f} GB/s{_timed_at(env)}, "
            f"kernels: {env.get('kernels', 'numba JIT')}")


def _timed_at(env: dict) -> str:
    """Where the run's bandwidth was timed on fewer than 1e7 elements (--quick), at how many: a STREAM pass over
    data in the caches, split over many threads, measures their start more than memory."""
    elements = env.get("stream_elements", SUMMARY_SIZES[-1])
    return f" at {elements:.0e} elements" if elements < SUMMARY_SIZES[-1] else ""


def runs(data: dict) -> list[dict]:
    """The runs a stored benchmark holds: a `lossops bench --json` run, or the runs `--update` merged."""
    return data["runs"] if "runs" in data else [data]


def load_runs(path: str) -> dict:
    """A stored benchmark read from `path` (what `--json` printed or `--update` wrote); ValueError in one line
    saying what the file is not."""
    expected = "expected a saved `lossops bench --json` run (JSON text)"
    if not Path(path).exists():
        raise ValueError(f"{path}: no such file; {expected}")
    if Path(path).is_dir():
        raise ValueError(f"{path} is a directory; {expected}")
    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
        stored = runs(data)
        if not stored or not all(isinstance(run["environment"], dict) and isinstance(run["rows"], list)
                                 for run in stored):
            raise TypeError("no runs")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not text (a binary file?); {expected}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not JSON ({e}); {expected}") from None
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path} is JSON but not a benchmark run ({type(e).__name__}: {e}); {expected}") from None
    return data


def update_runs(stored: dict | None, run: dict) -> dict:
    """`stored` with the operators `run` measured taken from `run`: their earlier rows (and their memory figure)
    go, a run left with no rows goes, so each row stays beside the run that measured it."""
    measured = {r["op"] for r in run["rows"]}
    kept = []
    for old in runs(stored) if stored else []:
        rows = [r for r in old["rows"] if r["op"] not in measured]
        if rows:
            memory = {op: v for op, v in old["extra_memory_in_outputs"].items() if op not in measured}
            kept.append({**old, "rows": rows, "extra_memory_in_outputs": memory})
    return {"runs": [*kept, run]}


def measured_ops() -> list[str]:
    """The operators the bench measures: the pointwise ones with a kernel, in the set's order (its inputs are n
    elements of one type; a class loss's and a sequence loss's are measured by `lossops bench --classes`)."""
    return [op for op in opset.OPS if op in host.kernel_ops() and not opset.get(op).classes
            and not opset.get(op).sequences]


def _op_order(op: str) -> int:
    """An operator's place in the operator set (one the set no longer has, last)."""
    return list(opset.OPS).index(op) if op in opset.OPS else len(opset.OPS)


def _rows(data: dict) -> list[dict]:
    """Every stored row, in the operator set's order."""
    return sorted((r for run in runs(data) for r in run["rows"]), key=lambda r: _op_order(r["op"]))


def _ops(run: dict) -> str:
    return ", ".join(dict.fromkeys(r["op"] for r in run["rows"]))


def report(data: dict) -> str:
    """docs/bench.md: the runs a stored benchmark holds, numbered, the summary table, then every row."""
    stored = runs(data)
    lines = ["# `lossops bench`", "",
             "Generated from `docs/bench.json`, stored `lossops bench --json` runs, by `lossops docs --write` "
             "(`lossops bench --op OP --update docs/bench.json` measures OP anew).", "", "## Runs", ""]
    for k, run in enumerate(stored, 1):
        env = run["environment"]
        versions = ", ".join(f"{name} {v}" for name, v in env["versions"].items())
        lines.append(f"{k}. {_ops(run)}: {_heading(env)}; {versions}.")
    lines += ["", "## Summary", "", summary(data), "## Every row", "",
              "Each runner is timed in steady state: blocks of consecutive calls, the runners' blocks alternated, "
              "medians of the block medians. The kernels and the decomposition run in the same session class, so "
              "both pay the same per-`run()` cost. Speed-up = the other's time over the kernels' time; roofline = "
              "the bytes the operator must move over the bandwidth (the best STREAM pass of the run; above 100 %: "
              f"the data fit in the last-level cache); `*` marks a row where some runner's blocks differ by more "
              f"than {SPREAD_MARK:g}×.", "",
              "| operator | dtype | reduction | elements | kernels | GB/s | of roofline | vs decomposition | "
              + " | ".join(f"vs {name}" for name in PEERS.values()) + " |",
              "|---|---|---|---|---|---|---|---|" + "---|" * len(PEERS)]
    rows = _rows(data)
    for r in rows:
        kernels = r["kernels"]["median"]
        spreads = [r[k]["spread"] for k in ("kernels", "decomposition", *PEERS) if r.get(k)]
        lines.append(f"| {r['op']} | {r['dtype']} | {r['reduction']} | {r['elements']:.0e} | {_ms(kernels)} | "
                     f"{r['bytes'] / kernels / 1e9:.1f} | {r['roofline_s'] / kernels:.0%} | "
                     f"{_ratio(r, 'decomposition'):.2f}× | " + " | ".join(_versus(r, k) for k in PEERS)
                     + f"{' *' if max(spreads) > SPREAD_MARK else ''} |")

    def case(r: dict) -> str:
        return f"{r['op']} {r['dtype']} `{r['reduction']}` at {r['elements']:.0e}"

    worst = min(rows, key=lambda r: _ratio(r, "decomposition"))
    lines += ["", f"Against the decomposition: faster in {sum(_ratio(r, 'decomposition') > 1 for r in rows)} of "
              f"{len(rows)} rows, {_ratio(worst, 'decomposition'):.2f}× at worst ({case(worst)})."]
    for other, name in PEERS.items():
        measured = [r for r in rows if r.get(other)]
        slower = [r for r in measured if _ratio(r, other) < 1]
        if measured:
            lines += ["", f"Against {name}: faster in {len(measured) - len(slower)} of {len(measured)} rows"
                      + (": slower in " + "; ".join(f"{case(r)} ({_ratio(r, other):.2f}×)" for r in slower) + "."
                         if slower else ".")]
    for k, run in enumerate(stored, 1):
        fixed = run["fixed_cost_s"]
        lines += ["", f"Fixed cost of a call, 16 float32 elements (run {k}): an Identity model "
                  f"{fixed['identity'] * 1e6:.1f} µs, {fixed['op']} on the kernels {fixed['kernel'] * 1e6:.1f} µs."]
    memory = {op: v for run in stored for op, v in run["extra_memory_in_outputs"].items()}
    memory = dict(sorted(memory.items(), key=lambda item: _op_order(item[0])))
    lines += ["", "Extra memory of a 1e7-element `none` call (the workspace, and the stacks of the calling thread and "
              "of each task thread), in output sizes: " + ", ".join(f"{k} {v:.3f}" for k, v in memory.items()) + "."]
    return "\n".join(lines) + "\n"


def summary(data: dict) -> str:
    """The summary table of stored `lossops bench --json` runs: float32, reduction none, three sizes, each operator
    with the number of the run that measured it (`report` lists the runs)."""
    stored = runs(data)
    run_of = {r["op"]: k for k, run in enumerate(stored, 1) for r in run["rows"]}
    lines = ["float32, reduction `none`. Each cell: the kernels' time · the decomposition's time over it · PyTorch "
             "eager's time over it · torch.compile's time over it (`-`: not in that run); roofline = the bytes the "
             "operator must move over the bandwidth (above 100 %: the data fit in the last-level cache).",
             "",
             "| operator | run | " + " | ".join(f"{n:.0e} elements" for n in SUMMARY_SIZES)
             + f" | of roofline at {SUMMARY_SIZES[-1]:.0e} |",
             "|---|---|" + "---|" * (len(SUMMARY_SIZES) + 1)]
    rows = _rows(data)
    for op in dict.fromkeys(r["op"] for r in rows):
        sized = {r["elements"]: r for r in rows
                 if r["op"] == op and r["dtype"] == "float32" and r["reduction"] == "none"}
        cells = [f"{_ms(r['kernels']['median'])} · {_ratio(r, 'decomposition'):.2f}× · "
                 + " · ".join(_versus(r, k) for k in PEERS)
                 if (r := sized.get(n)) else "not measured" for n in SUMMARY_SIZES]
        largest = sized.get(SUMMARY_SIZES[-1])
        roofline = f"{largest['roofline_s'] / largest['kernels']['median']:.0%}" if largest else "not measured"
        lines.append(f"| {op} | {run_of[op]} | " + " | ".join(cells) + f" | {roofline} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[Row], path: str) -> None:
    require("matplotlib", "lossops bench --plot").use("Agg")
    import matplotlib.pyplot as plt

    ops = sorted({r.op for r in rows})
    fig, axes = plt.subplots(1, len(ops), figsize=(4.5 * len(ops), 4), sharey=True, squeeze=False)
    for ax, op in zip(axes[0], ops, strict=True):
        for dtype in sorted({r.dtype for r in rows}):
            sel = [r for r in rows if r.op == op and r.dtype == dtype and r.reduction == "none"]
            ax.loglog([r.elements for r in sel], [r.gbps for r in sel], "o-", label=f"kernels {dtype}")
            ax.loglog([r.elements for r in sel], [r.bytes / r.decomposition.median / 1e9 for r in sel], "x--",
                      label=f"decomposition {dtype}")
        ax.set_title(op, fontsize=8)
        ax.set_xlabel("elements")
    axes[0][0].set_ylabel("GB/s (reduction none)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


def machine_code_table(ops: list[str], sizes: list[int], blocks: int) -> str:
    """The prebuilt machine code of each level this CPU runs against numba's JIT of the same source, timed side
    by side in one process through the numpy front end (one thread: the code, not the threading): per row the
    JIT's time over the level's (above 1: the prebuilt code is faster)."""
    from .ort_ext.arrays import run_with

    require("numba", "lossops bench --machine-code (the JIT to compare with)")
    codes = {"jit": loader.Jit("numba JIT", tuple(ops))}
    for level in targets.cpu_levels():
        found = loader.load_prebuilt(level)
        if isinstance(found, str):
            raise SystemExit(f"lossops bench --machine-code: {found}")
        codes[level] = found
    levels = [c for c in codes if c != "jit"]
    lines = [f"| operator | dtype | reduction | n | JIT ms | {' | '.join(f'{lv} ×' for lv in levels)} |",
             "|---|---|---|---|---|" + "---|" * len(levels)]
    ratios: dict[str, list[float]] = {lv: [] for lv in levels}
    for op in ops:
        for dtype in ["float32", "float16"]:
            for reduction in ["none", "mean"]:
                for n in sizes:
                    feeds = sample(op, n, dtype, reduction)
                    inputs = [feeds.get(i.name) for i in opset.get(op).inputs]
                    runners = {name: lambda c=c, i=inputs, r=reduction, o=op: run_with(c, o, i, reduction=r)
                               for name, c in codes.items()}
                    t = steady(runners, blocks=blocks, calls=max(3, min(25, int(2e6 // n))), quiet=n >= QUIET_FROM)
                    cells = []
                    for lv in levels:
                        ratios[lv].append(t["jit"].median / t[lv].median)
                        cells.append(f"{ratios[lv][-1]:.2f}")
                    lines.append(f"| {op} | {dtype} | {reduction} | {n:.0e} | {t['jit'].median * 1e3:.3f} | "
                                 + " | ".join(cells) + " |")
    means = [f"{float(np.exp(np.mean(np.log(ratios[lv])))):.3f} (min {min(ratios[lv]):.2f})" for lv in levels]
    lines.append(f"| geometric mean | | | | | {' | '.join(means)} |")
    return "\n".join(lines)


def _sizes(quick: bool, large: bool) -> list[int]:
    return [1000, 100_000] if quick else [10**k for k in range(3, 9 if large else 8)]


def main(large: bool, blocks: int, as_json: bool, plot_path: str | None, quick: bool,
         threads: list[int] | None = None, ops: list[str] | None = None, compare_machine_code: bool = False,
         update: str | None = None) -> int:
    ops = ops or measured_ops()
    without = [op for op in ops if op not in measured_ops()]
    if without:
        record = opset.get(without[0])
        why = "is a class or sequence loss, which `lossops bench --classes` measures" if (
            record.classes or record.sequences) else "has no kernel here, and the bench measures kernels"
        raise ValueError(f"{without[0]} {why}; it measures "
                         + ", ".join(measured_ops()))
    if compare_machine_code:
        sizes = [1000, 100_000] if quick else [10**k for k in range(3, 8)]
        print(machine_code_table(ops, sizes, blocks))
        return 0
    if threads and len(threads) > 1:
        if as_json or update or plot_path:
            raise ValueError("a --threads sweep prints its table only (no --json, --update, --plot)")
        print(sweep(ops, _sizes(quick, large), threads, blocks))
        return 0
    if plot_path:
        require("matplotlib", "lossops bench --plot")  # before minutes of measuring, not after
    stored = None
    if update and Path(update).exists():
        stored = load_runs(update)  # read before minutes of measuring, not after
    threads = threads[0] if threads else len(os.sched_getaffinity(0))
    sizes = _sizes(quick, large)
    fixed = fixed_cost(ops[0])  # first, before PyTorch's thread pool and the large tensors exist
    rows = run_bench(ops, sizes, ["float32", "float16"], ["none", "mean"], threads, blocks, compile_torch=not quick)
    env = environment(threads, *roofline(rows))
    memory = extra_memory(ops, 10**7, threads)
    run = {"environment": env, "rows": [asdict(r) for r in rows], "fixed_cost_s": fixed,
           "extra_memory_in_outputs": memory}
    if update:
        Path(update).write_text(json.dumps(update_runs(stored, run), indent=1) + "\n")
        print(f"{update}: the rows of {', '.join(ops)} measured anew ({len(rows)} rows)")
    elif as_json:
        print(json.dumps(run, indent=1))
    else:
        print(render(rows, env, fixed, memory))
    if plot_path:
        plot(rows, plot_path)
    return 0
