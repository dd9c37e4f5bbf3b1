"""The shape rules of the operators (docs/operators.md) over shapes that may be partly symbolic, read from each
input's rule (`spec.py`).

A dim is an int, a str (a symbolic dim such as "batch") or None (unknown); a shape is a tuple of dims, or
None when even the rank is unknown. Functions raise ValueError only when a shape is certainly invalid.
The kernels apply the same rules to concrete shapes in compiled code, and the decompositions guard the
rules that static inference cannot decide; the messages say the same things.
"""

from __future__ import annotations

import string

from onnx import TypeProto

from .spec import BROADCAST, EXACT, FITS, LABELS, LENGTHS, LOSS, PER_CLASS, ROWS, TARGET_SEQUENCES, OpDef

Dim = int | str | None
Shape = tuple[Dim, ...] | None


def of_type(t: TypeProto) -> Shape:
    """The shape a tensor type declares, in this module's terms."""
    if not t.tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim)


# What a broken rule says, after "<operator>: ", here and in the kernels' engine (which writes the same
# templates in compiled code, its fields in this order): static and run-time errors read the same.
NOT_EXACT = "input '{input}' has shape {shape}; expected exactly input's shape {full}"
NOT_FITS = "input '{input}' has shape {shape}; expected a shape broadcastable to {full}"
NOT_BROADCAST = "inputs '{input}' {shape} and '{other}' {other_shape} do not broadcast"
NOT_CLASSES = "input 'input' has shape {shape}; expected (N, C, d1, ...): rank 2 or more, the classes on axis 1"
NOT_ROWS = "input '{input}' has shape {shape}; expected input's shape without its class axis {full}"
NOT_PER_CLASS = "input '{input}' has shape {shape}; expected {full}, one value per class"
NOT_LOSS = "input '{input}' has shape {shape}; expected the loss's shape {full}"
NOT_A_CLASS = "input 'target' must hold class indices in [0, C) or ignore_index"
NOT_A_LABEL = "input 'target' must hold class indices in [0, C) or -1 (a row's labels end at its first -1)"
# a sequence loss's (CTC)
NOT_SEQUENCES = "input 'log_probs' has shape {shape}; expected (T, N, C): T frames of N sequences over C classes"
NOT_TARGET_SEQUENCES = ("input '{input}' has shape {shape}; expected (N, S), padded, or (sum of target_lengths,), "
                        "concatenated, for the batch {full}")
NOT_CONCATENATED = "input '{input}' has shape {shape}; expected (sum of target_lengths,) = {full}"
NOT_LENGTHS = "input '{input}' has shape {shape}; expected {full}, one length per sequence"
NOT_A_LENGTH = "input '{input}' must hold lengths in [0, {most}]"
NOT_A_TARGET = "input 'targets' must hold class indices in [0, C) other than blank, up to each target length"
NOT_A_BLANK = "attribute 'blank' is {blank}; expected a class in [0, C) (C = {classes})"


def pieces(template: str) -> tuple[list[str], list[str]]:
    """(the literal texts, the field names) of a message template: text 0, field 0, text 1, ..., text n."""
    parsed = list(string.Formatter().parse(template))
    texts = [literal for literal, _, _, _ in parsed]
    fields = [field for _, field, _, _ in parsed if field is not None]
    return texts + [""] * (len(fields) + 1 - len(texts)), fields


def show(shape: Shape) -> str:
    if shape is None:
        return "(unknown rank)"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def broadcast(a: Shape, b: Shape, names: tuple[str, str]) -> Shape:
    """Multidirectional (numpy) broadcast of a and b, the shapes of the inputs named `names`."""
    if a is None or b is None:
        return None
    rank = max(len(a), len(b))
    padded_a = (1,) * (rank - len(a)) + a
    padded_b = (1,) * (rank - len(b)) + b
    out: list[Dim] = []
    for x, y in zip(padded_a, padded_b, strict=True):
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif isinstance(x, int) and isinstance(y, int):
            raise ValueError(NOT_BROADCAST.format(input=names[0], shape=show(a), other=names[1],
                                                  other_shape=show(b)))
        else:
            out.append(x if isinstance(x, int) else y if isinstance(y, int) else None)
    return tuple(out)


def check_fits(small: Shape, big: Shape, name: str) -> None:
    """`small`, input `name`'s shape, must broadcast to exactly `big` (it may not enlarge it)."""
    if small is None or big is None:
        return
    pairs = zip(reversed(small), reversed(big), strict=False)
    if len(small) > len(big) or any(isinstance(s, int) and isinstance(b, int) and s not in (1, b) for s, b in pairs):
        raise ValueError(NOT_FITS.format(input=name, shape=show(small), full=show(big)))


