"""The kernels' vectorisable exp, log and log1p against numpy in higher precision: errors in ulps
of the result's type over the whole float32 range (every 97th bit pattern: 44 million inputs) and across
the float64 range, special values exactly."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from lossops.ort_ext.kernels import mathf


def _loop(f):
    @numba.njit(error_model="numpy")
    def apply(src, dst):
        for i in range(src.size):
            dst[i] = f(src[i])

    return apply


FUNCTIONS = {"exp": (mathf.exp, np.exp), "log": (mathf.log, np.log), "log1p": (mathf.log1p, np.log1p),
             "log1p_unit": (mathf.log1p_unit, np.log1p)}
DOMAINS = {"log1p_unit": (0.0, 1.0), "log1p": (-1.0, np.inf), "log": (0.0, np.inf)}  # where each is defined
# Largest error allowed, in ulps of the correctly rounded result, a little above what these inputs reach
# (float32 log1p_unit was also run over every float in [0, 1]); the operators' tolerances are 8 (float32) and
# 16 (float64) ulps.
BOUNDS = {"float32": {"exp": 2, "log": 1, "log1p": 1.6, "log1p_unit": 2.5},
          "float64": {"exp": 2.5, "log": 2.5, "log1p": 3, "log1p_unit": 2.5}}


def _ulps(got: np.ndarray, reference: np.ndarray, dtype: type) -> tuple[float, str]:
    """Largest error in ulps of the correctly rounded result; special values (inf, NaN, a result that
    rounds to inf) must match exactly."""
    with np.errstate(all="ignore"):
        rounded = reference.astype(dtype)
    special = ~np.isfinite(rounded)
    with np.errstate(invalid="ignore"):
        g, r = got.astype(np.longdouble), reference
    same_special = np.array_equal(got[special], rounded[special], equal_nan=True)
    if not same_special:
        return np.inf, f"special values differ at {np.flatnonzero(special)[:5]}"
    ulp = np.spacing(np.abs(rounded[~special]).astype(dtype)).astype(np.longdouble)
    err = np.abs(g[~special] - r[~special]) / ulp
    worst = int(np.argmax(err)) if err.size else 0
    return (float(err.max()) if err.size else 0.0), f"worst at {got[~special][worst] if err.size else ''}"


def _all_float32(stride: int = 97) -> np.ndarray:
    return np.arange(0, 2**32, stride, dtype=np.uint64).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_float32_over_the_whole_range(name):
    ours, reference = FUNCTIONS[name]
    x = _all_float32()
    lo, hi = DOMAINS.get(name, (-np.inf, np.inf))
    x = x[~((x < lo) | (x > hi))]  # NaN stays: it must come back NaN
    got = np.empty_like(x)
    _loop(ours)(x, got)
    with np.errstate(all="ignore"):
        expected = reference(x.astype(np.longdouble))
    ulps, where = _ulps(got, expected, np.float32)
    assert ulps <= BOUNDS["float32"][name], f"{name}: {ulps:.2f} ulps, {where}"


def _float64_samples(name: str) -> np.ndarray:
    r = np.random.default_rng(11)
    magnitudes = np.exp2(r.uniform(-1070, 1020, 10**6))
    signed = magnitudes * r.choice([-1.0, 1.0], size=magnitudes.size)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 2.2250738585072014e-308, 709.78, -745.1, 1.0,
                      -1.0, 0.5])
    x = np.concatenate([signed, r.uniform(-800, 800, 10**6), r.uniform(-1, 1, 10**6), edges])
    lo, hi = DOMAINS.get(name, (-np.inf, np.inf))
    return x[~((x < lo) | (x > hi))]


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_float64_across_the_range(name):
    ours, reference = FUNCTIONS[name]
    x = _float64_samples(name)
    got = np.empty_like(x)
    _loop(ours)(x, got)
    with np.errstate(all="ignore"):
        expected = reference(x.astype(np.longdouble))  # x87 extended: 11 more bits than the result
    ulps, where = _ulps(got, expected, np.float64)
    assert ulps <= BOUNDS["float64"][name], f"{name}: {ulps:.2f} ulps, {where}"


def test_special_values():
    f32 = np.float32
    for x, want in ((f32(-np.inf), 0.0), (f32(np.inf), np.inf), (f32(-200), 0.0), (f32(100), np.inf)):
        got = np.empty(1, f32)
        _loop(mathf.exp)(np.array([x]), got)
        assert got[0] == want
    got = np.empty(4, f32)
    _loop(mathf.log)(np.array([0, -1, np.inf, 1], f32), got)
    assert got[0] == -np.inf and np.isnan(got[1]) and got[2] == np.inf and got[3] == 0
    _loop(mathf.log1p)(np.array([-1, -2, np.inf, 0], f32), got)
    assert got[0] == -np.inf and np.isnan(got[1]) and got[2] == np.inf and got[3] == 0


def test_log_normal_is_log_where_no_input_is_subnormal():
    """log_normal (float16's values, never subnormal in float32) drops log's scaling of subnormals and nothing
    else: the same bits as log at every float32 but the subnormals (every 13th bit pattern, in slices so that
    memory stays small), and within log's bound of numpy's log in extended precision (every 91st), special
    values exactly."""
    log_normal, log = _loop(mathf.log_normal), _loop(mathf.log)
    step = 13 << 22
    for start in range(0, 2**32, step):
        x = np.arange(start, min(start + step, 2**32), 13, dtype=np.uint64).astype(np.uint32).view(np.float32)
        _log_normal_matches(log_normal, log, x[~((np.abs(x) < np.finfo(np.float32).tiny) & (x != 0))], 7)
    _log_normal_matches(log_normal, log, np.float32([0, -0.0, np.inf, -np.inf, np.nan, -1, 1]), 1)


def _log_normal_matches(log_normal, log, x: np.ndarray, every: int) -> None:
    got, want = np.empty_like(x), np.empty_like(x)
    log_normal(x, got)
    with np.errstate(all="ignore"):
        ulps, where = _ulps(got[::every], np.log(x[::every].astype(np.longdouble)), np.float32)
    assert ulps <= BOUNDS["float32"]["log"], f"log_normal: {ulps:.2f} ulps, {where}"
    log(x, want)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("hardware_fma", [True, False], ids=["fused", "float64"])
def test_a_float32_products_rounding_error_is_exact_either_way(hardware_fma, monkeypatch):
    """product_error32 (a fused multiply-add where the machine has one, float64 elsewhere: native.FMA_FLAG)
    against numpy's float64 of the exact product: the same float32 bits, products in the subnormals and past
    the largest float included. Both branches are compiled here by setting the flag's value before numba
    compiles (this host's own code takes one of them)."""
    from lossops.ort_ext.kernels import native

    if hardware_fma and not native.hardware_fma(native.ARCH, None):
        pytest.skip("this CPU has no fused multiply-add: the float64 branch is the one it runs")
    monkeypatch.setattr(native, "HARDWARE_FMA", hardware_fma)

    @numba.njit(error_model="numpy")
    def errors(a, b, out):
        for i in range(a.size):
            out[i] = native.product_error32(a[i], b[i], a[i] * b[i])

    r = np.random.default_rng(0)
    bits = r.integers(0, 2**32, size=(2, 400_000), dtype=np.uint64).astype(np.uint32)
    a, b = bits.view(np.float32)
    a[:1000], b[:1000] = np.float32(1e-20), r.uniform(-1e-18, 1e-18, 1000).astype(np.float32)  # subnormal products
    a[1000:2000], b[1000:2000] = np.float32(3e19), r.uniform(-3e19, 3e19, 1000).astype(np.float32)  # past the max
    with np.errstate(all="ignore"):
        p = a * b
        expected = (a.astype(np.float64) * b.astype(np.float64) - p.astype(np.float64)).astype(np.float32)
    got = np.empty_like(a)
    errors(a, b, got)
    nan = np.isnan(expected)  # NaN inputs, inf * 0, inf - inf: NaN either way, its payload aside
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got.view(np.uint32)[~nan], expected.view(np.uint32)[~nan])
