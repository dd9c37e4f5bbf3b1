"""`lossops conformance`: hold backends to the stored suite and print one table and a summary."""

from __future__ import annotations

import collections
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .backends import BACKENDS, known_limit, unavailable
from .consumers import CONSUMERS
from .golden import DATA_DIR, Golden, export, load_all
from .tolerance import RTOL, compare

# `lossops conformance` runs lossops' own forms by default (seconds each); --all adds every other consumer
DEFAULT_BACKENDS = ["kernels", "native", "decomposition", "lowered", "cann-lowered", "reference", "cann"]
ALL_BACKENDS = [*DEFAULT_BACKENDS[:-1], *CONSUMERS, "cann"]


@dataclass
class Result:
    case: str
    backend: str
    ulps: float
    tolerance: str
    ok: bool
    message: str
    skipped: bool = False  # a declared limit of the backend covers the case (message: the reason)


def check(golden: Golden, backend: str) -> Result:
    tolerance = f"{RTOL[golden.dtype]:.2g} rel" + (f" +sum({golden.summed})" if golden.summed > 1 else "")
    limit = known_limit(backend, golden.name, golden.dtype)
    if limit:
        return Result(golden.name, backend, 0.0, tolerance, False, limit, skipped=True)
    try:
        got = BACKENDS[backend](golden.model, golden.inputs)
    except Exception as e:
        return Result(golden.name, backend, np.inf, tolerance, False, f"{type(e).__name__}: {e}"[:300])
    ok, ulps, message = compare(got, golden.expected, golden.dtype, golden.summed, golden.slack,
                                golden.output_dtype)
    return Result(golden.name, backend, ulps, tolerance, ok, message)


def one_type_each(goldens: list) -> list:
    """Each case form (a case's name without its element type) in one of its types, the types taking turns: every
    form at a quarter of the cases, for a consumer that compiles each model."""
    forms: dict[str, list] = {}
    for g in goldens:
        forms.setdefault(re.sub(r"_(float16|bfloat16|float32|float64)(?=(_symbolic)?$)", "", g.name), []).append(g)
    return [cases[k % len(cases)] for k, cases in enumerate(forms.values())]


def run(backends: list[str], pattern: str | None = None, root: Path = DATA_DIR,
        failures_only: bool = False, sample: bool = False) -> int:
    """Each backend on the cases whose names `pattern` matches (with `sample`, `one_type_each` of them); the
    exit status: 1 where a case failed."""
    try:
        matcher = re.compile(pattern or "")
    except re.error as e:
        raise ValueError(f"-k {pattern!r} is not a regular expression: {e}") from None
    goldens = [g for g in load_all(root) if matcher.search(g.name)]
    goldens = one_type_each(goldens) if sample else goldens
    if not goldens:
        raise ValueError(f"-k {pattern!r} matches no case (case names look like test_kl_div_backward_plain_mean_"
                         "lt0_float32; --export DIR writes them all)")
    failed = passed = 0
    print(f"{'case':62s} {'backend':13s} {'max err (ulp)':>13s} {'tolerance':>18s} result", flush=True)
    summary: list[str] = []

    def said(lines: list[str]) -> None:  # a backend's summary, as soon as it is known
        summary.extend(lines)
        for line in lines:
            print(line, flush=True)

    try:
        for backend in backends:
            reason = unavailable(backend)
            if reason:
                said([f"{backend}: unavailable ({reason})"])
                continue
            t0 = time.perf_counter()
            results = []
            for g in goldens:
                r = check(g, backend)
                results.append(r)
                if not (failures_only and (r.ok or r.skipped)):
                    verdict = "PASS" if r.ok else ("SKIP " if r.skipped else "FAIL ") + r.message
                    print(f"{r.case:62s} {r.backend:13s} {r.ulps:13.2f} {r.tolerance:>18s} {verdict}")
            seconds = time.perf_counter() - t0
            bad = sum(not r.ok and not r.skipped for r in results)
            skips = collections.Counter(r.message for r in results if r.skipped)
            failed += bad
            passed += len(results) - bad - sum(skips.values())
            worst = max((r.ulps for r in results if r.ok), default=0.0)
            said([f"{backend}: {len(results) - bad - sum(skips.values())} passed, {bad} failed"
                  + (f", {sum(skips.values())} skipped" if skips else "")
                  + f", worst passing error {worst:.2f} ulp, {seconds:.1f} s"]
                 + [f"  skipped {n}: {reason}" for reason, n in skips.items()])
    except KeyboardInterrupt:
        print("interrupted; the backends that finished:", flush=True)
        for line in summary:
            print(line)
        raise
    print("summary:")
    for line in summary:
        print(line)
    print(f"conformance: {passed} passed, {failed} failed")
    return 1 if failed else 0


def export_suite(target: Path) -> int:
    count = export(target)
    print(f"wrote {count} cases to {target}, twice each, in the ONNX node-test format (model.onnx, "
          "test_data_set_0/*.pb, data.json with the case's tolerance):")
    print("  test_<case>           the lossops nodes, their standard-op functions attached (onnxruntime expands "
          "them; a backend that implements lossops runs the nodes)")
    print("  test_<case>_expanded  the same graph lowered to standard ops (lossops lower), for every other ONNX "
          "consumer")
    return 0
