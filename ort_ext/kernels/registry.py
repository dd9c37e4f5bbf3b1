"""The kernels' tile loops, one module per operator (`ops/<operator in snake case>.py`), each attached to its
operator's record with `@kernel`; imported here, so the engine and the compiled entry points find them by name."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ... import opset
from ...opset.registry import module_name
from ...opset.spec import OpDef
from . import layout


@dataclass(frozen=True)
class Kernel:
    """What the engine needs of an operator, all of it fixed when numba compiles the operator's entry points.

    `tile(v0, v1, v2, v3, v4, out, m, scale, params, tmp)` computes `out[:m]` from the operand views (in schema
    order; inputs the loop does not read get a placeholder), `scale` (mean/batchmean factor of a gradient,
    multiplied into grad_output before anything else: a finite answer's factors then cannot overflow),
    `params` (float64: the operator's attributes other than `reduction`, in record order, layout.param_values)
    and `tmp`, a compute-type scratch tile.
    """

    op: OpDef
    tile: Callable
    reads: tuple[bool, ...]  # per input slot (padded to layout.MAX_INPUTS): does the loop read its data
    task_tiles: int  # tiles per task: a task is the unit of work handed to a thread
    rows: bool = False  # a class loss: `tile` is its row function, run by kernels/rows.py
    sequences: bool = False  # a sequence loss: `tile` is its sequence function, run by kernels/sequences.py
    prefetch: bool = False  # a large call runs in steps that prefetch (layout.PREFETCH_BYTES)

    @property
    def description(self) -> np.ndarray:
        """What the engine's plan reads of the operator (the PLAN's `op` words)."""
        return layout.op_description(self.op, self.reads, self.task_tiles)

    @property
    def names(self) -> np.ndarray:
        """The operator's name and its inputs' names, NUL-separated, for the engine's error messages."""
        return layout.op_names(self.op)


KERNELS: dict[str, Kernel] = {}


def _every_input(op: OpDef) -> tuple[bool, ...]:
    return (True,) * len(op.inputs) + (False,) * (layout.MAX_INPUTS - len(op.inputs))


def _registered(op: OpDef, function, slots: tuple[bool, ...], task_elements: int, **engine: bool):
    """`function` registered as the kernel of `op`, reading the inputs `slots` marks, a task about `task_elements`
    elements (whole rows or sequences for those engines)."""
    layout.op_names(op)  # ValueError where the names outgrow the plan's room for them
    KERNELS[op.name] = Kernel(op, function, slots, max(1, task_elements // layout.TILE), **engine)
    return function


def row_kernel(op_name: str, *, task_elements: int):
    """Register the row function of the class loss `op_name` (kernels/rows.py says what it computes); a task
    takes whole rows, about `task_elements` class values."""
    op = opset.get(op_name)
    if not op.classes:
        raise ValueError(f"{op_name}: not a class loss; its kernel is a tile loop (@kernel)")

    def register(row):
        return _registered(op, row, _every_input(op), task_elements, rows=True)

    return register


def sequence_kernel(op_name: str):
    """Register the sequence function of the sequence loss `op_name` (kernels/sequences.py says what it computes);
    a task is one sequence."""
    op = opset.get(op_name)
    if not op.sequences:
        raise ValueError(f"{op_name}: not a sequence loss")

    def register(sequence):
        return _registered(op, sequence, _every_input(op), layout.TILE, sequences=True)

    return register


def kernel(op_name: str, *, reads: tuple[str, ...], task_elements: int, prefetch: bool = False):
    """Register a tile loop as the kernel of `op_name`; it reads the data of the inputs named in `reads`.
    `task_elements` is how much work a thread takes at a time: enough that handing it over costs little
    (measured with `lossops bench`: 64K elements for the memory-bound loops, 16K for those with exp/log).
    `prefetch`: a large call runs in steps that ask for their data ahead (layout.PREFETCH_BYTES), for the loops
    measured faster so: the steps' calls cost the loops with much arithmetic more than the waits they save."""
    op = opset.get(op_name)
    if len(op.params) > layout.MAX_PARAMS:
        raise ValueError(f"{op_name}: {len(op.params)} parameters; the kernels carry at most {layout.MAX_PARAMS} "
                         "(layout.MAX_PARAMS)")

    def register(tile):
        names = [i.name for i in op.inputs]
        unknown = set(reads) - set(names)
        if unknown:
            raise ValueError(f"{op_name}: reads unknown inputs {sorted(unknown)}")
        slots = tuple(n in reads for n in names) + (False,) * (layout.MAX_INPUTS - len(names))
        return _registered(op, tile, slots, task_elements, prefetch=prefetch)

    return register


for _op in opset.OPS:  # an operator with a tile module has a kernel; one without runs as its decomposition
    if importlib.util.find_spec(f"{__package__}.ops.{module_name(_op)}") is not None:
        importlib.import_module(f"{__package__}.ops.{module_name(_op)}")
