"""log1p with standard ONNX ops (ONNX has no Log1p), in the forms each consumer computes accurately; shared
by the decompositions of the logits losses."""

from __future__ import annotations

from onnx import TensorProto

from .builder import Builder

# 1/3, 1/5, ..., 1/15: the series 2 * atanh(s) = 2s * (1 + s^2/3 + s^4/5 + ...) to the term whose successor is
# below 2**-28 relative for |s| <= 1/3, where each term is at most a ninth of the one before
_ATANH_SERIES = tuple(1.0 / k for k in range(3, 17, 2))


def log1p(b: Builder, u: str) -> str:
    """log1p(u) with standard ops (ONNX has no Log1p).

    The portable form's float32: with s = u / (2 + u), log1p(u) = 2 * atanh(s), summed as its series for
    -1/2 <= u <= 1 (|s| <= 1/3) and Log(1 + u) beyond, where 1 + u is far from 1. Mul, Add and Div only, a few
    ulps on every consumer: OpenVINO's Log is ~57 ulps off near 1, TVM's Atanh is 0 for arguments below the
    float32 epsilon, onnx2torch has no Atanh. Elsewhere (float64; function bodies, which onnxruntime runs; CANN's
    graph mode) log(v) * u / (v - 1) with v = 1 + u, and u where v rounds to 1: exact to a few ulps where Log is,
    at a third of the nodes."""
    if b.compute == TensorProto.FLOAT and b.static.portable:
        two = b.const(2.0)
        s = b.op("Div", u, b.op("Add", two, u))
        z = b.op("Mul", s, s)
        tail = b.const(_ATANH_SERIES[-1])
        for c in reversed(_ATANH_SERIES[:-1]):
            tail = b.op("Add", b.const(c), b.op("Mul", z, tail))
        two_s = b.op("Mul", two, s)
        series = b.op("Add", two_s, b.op("Mul", two_s, b.op("Mul", z, tail)))
        far = b.op("Less", b.const(1.0 / 3.0), b.op("Abs", s))
        return b.op("Where", far, b.op("Log", b.op("Add", b.const(1.0), u)), series)
    one = b.const(1.0)
    v = b.op("Add", one, u)
    ratio = b.op("Div", b.op("Mul", b.op("Log", v), u), b.op("Sub", v, one))
    return b.op("Where", b.op("Equal", v, one), u, ratio)


def log1p_exp_neg_abs(b: Builder, x: str) -> str:
    """log1p(exp(-|x|)): the part of softplus that never overflows."""
    return log1p(b, b.op("Exp", b.op("Neg", b.op("Abs", x))))
