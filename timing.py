"""How lossops times things (the demo and the benchmark): each runner in steady state, runners alternated.

A runner's calls are timed in blocks of consecutive calls, so that its own worker threads are as warm as
they are in a loop that calls it (ORT's and PyTorch's threads spin after a call and wake fast for the next
one). Blocks of different runners alternate, so that a slow phase of this VM (its speed drifts 2x over
minutes) hits all of them. The first call of a block is not counted: it pays for whatever ran before (another
runner's spinning threads, a cold cache), and for large calls the block starts only once the process has
stopped using CPU. A runner's figure is the median of its block medians; its spread, the largest over the
smallest block median.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    median: float  # seconds per call
    spread: float  # largest / smallest block median (1.0: every block agreed)


def settle(limit_s: float = 1.0) -> None:
    """Sleep until this process's threads stop using CPU (less than 1 ms of CPU time in 5 ms), at most
    `limit_s`: ORT's intra-op threads spin for more than 50 ms after a call (measured)."""
    end = time.perf_counter() + limit_s
    while time.perf_counter() < end:
        cpu = time.process_time()
        time.sleep(0.005)
        if time.process_time() - cpu < 0.001:
            return


def steady(runners: dict[str, Callable[[], object]], blocks: int = 5, calls: int = 7,
           quiet: bool = False) -> dict[str, Timing]:
    """Median and spread of each runner's calls: `blocks` blocks of `calls` consecutive calls each (the first
    not counted), blocks of the runners alternated in a rotating order; with `quiet`, each block starts on a
    quiet process (worth it for calls of a millisecond and up)."""
    medians: dict[str, list[float]] = {name: [] for name in runners}
    names = list(runners)
    for b in range(blocks):
        for name in names[b % len(names):] + names[:b % len(names)]:
            fn = runners[name]
            if quiet:
                settle()
            fn()
            times = []
            for _ in range(calls):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            medians[name].append(statistics.median(times))
    return {name: Timing(statistics.median(m), max(m) / min(m) if min(m) > 0 else float("inf"))
            for name, m in medians.items()}


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    """Median time of `repeat` consecutive calls after one warm-up (one runner on its own)."""
    return steady({"fn": fn}, blocks=1, calls=max(repeat, 1))["fn"].median
