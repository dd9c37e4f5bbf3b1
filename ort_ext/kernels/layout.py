"""The PLAN record one kernel call is carried by, and the codes and sizes the engine and its front ends share.

Plain numpy: the ONNX Runtime host and the numpy front end read and fill the record without importing numba,
and the compiled engine (engine.py) reads it as int64 words at the offsets derived here from the dtype.
"""

from __future__ import annotations

import numpy as np

from ...opset.spec import REDUCTIONS, OpDef

TILE = 1024
MAX_RANK = 64  # numpy's limit; ONNX has none, and lossops reports a higher rank as a clear error
MAX_INPUTS = 5
MAX_PARAMS = 4  # an operator's numeric and enum attributes besides `reduction` (OpDef.params)
MESSAGE_BYTES = 2048
NAMES_BYTES = 256  # the operator's and its inputs' names, NUL-separated, for the messages
# An elementwise output at least this large is written with non-temporal stores (x86-64): a plain store first
# reads each line it writes, so a large output costs twice its bytes; below this size an output may still be in
# the writing core's L2 when the next node reads it, so smaller ones are stored as usual (docs/speed.md).
STREAM_BYTES = 2 << 20
# A kernel registered with `prefetch` runs a call whose full operands (those read element by element) hold at least
# PREFETCH_BYTES in steps of STEP_BYTES of each, first asking for the lines AHEAD_BYTES further on (a software
# prefetch): on its own the hardware left those loops' loads waiting on memory; in most loops with exp and log
# the steps' calls cost more than the waits (docs/speed.md). Below PREFETCH_BYTES the data was in cache.
PREFETCH_BYTES = 64 << 20
STEP_BYTES, AHEAD_BYTES = 512, 2048
# A REDUCE call keeps a float64 partial per tile, or per run of tiles where it has more than this many tiles.
MAX_PARTIALS = 1 << 20
# A SUMBACK call splits over tasks (one accumulator of the output's size each) only where every task covers at least
# SUMBACK_SPREAD times the output's elements, and while the accumulators fit in SUMBACK_BYTES.
SUMBACK_SPREAD = 64
SUMBACK_BYTES = 32 << 20

# operand kinds (UNREAD: the loop never reads its data, e.g. KlDivBackward's input, or no such input)
ABSENT, FULL, PERIODIC, GENERAL, UNREAD = 0, 1, 2, 3, 4
# what a call computes
ELEMENTWISE, REDUCE, SUMBACK = 0, 1, 2
# status (then seven of the class losses' rules, kernels/rows.py, and seven of the sequence losses',
# kernels/sequences.py)
(OK, MISSING, WRONG_TYPE, NOT_EXACT, NOT_FITS, NOT_BROADCAST, TOO_MANY_DIMS, TOO_LARGE,
 NOT_CLASSES, NOT_ROWS, NOT_PER_CLASS, NOT_LOSS, NOT_INDICES, BAD_CLASS, BAD_LABEL,
 NOT_SEQUENCES, NOT_TARGET_SEQUENCES, NOT_CONCATENATED, NOT_LENGTHS, BAD_LENGTH, BAD_TARGET, BAD_BLANK) = range(22)
# shape rules, as codes (opset.spec)
RULE_CODES = {"principal": 0, "exact": 1, "fits": 2, "broadcast": 3, "classes": 4, "rows": 5, "per class": 6, "loss": 7,
              "labels": 8, "sequences": 9, "target sequences": 10, "lengths": 11}
_EXACT, _FITS, _BROADCAST, _CLASSES, _ROWS, _PER_CLASS, _LOSS, _LABELS = 1, 2, 3, 4, 5, 6, 7, 8
_SEQUENCES, _TARGET_SEQUENCES, _LENGTHS = 9, 10, 11
# ONNX element types (TensorProto) and their storage in the loops: numba has no float16/bfloat16 scalars
FLOAT, FLOAT16, DOUBLE, BFLOAT16 = 1, 10, 11, 16
INT64 = 7  # the class losses' targets, the sequence losses' targets and lengths
ELEMENT_TYPES = {FLOAT: np.dtype(np.float32), DOUBLE: np.dtype(np.float64), FLOAT16: np.dtype(np.uint16),
                 BFLOAT16: np.dtype(np.int16)}
