"""A seeded fuzz of every operator: random ranks, dims (0 and 1 included), broadcasts drawn from each input's
shape rule (a sequence loss: frames, sequences, classes, target layouts and blanks), optional inputs present or
not, every dtype, reduction and log_target. Each case runs on the
kernels inside ONNX Runtime and through the numpy front end (the same compiled code: bit-identical), and
both are held to PyTorch in float64 with the conformance tolerances."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from lossops import opset
from lossops.conformance.cases import node_model
from lossops.conformance.oracle import ORACLES
from lossops.conformance.specs import draw, label_lists, log_softmax, target_sequences
from lossops.conformance.tolerance import compare, oracle_error, term_magnitude
from lossops.opset.spec import BROADCAST, EXACT, FITS, LABEL_LIST, LOG_PROBABILITY
from lossops.ort_ext import InferenceSession
from lossops.ort_ext.arrays import run
from lossops.ort_ext.kernels.registry import KERNELS

DTYPES = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64), "float16": np.dtype(np.float16),
          "bfloat16": np.dtype(ml_dtypes.bfloat16)}
CASES_PER_OPERATOR = 40


def _fits(r: np.random.Generator, full: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to `full` without enlarging it: leading dims dropped, others 1 or the same."""
    drop = int(r.integers(0, len(full) + 1))
    return tuple(1 if r.random() < 0.4 else d for d in full[drop:])


