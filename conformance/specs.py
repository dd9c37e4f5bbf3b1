"""The node spec every conformance case is made from, and the helpers the operators' case modules draw with."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..opset.spec import LOG_PROBABILITY, POSITIVE, PROBABILITY


@dataclass
class Spec:
    """One lossops node: operator, float64 inputs (None: optional input absent), attributes. Its cases are
    named `test_<id>_<dtype>`: the id is written out in full where it is made, so a case name found in a report
    can be grepped in the sources."""

    id: str
    op: str
    inputs: list[np.ndarray | None]
    attrs: dict = field(default_factory=dict)
    summed: int = 0  # terms summed into each output element (reductions, KL's sum over broadcast axes)


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def grad(reduction: str, shape: tuple[int, ...], r: np.random.Generator) -> np.ndarray:
    """A grad_output: a scalar for a reduced loss, else the input's shape."""
    return r.normal(size=()) if reduction != "none" else r.normal(size=shape)


def draw(r: np.random.Generator, domain: str, shape: tuple[int, ...] | int) -> np.ndarray:
    """Random values from an input's domain (its record's `Input.domain`), away from the domain's edges."""
    if domain == PROBABILITY:
        return r.uniform(0.02, 0.98, shape)
    if domain == POSITIVE:
        return r.uniform(0.3, 2.0, shape)
    if domain == LOG_PROBABILITY:
        return np.log(r.uniform(0.01, 1.0, shape))
    return r.normal(scale=3, size=shape)
