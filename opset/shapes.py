"""The shape rules of OPS.md over shapes that may be partly symbolic, read from each input's rule (`spec.py`).

A dim is an int, a str (a symbolic dim such as "batch") or None (unknown); a shape is a tuple of dims, or
None when even the rank is unknown. Functions raise ValueError only when a shape is certainly invalid.
The kernels apply the same rules to concrete shapes in compiled code, and the decompositions guard the
rules that static inference cannot decide; the messages say the same things.
"""

from __future__ import annotations

from .spec import BROADCAST, EXACT, FITS, OpDef

Dim = int | str | None
Shape = tuple[Dim, ...] | None


def show(shape: Shape) -> str:
    if shape is None:
        return "(unknown rank)"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def broadcast(a: Shape, b: Shape, what: str) -> Shape:
    """Multidirectional (numpy) broadcast of a and b."""
    if a is None or b is None:
        return None
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + a
    b = (1,) * (rank - len(b)) + b
    out: list[Dim] = []
    for x, y in zip(a, b, strict=True):
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif isinstance(x, int) and isinstance(y, int):
            raise ValueError(f"{what}: shapes {show(a)} and {show(b)} do not broadcast")
        else:
            out.append(x if isinstance(x, int) else y if isinstance(y, int) else None)
    return tuple(out)


def check_fits(small: Shape, big: Shape, what: str) -> None:
    """`small` must broadcast to exactly `big` (it may not enlarge it)."""
    if small is None or big is None:
        return
    pairs = zip(reversed(small), reversed(big), strict=False)
    if len(small) > len(big) or any(isinstance(s, int) and isinstance(b, int) and s not in (1, b) for s, b in pairs):
        raise ValueError(f"{what} has shape {show(small)}; expected a shape broadcastable to {show(big)}")


def check_equal(a: Shape, b: Shape, what: str) -> None:
    if a is None or b is None:
        return
    same_rank = len(a) == len(b)
    if not same_rank or any(isinstance(x, int) and isinstance(y, int) and x != y for x, y in zip(a, b, strict=False)):
        raise ValueError(f"{what} has shape {show(a)}; expected exactly input's shape {show(b)}")


def full_shape(op: OpDef, shapes: dict[str, Shape]) -> Shape:
    """F: `input`'s shape broadcast with every BROADCAST input (checked)."""
    full = shapes["input"]
    for i in op.inputs:
        if i.shape == BROADCAST and i.name in shapes:
            full = broadcast(full, shapes[i.name], f"inputs 'input' and '{i.name}'")
    return full


def infer(op: OpDef, shapes: dict[str, Shape], attrs: dict) -> Shape:
    """The output shape of `op` for the shapes of its present inputs; ValueError when a rule is broken."""
    full = full_shape(op, shapes)
    for i in op.inputs:
        if i.name not in shapes:
            continue
        if i.shape == EXACT:
            check_equal(shapes[i.name], shapes["input"], f"input '{i.name}'")
        elif i.shape == FITS:
            check_fits(shapes[i.name], full, f"input '{i.name}'")
    if op.reduces and attrs["reduction"] != "none":
        return ()
    return shapes["input"] if op.output_shape == "input" else full