def _broadcasting(r: np.random.Generator, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with `shape` either way (so the input may be the smaller one)."""
    extra = tuple(int(r.integers(1, 4)) for _ in range(int(r.integers(0, 2))))
    own = tuple(int(r.integers(1, 4)) if d == 1 and r.random() < 0.5 else (1 if r.random() < 0.3 else d)
                for d in shape)
    return extra + own


def _class_case(op, r: np.random.Generator, attrs: dict):
    """A class loss's case: rank 2 to 5, the classes on axis 1 (1 to 7 of them), dims 0 and 1 included, a
    fifth of the targets ignore_index (or probabilities, or label lists, as targets), the weight present or
    not."""
    rank = int(r.integers(2, 6))
    shape = tuple(int(r.choice([0, 1, 2, 3, 5], p=[0.05, 0.25, 0.3, 0.25, 0.15])) for _ in range(rank))
    shape = (shape[0], max(shape[1], 1), *shape[2:])
    rows = (shape[0], *shape[2:])
    if op.input("target").domain == LABEL_LIST:
        target = label_lists(r, shape)
    elif op.input("target").indices:
        target = r.integers(0, shape[1], rows)
        target[r.random(rows) < 0.2] = attrs["ignore_index"]
    else:
        target = np.moveaxis(r.dirichlet(np.ones(shape[1]), rows), -1, 1)
    loss = rows if attrs["reduction"] == "none" else ()
    given = {"grad_output": r.normal(size=loss), "input": np.log(r.uniform(0.01, 1.0, shape)), "target": target,
             "weight": r.uniform(0.3, 2.0, shape[1]) if r.random() < 0.5 else None}
    return [given[i.name] for i in op.inputs], attrs, str(r.choice(list(DTYPES))), rows


def _sequence_case(op, r: np.random.Generator, attrs: dict):
    """A sequence loss's case: 0 to 9 frames of 0 to 4 sequences over 2 to 6 classes, targets of 0 to 4 labels,
    padded or concatenated, the blank any class."""
    frames, batch, classes, most = (int(r.integers(lo, hi)) for lo, hi in ((0, 10), (0, 5), (2, 7), (0, 5)))
    attrs = {**attrs, "blank": int(r.integers(0, classes))}
    lengths = r.integers(0, most + 1, batch)
    given = {"log_probs": log_softmax(r, (frames, batch, classes)),
             "targets": target_sequences(r, lengths, classes, attrs["blank"], most if r.random() < 0.5 else None),
             "input_lengths": r.integers(0, frames + 1, batch), "target_lengths": lengths,
             "grad_output": r.normal(size=(batch,) if attrs["reduction"] == "none" else ())}
    return [given[i.name] for i in op.inputs], attrs, str(r.choice(list(DTYPES))), (frames, batch, classes)


def _case(op_name: str, seed: int):
    op = opset.get(op_name)
    r = np.random.default_rng(seed)
    if op.classes:
        return _class_case(op, r, {a.name: a.values[int(r.integers(len(a.values)))] for a in op.attributes})
    if op.sequences:
        return _sequence_case(op, r, {a.name: a.values[int(r.integers(len(a.values)))] for a in op.attributes})
    rank = int(r.integers(0, 5))
    shape = tuple(int(r.choice([0, 1, 2, 3, 5, 7], p=[0.05, 0.25, 0.2, 0.2, 0.15, 0.15])) for _ in range(rank))
    attrs = {a.name: a.values[int(r.integers(len(a.values)))] for a in op.attributes}
    shapes = {"input": shape}
    for i in op.inputs:
        if i.shape == EXACT:
            shapes[i.name] = shape
        elif i.shape == BROADCAST:
            shapes[i.name] = _broadcasting(r, shape)
    full = np.broadcast_shapes(*shapes.values())
    for i in op.inputs:
        if i.shape == FITS and not (i.optional and r.random() < 0.5):
            shapes[i.name] = _fits(r, full)
    if "grad_output" in shapes and (attrs["reduction"] != "none" or r.random() < 0.3):  # the loss was reduced
        shapes["grad_output"] = ()
    inputs = []
    for i in op.inputs:
        if i.name not in shapes:
            inputs.append(None)
            continue
        domain = LOG_PROBABILITY if attrs.get("log_target") and i.name == "target" else i.domain
        inputs.append(np.asarray(draw(r, domain, shapes[i.name])))
    return inputs, attrs, str(r.choice(list(DTYPES))), full


def _summed(op_name: str, attrs: dict, full: tuple[int, ...], inputs: list) -> int:
    """Terms summed into an output element: all of them for a reduced loss, the broadcast ones for a sum-back."""
    op, n = opset.get(op_name), int(np.prod(full))  # (a class loss's `full`: its rows)
    if op.sequences:  # a log-sum-exp per frame and state, of up to 9 states (and the sequences, reduced)
        frames, batch, _ = full
        return frames * 9 * (batch if op.reduces and attrs["reduction"] != "none" else 1)
    if op.reduces and attrs["reduction"] != "none":
        return n
    if op.output_input is not None:
        return n // max(inputs[op.output_input].size, 1)
    return 0


CASES = [(op, seed) for op in opset.OPS for seed in range(CASES_PER_OPERATOR)]


@pytest.mark.parametrize(("op_name", "seed"), CASES, ids=[f"{op}-{seed}" for op, seed in CASES])
def test_fuzz_against_pytorch(op_name, seed):
    inputs64, attrs, dtype, full = _case(op_name, seed)
    t = DTYPES[dtype]
    inputs = [None if a is None else a if a.dtype.kind == "i" else np.asarray(a.astype(t)) for a in inputs64]
    model, feeds = node_model(op_name, inputs, dtype, attrs, symbolic=bool(seed % 2))
    in_ort = InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    if op_name in KERNELS:
        direct = run(op_name, inputs, **attrs)
        assert in_ort.shape == direct.shape
        differ = in_ort.tobytes() != direct.tobytes()
        assert not differ, f"{dtype} {attrs}: in ORT {in_ort.ravel()[:6]!r}, direct {direct.ravel()[:6]!r}"

    rounded = [None if a is None else a if a.dtype.kind == "i" else a.astype(np.float64) for a in inputs]
    expected = ORACLES[op_name](*rounded, **attrs)
    ok, _, message = compare(in_ort, np.asarray(expected, np.float64), dtype,
                                _summed(op_name, attrs, full, inputs),
                                oracle_error(op_name, rounded, attrs),
                                magnitude=term_magnitude(op_name, rounded, attrs))
    assert ok, f"{dtype} {attrs} shapes {[None if a is None else a.shape for a in inputs]}: {message}"
