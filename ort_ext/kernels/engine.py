"""The compiled core every kernel shares: shape rules, operand layouts, tiles, reductions (its error messages:
messages.py).

One call of an operator is carried by a PLAN record in memory the caller owns:

    front end fills the operands (present, address, element type, rank, dims) and the attributes
    plan(op)     describes the operator in the record and calls the planner (one function for every
                 operator), which checks the shapes against the operator's rules (its record's Input.shape),
                 decides the output shape, each operand's layout and the workspace size; or writes an error message
    front end    allocates the output and the workspace
    start(op)    fills the workspace (repeated runs of broadcast operands)
    task(op, i)  computes tiles [i * task_tiles, (i + 1) * task_tiles): any thread, any order
    finish(op)   combines the per-tile (REDUCE) or per-task (SUMBACK) float64 sums in a fixed order; the split
                 into tasks depends on the shapes only, so results do not depend on the thread count

The front ends are ONNX Runtime's (ort_ext/host.py: compiled, reads OrtValues, runs tasks on the session's
intra-op pool) and numpy's (`run` in kernels/__init__.py: serial). Each operator supplies only its tile loop
(`kernels/<operator>.py`); `op` is its name as a literal, resolved when numba compiles.

Layouts. The shape F the operator computes over is merged: adjacent dims collapse where every operand is
contiguous (or broadcast) across both, so most calls have one or two dims. Each operand is then FULL (a
contiguous slice per tile), PERIODIC (element i is a[i % P] with P <= TILE: a per-class weight, a scalar, an
absent input meaning 1; read from a run of TILE + P copies made once per call) or GENERAL (gathered per
tile, a segment at a time). Tiles are TILE elements, so a tile's operands and temporaries stay in L1.

The record is one numpy structured dtype (PLAN); the compiled code reads it as int64 words at offsets taken
from that dtype (numba compiles nested records by value, which made LLVM's optimiser run for minutes).
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from numba import types
from numba.extending import overload

from .halves import store_rounded
from .layout import (  # noqa: F401 (the record's names, re-exported for the front ends' and tests' use)
    _AHEAD_BYTES,
    _BATCHMEAN,
    _BLOCK_SUMS,
    _BLOCK_SUMS_BYTES,
    _BROADCAST,
    _EXACT,
    _FITS,
    _GATHER_BYTES,
    _MEAN,
    _NONE,
    _OPERAND_BYTES,
    _RANK_BYTES,
    _TILE_BYTES,
    ABSENT,
    ACCUMULATOR,
    AHEAD_BYTES,
    BFLOAT16,
    CHUNK,
    CULPRIT,
    DIMS,
    DOUBLE,
    ELEM_TYPE,
    ELEMENT_TYPES,
    ELEMENTWISE,
    FLOAT,
    FLOAT16,
    FULL,
    GENERAL,
    ITEMSIZE,
    MAX_INPUTS,
    MAX_PARAMS,
    MAX_PARTIALS,
    MAX_RANK,
    MESSAGE,
    MESSAGE_BYTES,
    MISSING,
    MODE,
    NAMES,
    NAMES_BYTES,
    NOT_BROADCAST,
    NOT_EXACT,
    NOT_FITS,
    NTASKS,
    NTILES,
    O_ADDRESS,
    O_DIMS,
    O_ELEM_TYPE,
    O_EXT,
    O_KIND,
    O_PERIOD,
    O_PRESENT,
    O_RANK,
    O_STRIDES,
    OK,
    OP,
    OP_INPUTS,
    OP_OPTIONAL,
    OP_OUTPUT_INPUT,
    OP_PRINCIPAL,
    OP_READS,
    OP_REDUCES,
    OP_ROLES,
    OP_TASK_TILES,
    OP_WORDS,
    OPERAND,
    OPERAND_WORDS,
    OPERANDS,
    OTHER,
    OUT_ADDRESS,
    OUT_DIMS,
    OUT_NUMEL,
    OUT_RANK,
    PARAMS,
    PARTIALS,
    PERIODIC,
    PLAN,
    PLAN_BYTES,
    PLAN_WORDS,
    PREFETCH,
    PREFETCH_BYTES,
    RANK,
    REDUCE,
    REDUCTION,
    REDUCTION_CODES,
    RULE_CODES,
    SCALE,
    STATUS,
    STEP_BYTES,
    STREAM,
    STREAM_BYTES,
    SUMBACK,
    SUMBACK_BYTES,
    SUMBACK_SPREAD,
    TASK_TILES,
    TILE,
    TOO_LARGE,
    TOO_MANY_DIMS,
    UNREAD,
    WORKSPACE,
    WORKSPACE_BYTES,
    WRONG_TYPE,
    N,
)
from .messages import describe, put, put_int  # noqa: F401 (put, put_int: for compiled.py)
from .native import call_planner, prefetch, stack, store_fence, stream_copy, streams, view

_jit = numba.njit(error_model="numpy", nogil=True)  # cached only inside the entry points (cache.py)


@_jit
def _operand(j):
    """The word offset of operand j's fields."""
    return OPERANDS + j * OPERAND_WORDS


