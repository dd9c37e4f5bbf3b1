"""Random operands drawn from an input's domain (its record's `Input.domain`), for the seeded tests."""

from __future__ import annotations

import numpy as np

from lossops.opset.spec import LOG_PROBABILITY, POSITIVE, PROBABILITY


def values(r: np.random.Generator, domain: str, shape: tuple[int, ...]) -> np.ndarray:
    if domain == PROBABILITY:
        return r.uniform(0.02, 0.98, shape)
    if domain == POSITIVE:
        return r.uniform(0.3, 2.0, shape)
    if domain == LOG_PROBABILITY:
        return np.log(r.uniform(0.01, 1.0, shape))
    return r.normal(scale=3, size=shape)