REDUCTION_CODES = {name: code for code, name in enumerate(REDUCTIONS)}  # aten's and aclnn's codes
_NONE, _MEAN, _BATCHMEAN = REDUCTION_CODES["none"], REDUCTION_CODES["mean"], REDUCTION_CODES["batchmean"]

_i8 = np.int64
OPERAND = np.dtype([
    ("present", _i8), ("kind", _i8), ("address", _i8), ("elem_type", _i8), ("rank", _i8),
    ("period", _i8),  # PERIODIC: element i is the operand's element i % period
    ("ext", _i8),  # PERIODIC: workspace offset of its TILE + period repeated elements
    ("dims", _i8, (MAX_RANK,)),  # the operand's own shape
    ("strides", _i8, (MAX_RANK,)),  # in elements, over the plan's merged dims (0 where broadcast)
])
PLAN = np.dtype([
    ("status", _i8), ("culprit", _i8), ("other", _i8),
    ("elem_type", _i8), ("itemsize", _i8), ("reduction", _i8),
    ("params", np.float64, (MAX_PARAMS,)),  # the operator's parameters (`param_values`), read by its tile
    ("mode", _i8), ("n", _i8), ("ntiles", _i8), ("task_tiles", _i8), ("ntasks", _i8),
    ("chunk", _i8),  # REDUCE: consecutive tiles summed into one partial
    ("scale", np.float64),
    ("out_rank", _i8), ("out_numel", _i8), ("out_address", _i8),
    ("stream", _i8),  # 1: the output is written with non-temporal stores (when its address allows)
    ("prefetch", _i8),  # 1: the call is large enough that a kernel registered with `prefetch` does
    ("workspace", _i8), ("workspace_bytes", _i8), ("partials", _i8), ("accumulator", _i8),
    ("rank", _i8), ("dims", _i8, (MAX_RANK,)),  # F, merged
    # a class loss (kernels/rows.py): its C classes, the elements of one class's plane (d1 * d2 * ...), the
    # kept rows' total weight and the classes' (float64), and the flat index of an out-of-range target
    ("classes", _i8), ("inner", _i8), ("kept", np.float64), ("spread", np.float64), ("bad_at", _i8),
    ("out_dims", _i8, (MAX_RANK,)),
    ("operands", OPERAND, (MAX_INPUTS,)),
    ("op", _i8, (5 + 3 * MAX_INPUTS,)),  # what the plan needs of the operator (`op_description`)
    ("names", np.uint8, (NAMES_BYTES,)),
    ("message", np.uint8, (MESSAGE_BYTES,)),
])
PLAN_BYTES = PLAN.itemsize
PLAN_WORDS = PLAN_BYTES // 8


def _word(dtype: np.dtype, name: str) -> int:
    return dtype.fields[name][1] // 8


_FIELDS = ("status", "culprit", "other", "elem_type", "itemsize", "reduction", "params", "mode", "n", "ntiles",
           "task_tiles", "ntasks", "chunk", "scale", "out_rank", "out_numel", "out_address", "stream", "prefetch",
           "workspace", "workspace_bytes", "partials", "accumulator", "rank", "dims", "classes", "inner", "kept",
           "spread", "bad_at", "out_dims", "operands", "op")
# every field but the bytes, each named: a field added to PLAN and not here fails the import
assert set(_FIELDS) == set(PLAN.names) - {"names", "message"}, set(PLAN.names) ^ set(_FIELDS)
(STATUS, CULPRIT, OTHER, ELEM_TYPE, ITEMSIZE, REDUCTION, PARAMS, MODE, N, NTILES, TASK_TILES, NTASKS, CHUNK, SCALE,
 OUT_RANK, OUT_NUMEL, OUT_ADDRESS, STREAM, PREFETCH, WORKSPACE, WORKSPACE_BYTES, PARTIALS, ACCUMULATOR, RANK, DIMS,
 CLASSES, INNER, KEPT, SPREAD, BAD_AT, OUT_DIMS, OPERANDS, OP) = (_word(PLAN, f) for f in _FIELDS)
