"""The large cases of every operator (the kernels' blocked, multi-threaded path) on the kernels and on the
decomposition, against PyTorch float64 computed now; every case with symbolic dims; the kernels called without
ONNX Runtime. The conformance cases themselves run on every backend against their stored goldens, which
test_conformance holds to PyTorch as it computes them now."""

from __future__ import annotations

import numpy as np
import pytest

from lossops.conformance.backends import BACKENDS
from lossops.conformance.cases import DTYPES, large_specs, node_specs, spec_case
from lossops.ort_ext.arrays import run
from lossops.ort_ext.kernels.registry import KERNELS

from record import MAX_ULPS

SPECS = node_specs() + large_specs()
CASES = [spec_case(s, d) for s in large_specs() for d in DTYPES]


@pytest.mark.parametrize("backend", ["kernels", "decomposition"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_against_pytorch(case, backend):
    ok, ulps, msg = case.check(BACKENDS[backend](case.model, case.inputs))
    MAX_ULPS[(backend, case.dtype)] = max(MAX_ULPS[(backend, case.dtype)], ulps if np.isfinite(ulps) else 0)
    assert ok, msg


SYMBOLIC = [spec_case(s, d, symbolic=True) for s in SPECS[::4] for d in DTYPES]


@pytest.mark.parametrize("case", SYMBOLIC, ids=[c.name for c in SYMBOLIC])
def test_symbolic_dims(case):
    """Models whose inputs have symbolic dims: shape checks happen at run time."""
    for backend in ("kernels", "decomposition"):
        ok, _, msg = case.check(BACKENDS[backend](case.model, case.inputs))
        assert ok, f"{backend}: {msg}"


DIRECT = [s for s in SPECS if s.op in KERNELS][::3]


@pytest.mark.parametrize("spec", DIRECT, ids=[s.id for s in DIRECT])
def test_kernel_called_directly(spec):
    """The kernels run on numpy arrays without ONNX Runtime, with the schema's defaults filled in."""
    case = spec_case(spec, "float32")
    inputs = [None if a is None else a if a.dtype.kind == "i" else a.astype(np.float32) for a in spec.inputs]
    got = run(spec.op, inputs, **spec.attrs)
    ok, _, msg = case.check(got)
    assert ok, msg