# --- planning -----------------------------------------------------------------------------------------------

@_jit
def planner(address):
    """Check the operands against the operator's rules and lay the call out. Returns the status. The operator
    is described in the record (its `op` words and `names`, written by its `plan` entry point), not compiled
    in: one planner serves every operator, so its code is compiled once, not once per operator."""
    w = view(address, PLAN_WORDS, np.int64)
    names = view(address + NAMES, NAMES_BYTES, np.uint8)
    n_inputs, principal, task_tiles = w[OP + OP_INPUTS], w[OP + OP_PRINCIPAL], w[OP + OP_TASK_TILES]
    reduces, output_input = w[OP + OP_REDUCES] != 0, w[OP + OP_OUTPUT_INPUT]
    roles = w[OP + OP_ROLES:OP + OP_ROLES + MAX_INPUTS]
    optional = w[OP + OP_OPTIONAL:OP + OP_OPTIONAL + MAX_INPUTS]
    reads = w[OP + OP_READS:OP + OP_READS + MAX_INPUTS]
    full = view(stack(_RANK_BYTES), MAX_RANK, np.int64)
    for j in range(n_inputs):
        a = _operand(j)
        if not w[a + O_PRESENT]:
            w[a + O_KIND] = ABSENT
            if not optional[j]:
                w[STATUS], w[CULPRIT], w[OTHER], w[RANK] = MISSING, j, 0, 0
                return describe(w, address, names, full)
            continue
        if w[a + O_RANK] > MAX_RANK:  # the front end read no dims then: the message gives the rank only
            w[STATUS], w[CULPRIT], w[OTHER], w[RANK] = TOO_MANY_DIMS, j, 0, 0
            return describe(w, address, names, full)
        if w[a + O_ELEM_TYPE] != w[ELEM_TYPE]:
            w[STATUS], w[CULPRIT], w[OTHER], w[RANK] = WRONG_TYPE, j, 0, 0
            return describe(w, address, names, full)
    s = _operand(principal)
    s_rank = w[s + O_RANK]
    s_dims = w[s + O_DIMS:s + O_DIMS + MAX_RANK]
    rank = s_rank
    for d in range(rank):
        full[d] = s_dims[d]
    for j in range(n_inputs):  # F: input's shape broadcast with the BROADCAST inputs
        a = _operand(j)
        if not w[a + O_PRESENT] or roles[j] != _BROADCAST:
            continue
        a_rank = w[a + O_RANK]
        new_rank = max(rank, a_rank)
        for d in range(new_rank - 1, -1, -1):
            fd = full[d - (new_rank - rank)] if d >= new_rank - rank else 1
            ad = w[a + O_DIMS + d - (new_rank - a_rank)] if d >= new_rank - a_rank else 1
            if fd != ad and fd != 1 and ad != 1:
                w[STATUS], w[CULPRIT], w[OTHER], w[RANK] = NOT_BROADCAST, principal, j, rank
                return describe(w, address, names, full)
            full[d] = ad if fd == 1 else fd
        rank = new_rank
    for j in range(n_inputs):
        a = _operand(j)
        if not w[a + O_PRESENT]:
            continue
        a_rank = w[a + O_RANK]
        if roles[j] == _EXACT:
            same = a_rank == s_rank
            for d in range(min(a_rank, s_rank)):
                same = same and w[a + O_DIMS + d] == s_dims[d]
            if not same:
                w[STATUS], w[CULPRIT], w[OTHER], w[RANK] = NOT_EXACT, j, 0, s_rank
                return describe(w, address, names, s_dims)
        elif roles[j] == _FITS:
            fits = a_rank <= rank
            for d in range(min(a_rank, rank)):
                ad = w[a + O_DIMS + a_rank - 1 - d]
                fits = fits and (ad == 1 or ad == full[rank - 1 - d])
            if not fits:
                w[STATUS], w[CULPRIT], w[OTHER], w[RANK] = NOT_FITS, j, 0, rank
                return describe(w, address, names, full)
    n = 1
    empty = False
    for d in range(rank):
        empty = empty or full[d] == 0
    if not empty:
        for d in range(rank):
            if full[d] > (1 << 62) // n:
                w[STATUS], w[CULPRIT], w[OTHER], w[RANK] = TOO_LARGE, 0, 0, rank
                return describe(w, address, names, full)
            n *= full[d]
    w[N] = 0 if empty else n

    # the output: a scalar loss, an input's shape (its gradient: summed back where F is larger), or F
    if reduces and w[REDUCTION] != _NONE:
        w[MODE], w[OUT_RANK] = REDUCE, 0
    elif output_input:
        o = _operand(output_input - 1)
        o_rank = w[o + O_RANK]
        same = rank == o_rank
        for d in range(o_rank):
            same = same and full[d] == w[o + O_DIMS + d]
            w[OUT_DIMS + d] = w[o + O_DIMS + d]
        w[MODE], w[OUT_RANK] = ELEMENTWISE if same else SUMBACK, o_rank
    else:
        w[MODE], w[OUT_RANK] = ELEMENTWISE, rank
        for d in range(rank):
            w[OUT_DIMS + d] = full[d]
    out_numel = 1
    for d in range(w[OUT_RANK]):
        out_numel *= w[OUT_DIMS + d]
    w[OUT_NUMEL] = out_numel
    w[STREAM] = streams() and w[MODE] == ELEMENTWISE and out_numel * w[ITEMSIZE] >= STREAM_BYTES

    # gradients scale elementwise; losses divide their total in finish
    scale = 1.0
    if not reduces:
        if w[REDUCTION] == _MEAN and w[N] > 0:
            scale = 1.0 / w[N]
        elif w[REDUCTION] == _BATCHMEAN and s_rank > 0 and s_dims[0] > 0:
            scale = 1.0 / s_dims[0]
    view(address, PLAN_WORDS, np.float64)[SCALE] = scale

    _lay_out(w, full, rank, n_inputs)
    for j in range(MAX_INPUTS):
        if not reads[j]:
            w[_operand(j) + O_KIND] = UNREAD
    # The split into tasks depends on the shapes only, never on the thread count, so neither do the sums.
    ntiles = (w[N] + TILE - 1) // TILE
    chunk = 1  # REDUCE: tiles per partial sum; more than 1 only where per-tile partials would outgrow MAX_PARTIALS
    if w[MODE] == REDUCE and ntiles > MAX_PARTIALS:
        chunk = (ntiles + MAX_PARTIALS - 1) // MAX_PARTIALS
        task_tiles = (task_tiles + chunk - 1) // chunk * chunk  # a partial belongs to one task
    ntasks = (ntiles + task_tiles - 1) // task_tiles
    if w[MODE] == SUMBACK and ntasks > 1:
        # Each task sums into an accumulator of its own, added in task order by finish: more than one only where
        # every task covers SUMBACK_SPREAD times the output (the accumulators cost zeroing and adding) and they fit
        # in SUMBACK_BYTES.
        most = min(w[N] // (SUMBACK_SPREAD * out_numel), SUMBACK_BYTES // (8 * out_numel))
        ntasks = max(1, min(ntasks, most))
        task_tiles = (ntiles + ntasks - 1) // ntasks
        ntasks = (ntiles + task_tiles - 1) // task_tiles
    w[NTILES], w[TASK_TILES], w[NTASKS], w[CHUNK] = ntiles, task_tiles, ntasks, chunk
    full_bytes = 0
    for j in range(n_inputs):
        if w[_operand(j) + O_KIND] == FULL:
            full_bytes += w[N] * w[ITEMSIZE]
    w[PREFETCH] = full_bytes >= PREFETCH_BYTES and full_bytes > 0

    nbytes = 0
    for j in range(n_inputs):
        a = _operand(j)
        if w[a + O_KIND] == PERIODIC or w[a + O_KIND] == ABSENT:
            w[a + O_EXT] = nbytes
            nbytes += ((TILE + w[a + O_PERIOD]) * w[ITEMSIZE] + 63) // 64 * 64
    w[PARTIALS] = nbytes
    if w[MODE] == REDUCE:
        nbytes += 8 * max((ntiles + chunk - 1) // chunk, 1)
    w[ACCUMULATOR] = nbytes
    if w[MODE] == SUMBACK:
        nbytes += 8 * out_numel * max(ntasks, 1)
    w[WORKSPACE_BYTES] = nbytes
    w[STATUS] = OK
    return OK


@_jit
def _lay_out(w, full, rank, n_inputs):
    """Strides of every operand over F, then adjacent dims merged where all operands allow it, then each
    operand's kind. An absent operand is PERIODIC with period 1 (its run holds ones)."""
    for j in range(n_inputs):
        a = _operand(j)
        if not w[a + O_PRESENT]:
            w[a + O_PERIOD] = 1
            continue
        a_rank = w[a + O_RANK]
        own = 1
        for d in range(rank - 1, -1, -1):  # right-aligned: the operand's dim d - (rank - a_rank)
            od = d - (rank - a_rank)
            if od < 0 or (w[a + O_DIMS + od] == 1 and full[d] != 1):
                w[a + O_STRIDES + d] = 0
            else:
                w[a + O_STRIDES + d] = own
            if od >= 0:
                own *= w[a + O_DIMS + od]
    merged = 0  # dims of extent 1 go; a dim joins the previous (outer) one where every stride allows it
    for d in range(rank):
        if full[d] == 1:
            continue
        joins = merged > 0
        for j in range(n_inputs):
            a = _operand(j)
            if joins and w[a + O_PRESENT] and w[a + O_STRIDES + merged - 1] != w[a + O_STRIDES + d] * full[d]:
                joins = False
        target = merged - 1 if joins else merged
        w[DIMS + target] = w[DIMS + target] * full[d] if joins else full[d]
        for j in range(n_inputs):
            a = _operand(j)
            if w[a + O_PRESENT]:
                w[a + O_STRIDES + target] = w[a + O_STRIDES + d]
        if not joins:
            merged += 1
    if merged == 0:  # F has one element
        w[DIMS] = 1
        for j in range(n_inputs):
            w[_operand(j) + O_STRIDES] = 0
        merged = 1
    w[RANK] = merged
    for j in range(n_inputs):
        a = _operand(j)
        if not w[a + O_PRESENT]:
            continue
        # FULL: F's own contiguous strides. PERIODIC: those strides on a run of inner dims (the period) and 0
        # on every dim outside it. Anything else is GENERAL.
        contiguous = 1
        full_layout = True
        periodic = True
        in_tail = True
        period = 1
        for d in range(merged - 1, -1, -1):
            stride = w[a + O_STRIDES + d]
            if stride != contiguous:
                full_layout = False
            if in_tail and stride == contiguous:
                period *= w[DIMS + d]
            else:
                in_tail = False
                periodic = periodic and stride == 0
            contiguous *= w[DIMS + d]
        if full_layout:
            w[a + O_KIND] = FULL
        elif periodic and period <= TILE:
            w[a + O_KIND], w[a + O_PERIOD] = PERIODIC, period
        else:
            w[a + O_KIND] = GENERAL


# --- the tile loop ------------------------------------------------------------------------------------------

@_jit
def _walk_start(w, a, lo, index):
    """index <- the multi-index of flat element lo of F (merged); returns operand a's element offset."""
    offset = 0
    rest = lo
    for d in range(w[RANK] - 1, -1, -1):
        q = rest // w[DIMS + d]
        index[d] = rest - q * w[DIMS + d]
        rest = q
        offset += index[d] * w[a + O_STRIDES + d]
    return offset


@_jit
def _walk_carry(w, a, index, offset):
    """After the innermost index reached its extent: carry into the outer dims; returns the new offset."""
    last = w[RANK] - 1
    offset -= w[DIMS + last] * w[a + O_STRIDES + last]
    index[last] = 0
    for d in range(last - 1, -1, -1):
        index[d] += 1
        offset += w[a + O_STRIDES + d]
        if index[d] < w[DIMS + d]:
            break
        offset -= w[DIMS + d] * w[a + O_STRIDES + d]
        index[d] = 0
    return offset


@_jit
def _gather(w, a, lo, m, dst, dtype):
    """dst[:m] = operand a's elements for flat indices [lo, lo + m) of F, a segment at a time."""
    index = view(stack(_RANK_BYTES), MAX_RANK, np.int64)
    last = w[RANK] - 1
    offset = _walk_start(w, a, lo, index)
    inner, step = w[DIMS + last], w[a + O_STRIDES + last]
    k = 0
    while k < m:
        run = min(inner - index[last], m - k)
        src = view(w[a + O_ADDRESS] + offset * w[ITEMSIZE], max(run * step, 1), dtype)
        if step == 0:
            value = src[0]
            for t in range(run):
                dst[k + t] = value
        else:
            for t in range(run):
                dst[k + t] = src[t * step]
        k += run
        offset += run * step
        index[last] += run
        if index[last] == inner and k < m:
            offset = _walk_carry(w, a, index, offset)


@_jit
def _scatter_add(w, a, lo, m, values, acc):
    """acc[offset of flat element i in operand a's layout] += values[i - lo]: the sum back over broadcast axes."""
    index = view(stack(_RANK_BYTES), MAX_RANK, np.int64)
    last = w[RANK] - 1
    offset = _walk_start(w, a, lo, index)
    inner, step = w[DIMS + last], w[a + O_STRIDES + last]
    k = 0
    while k < m:
        run = min(inner - index[last], m - k)
        if step == 0:  # one output element's run of terms, summed as a reduction's tile: added one after
            # another, equal terms (a saturated gradient's) drift by up to run / 2 roundings
            acc[offset] += tile_sum(values, k, run)
        else:
            for t in range(run):
                acc[offset + t * step] += values[k + t]
        k += run
        offset += run * step
        index[last] += run
        if index[last] == inner and k < m:
            offset = _walk_carry(w, a, index, offset)


@numba.njit(error_model="numpy", nogil=True, fastmath={"reassoc"})
def tile_sum(values, first, m):
    """Sum of values[first:first + m] (m <= TILE) in float64, reassociation allowed so that LLVM sums in vector
    lanes. float32 terms (every narrower type computes in float32) in one run: any order of m float64 additions
    is off by at most m units of 2**-53 of the terms' magnitude, below 1e-13 relative, where the result's own
    rounding to float32 is 6e-8 (a second pass in blocks of 128 cost float32 losses 0.06 ns per element).
    float64 terms, whose sum has no wider type: each block of 128 in lanes, then the blocks pairwise, an error
    of O(log m) roundings like numpy's sum."""
    if values.itemsize < 8:
        whole = 0.0
        for k in range(first, first + m):
            whole += np.float64(values[k])
        return whole
    sums = view(stack(_BLOCK_SUMS_BYTES), _BLOCK_SUMS, np.float64)
    blocks = 0
    for lo in range(first, first + m, 128):
        total = 0.0
        for k in range(lo, min(first + m, lo + 128)):
            total += values[k]
        sums[blocks] = total
        blocks += 1
    return pairwise(sums, blocks)


@_jit
def pairwise(values, n):
    """Sum of values[:n] by pairwise addition in place, in a fixed order."""
    if n == 0:
        return 0.0
    width = 1
    while width < n:
        for i in range(0, n - width, 2 * width):
            values[i] += values[i + width]
        width *= 2
    return values[0]


@functools.cache
def _task_for(op_name: str):
    """The task function of one operator: its tile loop is called directly (passed as a value, a compiled
    function becomes a "dynamic global" and numba will not cache its caller)."""
    from .registry import KERNELS

    tile = KERNELS[op_name].tile

    stepped = KERNELS[op_name].prefetch  # a constant where numba compiles `run`

    # inlined into `task` by numba: called, its arrays passed as arguments cost up to a third of a float16 tile
    @numba.njit(error_model="numpy", nogil=True, inline="always")
    def run(v0, v1, v2, v3, v4, out, m, scale, params, tmp, ahead):
        """The tile loop over m elements: at once, or where the kernel prefetches and `ahead` holds the addresses
        AHEAD_BYTES on in the tile's FULL operands (0 for the others; its last word, the item size: 0 where the
        call is too small), in steps of STEP_BYTES, each first asking for the lines of the same step ahead."""
        itemsize = ahead[MAX_INPUTS]
        if not stepped or itemsize == 0:
            tile(v0, v1, v2, v3, v4, out, m, scale, params, tmp)
            return
        step = STEP_BYTES // itemsize
        for s in range(0, m, step):
            for j in range(MAX_INPUTS):
                if ahead[j] != 0:
                    for line in range(ahead[j] + s * itemsize, ahead[j] + s * itemsize + STEP_BYTES, 64):
                        prefetch(line)
            e = min(m, s + step)
            tile(v0[s:e], v1[s:e], v2[s:e], v3[s:e], v4[s:e], out[s:e], e - s, scale, params, tmp)

    @_jit
    def task(address, i, principal, dtype, compute):
        w = view(address, PLAN_WORDS, np.int64)
        first = i * w[TASK_TILES]
        last = min(w[NTILES], first + w[TASK_TILES])
        # This thread's temporaries, on its stack: gathered operands, a scratch tile, a compute-type result.
        buffers = stack(_GATHER_BYTES)
        tmp = view(stack(_TILE_BYTES), TILE, compute)
        staged = stack(_TILE_BYTES)  # a REDUCE or SUMBACK tile's values; a streamed output tile before its store
        result = view(staged, TILE, compute)
        # Operand j of a tile starting at lo is origin[j] + (lo % period[j]) elements: FULL has period n, a
        # PERIODIC run its period, a gathered one its buffer with period 1. One formula for every kind keeps
        # per-operand branches out of the tile loop (and copies of the operator's loop out of the code).
        origin = view(stack(_OPERAND_BYTES), MAX_INPUTS, np.int64)
        period = view(stack(_OPERAND_BYTES), MAX_INPUTS, np.int64)
        gathers = False
        # the prefetch addresses of a tile's FULL operands, then the item size (0: the tile at once)
        ahead = view(stack(_AHEAD_BYTES), MAX_INPUTS + 1, np.int64)
        full = view(stack(_OPERAND_BYTES), MAX_INPUTS, np.int64)
        prefetching = stepped and w[PREFETCH] != 0
        ahead[MAX_INPUTS] = w[ITEMSIZE] if prefetching else 0
        for j in range(MAX_INPUTS):
            a = _operand(j)
            kind = w[a + O_KIND]
            full[j] = kind == FULL
            if kind == FULL:
                origin[j], period[j] = w[a + O_ADDRESS], max(w[N], 1)
            elif kind == PERIODIC or kind == ABSENT:
                origin[j], period[j] = w[WORKSPACE] + w[a + O_EXT], w[a + O_PERIOD]
            else:
                origin[j], period[j] = buffers + j * _TILE_BYTES, 1
                gathers = gathers or kind == GENERAL
        scale = compute(view(address, PLAN_WORDS, np.float64)[SCALE])
        mode, n, itemsize = w[MODE], w[N], w[ITEMSIZE]
        params = view(address + 8 * PARAMS, MAX_PARAMS, np.float64)
        # ORT's buffers are 64-byte aligned, numpy's may not be; `streams()` folds the path away where it is false
        streamed = streams() and w[STREAM] != 0 and w[OUT_ADDRESS] % 32 == 0
        acc = view(w[WORKSPACE] + w[ACCUMULATOR] + 8 * i * w[OUT_NUMEL], w[OUT_NUMEL], np.float64)
        if mode == SUMBACK:  # this task's own accumulator
            for k in range(acc.size):
                acc[k] = 0.0
        for t in range(first, last):
            lo = t * TILE
            m = min(TILE, n - lo)
            if gathers:
                for j in range(MAX_INPUTS):
                    a = _operand(j)
                    if w[a + O_KIND] == GENERAL:
                        _gather(w, a, lo, m, view(buffers + j * _TILE_BYTES, m, dtype), dtype)
            v0 = view(origin[0] + (lo % period[0]) * itemsize, m, dtype)
            v1 = view(origin[1] + (lo % period[1]) * itemsize, m, dtype)
            v2 = view(origin[2] + (lo % period[2]) * itemsize, m, dtype)
            v3 = view(origin[3] + (lo % period[3]) * itemsize, m, dtype)
            v4 = view(origin[4] + (lo % period[4]) * itemsize, m, dtype)
            if prefetching:
                there = lo * itemsize + AHEAD_BYTES
                for j in range(MAX_INPUTS):
                    ahead[j] = origin[j] + there if full[j] and there < n * itemsize else 0
            if mode == ELEMENTWISE:
                out = w[OUT_ADDRESS] + lo * itemsize
                if streamed:  # computed into L1, then streamed out (TILE * itemsize keeps `out` 32-byte aligned)
                    run(v0, v1, v2, v3, v4, view(staged, m, dtype), m, scale, params, tmp, ahead)
                    stream_copy(out, staged, m * itemsize)
                else:
                    run(v0, v1, v2, v3, v4, view(out, m, dtype), m, scale, params, tmp, ahead)
                continue
            run(v0, v1, v2, v3, v4, result, m, scale, params, tmp, ahead)
            if mode == REDUCE:
                chunk = w[CHUNK]
                partials = view(w[WORKSPACE] + w[PARTIALS], (w[NTILES] + chunk - 1) // chunk, np.float64)
                if t % chunk == 0:
                    partials[t // chunk] = tile_sum(result, 0, m)
                else:
                    partials[t // chunk] += tile_sum(result, 0, m)
            else:
                _scatter_add(w, _operand(w[OP + OP_OUTPUT_INPUT] - 1), lo, m, result, acc)
        if streamed:
            store_fence()

    return task


@_jit
def _start(address, _task, n_inputs, dtype, _compute):
    w = view(address, PLAN_WORDS, np.int64)
    for j in range(n_inputs):
        a = _operand(j)
        kind, period = w[a + O_KIND], w[a + O_PERIOD]
        if kind != PERIODIC and kind != ABSENT:
            continue
        # A tile of m <= min(n, TILE) elements reads m consecutive ones from offset lo % period.
        run = view(w[WORKSPACE] + w[a + O_EXT], min(w[N], TILE) + period, dtype)
        if kind == ABSENT:
            store_rounded(run, 0, 1.0)  # an absent weight means 1
        else:  # the period is contiguous in the operand's memory, in F's order
            src = view(w[a + O_ADDRESS], period, dtype)
            for k in range(period):
                run[k] = src[k]
        filled = period
        while filled < run.size:  # double the filled prefix: independent copies (one period at a time was slower)
            step = min(filled, run.size - filled)
            for k in range(step):
                run[filled + k] = run[k]
            filled += step


@_jit
def _finish(address, _task, principal, dtype, _compute):
    w = view(address, PLAN_WORDS, np.int64)
    out = view(w[OUT_ADDRESS], w[OUT_NUMEL], dtype)
    if w[MODE] == REDUCE:
        nparts = (w[NTILES] + w[CHUNK] - 1) // w[CHUNK]
        total = pairwise(view(w[WORKSPACE] + w[PARTIALS], max(nparts, 1), np.float64), nparts)
        s = _operand(principal)
        if w[REDUCTION] == _MEAN:
            total = total / w[N]  # 0/0 for an empty input: NaN, as PyTorch
        elif w[REDUCTION] == _BATCHMEAN and w[s + O_RANK] > 0:
            total = total / w[s + O_DIMS]  # PyTorch divides by input's first dimension; not at all at rank 0
        store_rounded(out, 0, total)
    elif w[MODE] == SUMBACK:  # the tasks' accumulators, added in task order
        numel = w[OUT_NUMEL]
        acc = view(w[WORKSPACE] + w[ACCUMULATOR], numel * max(w[NTASKS], 1), np.float64)
        for k in range(numel):
            total = 0.0
            for i in range(w[NTASKS]):
                total += acc[i * numel + k]
            store_rounded(out, k, total)


# --- the entry points, per operator (resolved at compile time from the literal operator name) --------------

def plan(op, address):
    """Check and lay out the call whose PLAN record is at `address`; returns its status (0: ok)."""


def start(op, address, elem=None):
    """Prepare the workspace of a planned call (after the front end allocated output and workspace). `elem`, a
    literal element type, compiles that type's code only; without it the plan's type is dispatched at run time."""


def task(op, address, i, elem=None):
    """Compute task i of a started call (`elem`: as `start`)."""


def finish(op, address, elem=None):
    """Write the reduced or summed-back output of a call whose tasks are all done (`elem`: as `start`)."""


def _kernel(op):
    from .registry import KERNELS

    return KERNELS[op.literal_value] if isinstance(op, types.StringLiteral) else None


@overload(plan, prefer_literal=True)
def _plan_impl(op, address):
    k = _kernel(op)
    if k is None:
        return None
    description, names = k.description, k.names
    if k.rows:
        from . import rows

        def rows_impl(op, address):  # the class losses' planner, compiled in (it is small)
            _describe(address, description, names)
            return rows.planner(address)

        return rows_impl
    if k.sequences:
        from . import sequences

        def sequences_impl(op, address):  # the sequence losses' planner, compiled in (it is small)
            _describe(address, description, names)
            return sequences.planner(address)

        return sequences_impl

    def impl(op, address):  # describes the operator in the record, then calls the planner by its symbol
        _describe(address, description, names)
        return call_planner(address)

    return impl


@_jit
def _describe(address, description, names):
    """The operator's words and names, written into the record for the planner."""
    w = view(address, PLAN_WORDS, np.int64)
    for i in range(OP_WORDS):
        w[OP + i] = description[i]
    b = view(address + NAMES, NAMES_BYTES, np.uint8)
    for i in range(len(names)):
        b[i] = names[i]


def _by_element_type(step, value, only=None):
    """A compiled call(address, i) of step(address, i, value, storage, compute) at the plan's element type: its
    storage in the loops (numba has no float16/bfloat16 scalars: their bits) and the type it computes in.
    `only`: that element type alone (the plan's is then not read), so numba compiles one type's loops, not four."""
    types_ = {FLOAT: (np.float32, np.float32), DOUBLE: (np.float64, np.float64), FLOAT16: (np.uint16, np.float32),
              BFLOAT16: (np.int16, np.float32)}
    if only is not None:
        storage, compute = types_[only]

        @_jit
        def one(address, i):
            step(address, i, value, storage, compute)

        return one

    @_jit
    def call(address, i):
        e = view(address, PLAN_WORDS, np.int64)[ELEM_TYPE]
        if e == FLOAT:
            step(address, i, value, np.float32, np.float32)
        elif e == DOUBLE:
            step(address, i, value, np.float64, np.float64)
        elif e == FLOAT16:
            step(address, i, value, np.uint16, np.float32)
        else:
            step(address, i, value, np.int16, np.float32)

    return call


def _steps(k):
    """(start, task, finish) of a kernel: the tile engine's, the class losses' (rows.py) or the sequence losses'
    (sequences.py)."""
    if k.rows:
        from . import rows

        return rows.start, rows.task_for(k.op.name), rows.finish
    if k.sequences:
        from . import sequences

        return sequences.start, sequences.task_for(k.op.name), sequences.finish
    return _start, _task_for(k.op.name), _finish


def _literal(elem):
    """The element type an entry point is compiled for: an integer literal, or None (every type)."""
    return elem.literal_value if isinstance(elem, types.IntegerLiteral) else None


@overload(start, prefer_literal=True)
def _start_impl(op, address, elem=None):
    k = _kernel(op)
    if k is None:
        return None
    call = _by_element_type(_steps(k)[0], len(k.op.inputs), _literal(elem))
    return lambda op, address, elem=None: call(address, 0)


@overload(task, prefer_literal=True)
def _task_impl(op, address, i, elem=None):
    k = _kernel(op)
    if k is None:
        return None
    call = _by_element_type(_steps(k)[1], k.op.principal, _literal(elem))
    return lambda op, address, i, elem=None: call(address, i)


@overload(finish, prefer_literal=True)
def _finish_impl(op, address, elem=None):
    k = _kernel(op)
    if k is None:
        return None
    call = _by_element_type(_steps(k)[2], k.op.principal, _literal(elem))
    return lambda op, address, elem=None: call(address, 0)
