"""The error messages of the kernels' engine, written as bytes by compiled code (the kernels must not call into
Python): each names the operator and the input and says what was expected. The shape rules' sentences are
opset/shapes.py's templates, so a broken rule reads the same from shape inference and from a kernel."""

from __future__ import annotations

import numba
import numpy as np

from ...opset import shapes
from .layout import (
    _LENGTHS,
    BAD_AT,
    BAD_BLANK,
    BAD_CLASS,
    BAD_LABEL,
    BAD_LENGTH,
    BAD_TARGET,
    BFLOAT16,
    CLASSES,
    CULPRIT,
    DOUBLE,
    ELEM_TYPE,
    FLOAT,
    FLOAT16,
    INT64,
    MAX_RANK,
    MESSAGE,
    MESSAGE_BYTES,
    MISSING,
    NOT_BROADCAST,
    NOT_CLASSES,
    NOT_CONCATENATED,
    NOT_EXACT,
    NOT_FITS,
    NOT_INDICES,
    NOT_LENGTHS,
    NOT_LOSS,
    NOT_PER_CLASS,
    NOT_ROWS,
    NOT_SEQUENCES,
    NOT_TARGET_SEQUENCES,
    O_DIMS,
    O_ELEM_TYPE,
    O_RANK,
    OP,
    OP_ROLES,
    OPERAND_WORDS,
    OPERANDS,
    OTHER,
    PARAMS,
    RANK,
    STATUS,
    TOO_MANY_DIMS,
    WRONG_TYPE,
)
from .native import stack, view

_jit = numba.njit(error_model="numpy", nogil=True)


def _b(text: str) -> np.ndarray:
    return np.frombuffer(text.encode(), np.uint8).copy()


_COLON_INPUT = _b(": input '")


def _template(template: str, fields: list[str]) -> tuple[np.ndarray, ...]:
    """The literal texts of one of opset/shapes.py's messages as bytes, ": " before the first; the fields must
    be the ones, in the order, that `describe` writes."""
    texts, found = shapes.pieces(template)
    assert found == fields, (template, found)
    return tuple(_b(t) for t in [": " + texts[0], *texts[1:]])


_EXACT_TEXTS = _template(shapes.NOT_EXACT, ["input", "shape", "full"])
_FITS_TEXTS = _template(shapes.NOT_FITS, ["input", "shape", "full"])
_BROADCAST_TEXTS = _template(shapes.NOT_BROADCAST, ["input", "shape", "other", "other_shape"])
_CLASSES_TEXTS = _template(shapes.NOT_CLASSES, ["shape"])
_ROWS_TEXTS = _template(shapes.NOT_ROWS, ["input", "shape", "full"])
_PER_CLASS_TEXTS = _template(shapes.NOT_PER_CLASS, ["input", "shape", "full"])
_LOSS_TEXTS = _template(shapes.NOT_LOSS, ["input", "shape", "full"])
_SEQUENCES_TEXTS = _template(shapes.NOT_SEQUENCES, ["shape"])
_TARGET_SEQUENCES_TEXTS = _template(shapes.NOT_TARGET_SEQUENCES, ["input", "shape", "full"])
_CONCATENATED_TEXTS = _template(shapes.NOT_CONCATENATED, ["input", "shape", "full"])
_LENGTHS_TEXTS = _template(shapes.NOT_LENGTHS, ["input", "shape", "full"])
_LENGTH_TEXTS = _template(shapes.NOT_A_LENGTH, ["input", "most"])
_BLANK_TEXTS = _template(shapes.NOT_A_BLANK, ["blank", "classes"])
_NOT_A_TARGET = _b(": " + shapes.NOT_A_TARGET + "; it holds ")
_HOLDS, _AT, _BLANK_IS = _b("; it holds "), _b(" at index "), _b(", blank ")
_LENGTH_INDICES = _b("; expected int64 lengths")
_NOT_A_CLASS = _b(": " + shapes.NOT_A_CLASS + "; it holds ")
_NOT_A_LABEL = _b(": " + shapes.NOT_A_LABEL + "; it holds ")
_AT_INDEX, _C_IS, _INDICES = _b(" at flat index "), _b(" (C = "), _b("; expected int64 class indices")
_REQUIRED = _b(": required input '")
_IS_MISSING = _b("' is missing")
_HAS_TYPE = _b("' has element type ")
_EXPECTED = _b("; expected ")
_LIKE_T = _b(" (the node's type T)")
_HAS_RANK = _b("' has rank ")
_MAX_DIMS = _b(f"; the lossops kernels take at most {MAX_RANK} dimensions")
_TOO_LARGE = _b(": the inputs' shapes have more than 2**62 elements")
_TYPE_NAMES = _b("float\0float16\0double\0bfloat16\0an unsupported type\0int64\0")
_MINUS = _b("-")
_OPEN, _CLOSE, _COMMA, _COMMA_CLOSE = _b("("), _b(")"), _b(", "), _b(",)")


