"""PyTorch in float64: the independent oracle every backend is held to, each operator's `oracle` in its
conformance module (conformance/ops/). torch is imported when one first runs (goldens are generated with it;
the stored suite serves without it)."""

from __future__ import annotations

from collections.abc import Callable

from .ops import modules

# operator name -> its oracle: f(*inputs, **attributes) -> float64 output (tests/test_registry.py checks that
# every operator has one)
ORACLES: dict[str, Callable] = {op: m.oracle for op, m in modules().items()}
