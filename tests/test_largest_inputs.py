"""Every operator and reduction at the largest finite inputs of each float type, held to PyTorch in float64: where
the answer is finite, the kernels and the decomposition give it (a gradient's 1/N is applied before the factors
that grow, so a finite answer's intermediate products do not overflow), and where it overflows, both give the
infinity PyTorch's float64 answer rounds to."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from lossops import opset
from lossops.conformance import ops
from lossops.conformance.backends import BACKENDS
from lossops.conformance.cases import node_model, widened
from lossops.conformance.tolerance import DTYPES, compare, oracle_error, term_magnitude
from lossops.opset.spec import LABEL_LIST, LOG_PROBABILITY, POSITIVE, PROBABILITY
from lossops.ort_ext import arrays
from lossops.ort_ext.kernels.registry import KERNELS


def _values(domain: str, largest: float | None) -> np.ndarray:
    """Four values of an input's domain: with `largest`, the largest finite magnitudes of the type where the domain
    has them (and its edges where it has none); without, ordinary ones."""
    if domain == PROBABILITY:
        return np.array([1.0, 0.0, 0.5, 1.0]) if largest else np.array([0.25, 1.0, 0.0, 0.75])
    if domain == POSITIVE:
        return np.array([largest, 1.0, largest / 4, 0.5]) if largest else np.array([1.0, 0.5, 2.0, 1.0])
    if domain == LOG_PROBABILITY:
        return np.array([-largest, 0.0, -largest / 4, -1.0]) if largest else np.array([-0.5, -2.0, 0.0, -1.0])
    return np.array([largest, -largest, largest / 4, -1.0]) if largest else np.array([0.5, -1.0, 2.0, 0.0])


def _inputs(op_name: str, reduction: str, dtype_name: str) -> list[np.ndarray]:
    """The operator's `input` at the largest finite magnitudes of the type; its other inputs ordinary."""
    largest = float(ml_dtypes.finfo(DTYPES[dtype_name]).max)
    found = []
    if opset.get(op_name).classes:  # four rows of three classes, each row's values those of one class in turn
        x = np.stack([np.roll(_values(LOG_PROBABILITY, largest), k) for k in range(3)], axis=1)
        given = {"grad_output": np.array(1.0) if reduction != "none" else np.array([1.0, -0.5, 2.0, 1.0]),
                 "input": x, "target": np.array([0, 1, -100, 2]), "weight": np.array([1.0, 0.5, 2.0])}
        if not opset.get(op_name).input("target").indices:  # probabilities
            given["target"] = np.stack([np.roll([0.25, 0.0, 0.75], k) for k in range(4)])
        elif opset.get(op_name).input("target").domain == LABEL_LIST:
            given["target"] = np.array([[0, 2, -1], [1, -1, 0], [-1, 0, 0], [2, 1, 0]])
        return [given[i.name] if i.indices else given[i.name].astype(DTYPES[dtype_name])
                for i in opset.get(op_name).inputs]
    if opset.get(op_name).sequences:  # four frames of two sequences, each frame's values those of a class in turn
        lp = np.stack([np.stack([np.roll(_values(LOG_PROBABILITY, largest), t + n) for n in range(2)])
                       for t in range(4)])
        given = {"grad_output": np.array(1.0) if reduction != "none" else np.array([1.0, -0.5]), "log_probs": lp,
                 "targets": np.array([[1, 2], [3, 3]]), "input_lengths": np.array([4, 4]),
                 "target_lengths": np.array([2, 2])}
        return [given[i.name] if i.indices else given[i.name].astype(DTYPES[dtype_name])
                for i in opset.get(op_name).inputs]
    for i in opset.get(op_name).inputs:
        if i.name == "grad_output":
            found.append(np.array(1.0) if reduction != "none" else np.array([1.0, -0.5, 2.0, 1.0]))
        else:
            found.append(_values(i.domain, largest if i.name == "input" else None))
    return [a.astype(DTYPES[dtype_name]) for a in found]


CASES = [(op.name, dict(zip([a.name for a in op.attributes if a.enum], values, strict=True)), dtype)
         for op in opset.OPS.values()
         for values in itertools.product(*(a.allowed for a in op.attributes if a.enum)) for dtype in DTYPES]


@pytest.mark.parametrize(("op_name", "enums", "dtype"), CASES,
                         ids=[f"{o}-{'-'.join(map(str, e.values()))}-{d}" for o, e, d in CASES])
def test_the_largest_finite_inputs_give_pytorchs_answer(op_name, enums, dtype):
    """Every enum value (each reduction, each log_target), the numbers at their defaults. Two places where the
    float64 oracle cannot be the judge, each held to what can be said there:
    - a loss term beyond the compute type (KL's exp(t) * (t - x) at the largest x): every path computes the
      term in that type (the operators' contract), so the reduced loss may be that infinity;
    - float64 inputs where PyTorch's own float64 arithmetic overflows on the way (2 * (x - y) at x = -max, its
      gradient then inf where the answer is max): no wider type exists to check against, so ours must be finite
      there or the same non-finite value."""
    attrs = opset.get(op_name).resolve(enums)
    reduction = attrs["reduction"]
    inputs = _inputs(op_name, reduction, dtype)
    wide = widened(inputs)
    oracle = ops.module(op_name).oracle
    with np.errstate(all="ignore"):
        expected = np.asarray(oracle(*wide, **attrs), dtype=np.float64)
        terms = np.asarray(oracle(*wide, **{**attrs, "reduction": "none"}), dtype=np.float64)
    summed = 4 if reduction != "none" else 0
    allowance = {"oracle_error": oracle_error(op_name, wide, attrs), "magnitude": term_magnitude(op_name, wide, attrs)}
    compute_max = float(np.finfo(np.float64 if dtype == "float64" else np.float32).max)
    term_overflows = opset.get(op_name).reduces and reduction != "none" and bool(np.any(np.abs(terms) > compute_max))
    model, feeds = node_model(op_name, inputs, dtype, attrs)
    got = {"decomposition": BACKENDS["decomposition"](model, list(feeds.values()))}
    if op_name in KERNELS:
        got["kernels"] = arrays.run(op_name, inputs, **attrs)
    for path, value in got.items():
        value = np.asarray(value)
        judged = np.isfinite(expected) | (dtype != "float64") | ~np.isfinite(value.astype(np.float64))
        if term_overflows and np.isinf(value).all():
            assert np.sign(value) == np.sign(terms.sum()), f"{path}: {value}, terms {terms}"
            continue
        ok, _, message = compare(value[judged], expected[judged], dtype, summed,
                                 **{k: np.broadcast_to(v, expected.shape)[judged] for k, v in allowance.items()})
        assert ok, f"{path}: {message}; got {value}, PyTorch float64 {expected}"