@_jit
def put(msg, pos, src):
    for k in range(src.size):
        if pos < msg.size - 1:
            msg[pos] = src[k]
            pos += 1
    return pos


@_jit
def _put_name(msg, pos, names, which):
    """The which-th NUL-separated name in `names`."""
    k = 0
    for _ in range(which):
        while names[k] != 0:
            k += 1
        k += 1
    while k < names.size and names[k] != 0:
        if pos < msg.size - 1:
            msg[pos] = names[k]
            pos += 1
        k += 1
    return pos


@_jit
def put_int(msg, pos, value):
    digits = view(stack(24), 24, np.uint8)
    if value < 0:
        pos = put(msg, pos, _MINUS)
        value = -value
    n = 0
    while True:
        digits[n] = 48 + value % 10
        value //= 10
        n += 1
        if value == 0:
            break
    for k in range(n):
        if pos < msg.size - 1:
            msg[pos] = digits[n - 1 - k]
            pos += 1
    return pos


@_jit
def _put_shape(msg, pos, dims, rank):
    pos = put(msg, pos, _OPEN)
    for d in range(rank):
        if d:
            pos = put(msg, pos, _COMMA)
        pos = put_int(msg, pos, dims[d])
    return put(msg, pos, _COMMA_CLOSE if rank == 1 else _CLOSE)


@_jit
def _type_index(elem_type):
    if elem_type == FLOAT:
        return 0
    if elem_type == FLOAT16:
        return 1
    if elem_type == DOUBLE:
        return 2
    if elem_type == INT64:
        return 5
    return 3 if elem_type == BFLOAT16 else 4


