"""Largest error per (backend, dtype) seen by the numerical tests, printed at the end of a run."""

from collections import defaultdict

MAX_ULPS: dict[tuple[str, str], float] = defaultdict(float)
