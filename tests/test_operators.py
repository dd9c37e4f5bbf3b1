"""Every operator x dtype x case, on the kernels and on the decomposition, against PyTorch float64."""

from __future__ import annotations

import numpy as np
import pytest

from lossops.ort_ext.kernels import KERNELS

from cases import all_cases
from helpers import run, single_node_model
from oracle import ORACLES, oracle_error
from record import MAX_ULPS
from tolerance import DTYPES, compare

CASES = all_cases()


def _rounded(inputs, dtype):
    return [None if a is None else np.asarray(a).astype(dtype) for a in inputs]


@pytest.mark.parametrize("backend", ["kernels", "decomposition"])
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_against_pytorch(case, dtype_name, backend):
    inputs = _rounded(case.inputs, DTYPES[dtype_name])
    ref = ORACLES[case.op](*[None if a is None else a.astype(np.float64) for a in inputs], **_full(case))
    model, feeds = single_node_model(case.op, inputs, dtype_name, case.attrs)
    got = run(backend, model, feeds)
    ok, ulps, msg = compare(got, ref, dtype_name, case.summed, _oracle_error(case, inputs))
    MAX_ULPS[(backend, dtype_name)] = max(MAX_ULPS[(backend, dtype_name)], ulps if np.isfinite(ulps) else 0)
    assert ok, msg


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("case", CASES[::4], ids=[c.id for c in CASES[::4]])
def test_symbolic_dims(case, dtype_name):
    """Models whose inputs have symbolic dims: shape checks happen at run time."""
    inputs = _rounded(case.inputs, DTYPES[dtype_name])
    ref = ORACLES[case.op](*[None if a is None else a.astype(np.float64) for a in inputs], **_full(case))
    model, feeds = single_node_model(case.op, inputs, dtype_name, case.attrs, symbolic=True)
    for backend in ("kernels", "decomposition"):
        ok, _, msg = compare(run(backend, model, feeds), ref, dtype_name, case.summed, _oracle_error(case, inputs))
        assert ok, f"{backend}: {msg}"


@pytest.mark.parametrize("case", CASES[::3], ids=[c.id for c in CASES[::3]])
def test_kernel_called_directly(case):
    """The numpy kernels are usable without ONNX Runtime, with the schema's defaults filled in."""
    from lossops import opset

    inputs = _rounded(case.inputs, np.float32)
    ref = ORACLES[case.op](*[None if a is None else a.astype(np.float64) for a in inputs], **_full(case))
    got = KERNELS[case.op](*inputs, **opset.get(case.op).resolve(case.attrs))
    ok, _, msg = compare(got, ref, "float32", case.summed, _oracle_error(case, inputs))
    assert ok, msg


def _oracle_error(case, inputs):
    return oracle_error(case.op, inputs, _full(case))


def _full(case):
    from lossops import opset

    return opset.get(case.op).resolve(case.attrs)