NAMES, MESSAGE = PLAN.fields["names"][1], PLAN.fields["message"][1]  # in bytes
# the words of `op`: input count, principal input, reduces, 1 + the input whose shape the output has (0: F),
# tiles per task, then per input slot its shape rule (RULE_CODES), whether it is optional, whether the loop
# reads its data
OP_WORDS = PLAN.fields["op"][0].shape[0]
OP_INPUTS, OP_PRINCIPAL, OP_REDUCES, OP_OUTPUT_INPUT, OP_TASK_TILES = range(5)
OP_ROLES, OP_OPTIONAL, OP_READS = 5, 5 + MAX_INPUTS, 5 + 2 * MAX_INPUTS
OPERAND_WORDS = OPERAND.itemsize // 8
O_PRESENT, O_KIND, O_ADDRESS, O_ELEM_TYPE, O_RANK, O_PERIOD, O_EXT, O_DIMS, O_STRIDES = (
    _word(OPERAND, f) for f in ("present", "kind", "address", "elem_type", "rank", "period", "ext", "dims", "strides"))


# stack buffer sizes (constants: `stack` takes a literal)
_RANK_BYTES = 8 * MAX_RANK
_TILE_BYTES = 8 * TILE
_GATHER_BYTES = 8 * TILE * MAX_INPUTS
_BLOCK_SUMS = TILE // 128
_BLOCK_SUMS_BYTES = 8 * _BLOCK_SUMS
_OPERAND_BYTES = 8 * MAX_INPUTS
_AHEAD_BYTES = 8 * (MAX_INPUTS + 1)
# the stack a thread uses while it runs a task: gathered operands, two compute tiles, a multi-index, views and
# prefetch addresses
TASK_STACK_BYTES = (_GATHER_BYTES + 2 * _TILE_BYTES + _RANK_BYTES + 3 * _OPERAND_BYTES + _AHEAD_BYTES
                    + _BLOCK_SUMS_BYTES)

# A kernel's state (ort_ext/host.py writes it at session creation into C memory ORT frees; the compiled
# `compute` reads it on every run): int64 words, then the parameters as float64.
S_COMPUTE, S_API, S_WORKER, S_ELEM_TYPE, S_ITEMSIZE, S_REDUCTION, S_PARAMS = range(7)
STATE_WORDS = S_PARAMS + MAX_PARAMS


def op_description(op: OpDef, reads: tuple[bool, ...], task_tiles: int) -> np.ndarray:
    """The PLAN's `op` words of an operator whose loop reads the inputs flagged in `reads` (per slot)."""
    pad = MAX_INPUTS - len(op.inputs)
    words = [len(op.inputs), op.principal, op.reduces,
             0 if op.output_input is None else 1 + op.output_input, task_tiles,
             *(RULE_CODES[i.shape] for i in op.inputs), *(0,) * pad,
             *(i.optional for i in op.inputs), *(True,) * pad, *reads]
    return np.array(words, np.int64)


def op_names(op: OpDef) -> np.ndarray:
    """The PLAN's `names` bytes of an operator: its name and its inputs', NUL-separated."""
    text = "\0".join([op.name, *(i.name for i in op.inputs)]) + "\0"
    if len(text.encode()) > NAMES_BYTES:
        raise ValueError(f"{op.name}: its and its inputs' names take {len(text.encode())} bytes; the plan holds "
                         f"{NAMES_BYTES} (layout.NAMES_BYTES)")
    return np.frombuffer(text.encode(), np.uint8).copy()


def param_values(op: OpDef, attrs: dict) -> np.ndarray:
    """The parameters of a call (float64 [MAX_PARAMS]), the same from both front ends: each of `op.params` in
    record order, an enum as its value (an int) or its index among the allowed strings, a float as the float32
    an ONNX FLOAT attribute holds."""
    values = np.zeros(MAX_PARAMS, np.float64)
    for k, a in enumerate(op.params):
        value = attrs[a.name]
        if isinstance(value, str):
            values[k] = a.allowed.index(value)
        else:
            values[k] = np.float32(value) if a.kind is float else value
    return values