@_jit
def describe(w, address, names, full):
    """The error recorded in w (status, culprit, other input, rank of `full`) as a NUL-terminated sentence
    naming the operator and the input; returns the status. (The failing sites store those fields rather than
    pass them: numba compiles a function once per distinct literal argument.)"""
    status, culprit, other, full_rank = w[STATUS], w[CULPRIT], w[OTHER], w[RANK]
    msg = view(address + MESSAGE, MESSAGE_BYTES, np.uint8)
    a = OPERANDS + culprit * OPERAND_WORDS
    dims = w[a + O_DIMS:a + O_DIMS + MAX_RANK]
    pos = _put_name(msg, 0, names, 0)
    if status == MISSING:
        pos = put(msg, pos, _REQUIRED)
        pos = _put_name(msg, pos, names, 1 + culprit)
        pos = put(msg, pos, _IS_MISSING)
    elif status == WRONG_TYPE:
        pos = put(msg, pos, _COLON_INPUT)
        pos = _put_name(msg, pos, names, 1 + culprit)
        pos = put(msg, pos, _HAS_TYPE)
        pos = _put_name(msg, pos, _TYPE_NAMES, _type_index(w[a + O_ELEM_TYPE]))
        pos = put(msg, pos, _EXPECTED)
        pos = _put_name(msg, pos, _TYPE_NAMES, _type_index(w[ELEM_TYPE]))
        pos = put(msg, pos, _LIKE_T)
    elif status == NOT_CLASSES:
        pos = put(msg, pos, _CLASSES_TEXTS[0])
        pos = _put_shape(msg, pos, dims, w[a + O_RANK])
        pos = put(msg, pos, _CLASSES_TEXTS[1])
    elif status == NOT_INDICES:
        pos = put(msg, pos, _COLON_INPUT)
        pos = _put_name(msg, pos, names, 1 + culprit)
        pos = put(msg, pos, _HAS_TYPE)
        pos = _put_name(msg, pos, _TYPE_NAMES, _type_index(w[a + O_ELEM_TYPE]))
        pos = put(msg, pos, _LENGTH_INDICES if w[OP + OP_ROLES + culprit] == _LENGTHS else _INDICES)
    elif status == NOT_SEQUENCES:
        pos = put(msg, pos, _SEQUENCES_TEXTS[0])
        pos = _put_shape(msg, pos, dims, w[a + O_RANK])
        pos = put(msg, pos, _SEQUENCES_TEXTS[1])
    elif status == BAD_LENGTH:  # OTHER: the value, BAD_AT: its index, CLASSES: the largest allowed
        pos = put(msg, pos, _LENGTH_TEXTS[0])
        pos = _put_name(msg, pos, names, 1 + culprit)
        pos = put(msg, pos, _LENGTH_TEXTS[1])
        pos = put_int(msg, pos, w[CLASSES])
        pos = put(msg, pos, _LENGTH_TEXTS[2])
        pos = put(msg, pos, _HOLDS)
        pos = put_int(msg, pos, other)
        pos = put(msg, pos, _AT)
        pos = put_int(msg, pos, w[BAD_AT])
    elif status == BAD_BLANK:
        pos = put(msg, pos, _BLANK_TEXTS[0])
        pos = put_int(msg, pos, np.int64(view(address + 8 * PARAMS, 1, np.float64)[0]))
        pos = put(msg, pos, _BLANK_TEXTS[1])
        pos = put_int(msg, pos, w[CLASSES])
        pos = put(msg, pos, _BLANK_TEXTS[2])
    elif status == BAD_CLASS or status == BAD_LABEL or status == BAD_TARGET:  # a target sequence's also names blank
        pos = put(msg, pos, _NOT_A_CLASS if status == BAD_CLASS else _NOT_A_LABEL if status == BAD_LABEL else
                  _NOT_A_TARGET)
        pos = put_int(msg, pos, other)
        pos = put(msg, pos, _AT_INDEX)
        pos = put_int(msg, pos, w[BAD_AT])
        pos = put(msg, pos, _C_IS)
        pos = put_int(msg, pos, w[CLASSES])
        if status == BAD_TARGET:
            pos = put(msg, pos, _BLANK_IS)
            pos = put_int(msg, pos, np.int64(view(address + 8 * PARAMS, 1, np.float64)[0]))
        pos = put(msg, pos, _CLOSE)
    elif status in (NOT_EXACT, NOT_FITS, NOT_ROWS, NOT_PER_CLASS, NOT_LOSS, NOT_TARGET_SEQUENCES, NOT_CONCATENATED,
                    NOT_LENGTHS):
        texts = _EXACT_TEXTS if status == NOT_EXACT else _FITS_TEXTS if status == NOT_FITS else (
            _ROWS_TEXTS if status == NOT_ROWS else _PER_CLASS_TEXTS if status == NOT_PER_CLASS else
            _LOSS_TEXTS if status == NOT_LOSS else _TARGET_SEQUENCES_TEXTS if status == NOT_TARGET_SEQUENCES else
            _CONCATENATED_TEXTS if status == NOT_CONCATENATED else _LENGTHS_TEXTS)
        pos = put(msg, pos, texts[0])
        pos = _put_name(msg, pos, names, 1 + culprit)
        pos = put(msg, pos, texts[1])
        pos = _put_shape(msg, pos, dims, w[a + O_RANK])
        pos = put(msg, pos, texts[2])
        pos = _put_shape(msg, pos, full, full_rank)
        pos = put(msg, pos, texts[3])
    elif status == NOT_BROADCAST:
        b = OPERANDS + other * OPERAND_WORDS
        texts = _BROADCAST_TEXTS
        pos = put(msg, pos, texts[0])
        pos = _put_name(msg, pos, names, 1 + culprit)
        pos = put(msg, pos, texts[1])
        pos = _put_shape(msg, pos, dims, w[a + O_RANK])
        pos = put(msg, pos, texts[2])
        pos = _put_name(msg, pos, names, 1 + other)
        pos = put(msg, pos, texts[3])
        pos = _put_shape(msg, pos, w[b + O_DIMS:b + O_DIMS + MAX_RANK], w[b + O_RANK])
        pos = put(msg, pos, texts[4])
    elif status == TOO_MANY_DIMS:
        pos = put(msg, pos, _COLON_INPUT)
        pos = _put_name(msg, pos, names, 1 + culprit)
        pos = put(msg, pos, _HAS_RANK)
        pos = put_int(msg, pos, w[a + O_RANK])
        pos = put(msg, pos, _MAX_DIMS)
    else:
        pos = put(msg, pos, _TOO_LARGE)
    msg[pos] = 0
    return status