def check_equal(a: Shape, b: Shape, name: str) -> None:
    """`a`, input `name`'s shape, must be exactly `b`, input's."""
    if a is None or b is None:
        return
    same_rank = len(a) == len(b)
    if not same_rank or any(isinstance(x, int) and isinstance(y, int) and x != y for x, y in zip(a, b, strict=False)):
        raise ValueError(NOT_EXACT.format(input=name, shape=show(a), full=show(b)))


def full_shape(op: OpDef, shapes: dict[str, Shape]) -> Shape:
    """F: `input`'s shape broadcast with every BROADCAST input (checked)."""
    full = shapes["input"]
    for i in op.inputs:
        if i.shape == BROADCAST and i.name in shapes:
            full = broadcast(full, shapes[i.name], ("input", i.name))
    return full


def rows_and_classes(op: OpDef, input: Shape) -> tuple[Shape, Dim]:
    """A class loss's rows shape (`input`'s without axis 1) and its number of classes; ValueError where `input`
    has rank below 2."""
    if input is None:
        return None, None
    if len(input) < 2:
        raise ValueError(NOT_CLASSES.format(shape=show(input)))
    return (input[0], *input[2:]), input[1]


def infer_classes(op: OpDef, shapes: dict[str, Shape], attrs: dict) -> Shape:
    """`infer` for a class loss: its inputs' rules are the rows', the classes', the loss's and input's own."""
    rows, classes = rows_and_classes(op, shapes["input"])
    loss = rows if attrs["reduction"] == "none" else ()
    expected = {ROWS: (rows, NOT_ROWS), PER_CLASS: ((classes,), NOT_PER_CLASS), LOSS: (loss, NOT_LOSS),
                EXACT: (shapes["input"], NOT_EXACT), LABELS: (shapes["input"], NOT_EXACT)}
    for i in op.inputs:
        if i.name in shapes and i.shape in expected:
            shape, message = expected[i.shape]
            try:
                check_equal(shapes[i.name], shape, i.name)
            except ValueError:
                raise ValueError(message.format(input=i.name, shape=show(shapes[i.name]), full=show(shape))) from None
    if op.reduces:
        return loss
    return shapes[op.output_shape]


def infer_sequences(op: OpDef, shapes: dict[str, Shape], attrs: dict) -> Shape:
    """`infer` for a sequence loss: log_probs (T, N, C), targets (N, S) or concatenated (sum of target_lengths,),
    a length per sequence, the loss (N,) for `none` and a scalar otherwise; blank a class where C is known."""
    log_probs = shapes["log_probs"]
    if log_probs is not None and len(log_probs) != 3:
        raise ValueError(NOT_SEQUENCES.format(shape=show(log_probs)))
    batch: Shape = None if log_probs is None else (log_probs[1],)
    classes = None if log_probs is None else log_probs[2]
    if isinstance(classes, int) and not attrs["blank"] < classes:
        raise ValueError(NOT_A_BLANK.format(blank=attrs["blank"], classes=classes))
    loss = batch if attrs["reduction"] == "none" else ()
    for i in op.inputs:
        shape = shapes.get(i.name)
        if shape is None or batch is None:
            continue
        if i.shape == TARGET_SEQUENCES:
            n = batch[0]
            if len(shape) not in (1, 2) or (len(shape) == 2 and isinstance(n, int) and isinstance(shape[0], int)
                                            and shape[0] != n):
                raise ValueError(NOT_TARGET_SEQUENCES.format(input=i.name, shape=show(shape), full=show(batch)))
        elif i.shape in (LENGTHS, LOSS):
            want, message = (batch, NOT_LENGTHS) if i.shape == LENGTHS else (loss, NOT_LOSS)
            try:
                check_equal(shape, want, i.name)
            except ValueError:
                raise ValueError(message.format(input=i.name, shape=show(shape), full=show(want))) from None
    if op.reduces:
        return loss
    return log_probs


def infer(op: OpDef, shapes: dict[str, Shape], attrs: dict) -> Shape:
    """The output shape of `op` for the shapes of its present inputs; ValueError when a rule is broken."""
    if op.classes:
        return infer_classes(op, shapes, attrs)
    if op.sequences:
        return infer_sequences(op, shapes, attrs)
    full = full_shape(op, shapes)
    for i in op.inputs:
        if i.name not in shapes:
            continue
        if i.shape == EXACT:
            check_equal(shapes[i.name], shapes["input"], i.name)
        elif i.shape == FITS:
            check_fits(shapes[i.name], full, i.name)
    if op.reduces and attrs["reduction"] != "none":
        return ()
    return full if op.output_shape == "full" else shapes[op.output_shape]
