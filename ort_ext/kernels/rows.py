"""The engine of the class losses (CrossEntropyLoss, NLLLoss, SoftTargetCrossEntropyLoss, MultilabelMarginLoss and
their gradients): a call is computed a row at a time, a row being one (n, d1, ...) position of `input`
(N, C, d1, ...) with its C class values, `inner` = d1 * d2 * ... elements apart in memory (1 for (N, C)). A target
is a class index per row, or a row of C values laid out as the logits' (no row is ignored then): probabilities
(SoftTargetCrossEntropyLoss) or a label list (MultilabelMarginLoss).

It follows engine.py's steps on the same PLAN record (layout.py) and front ends:

    plan     checks the operands against the class rules (opset/spec.py: classes, rows, per class, loss, exact,
             labels) and every class index against [0, C) or ignore_index (a label list's values against [-1, C)),
             before anything is allocated: a bad target is an error naming the operator and the input, never a read
             out of bounds
    start    sums the weights: the kept rows' total (a mean's divisor; the rows' number for probabilities) and the
             classes' (label smoothing's)
    task     rows [i * rows_per_task, ...): the operator's row function on each row not ignored
    finish   a loss: the tasks' float64 sums, added in task order, divided by the kept rows' weight for `mean`

Each operator supplies its row function (`ops/<operator>.py`, registered with `@row_kernel`), written with the
passes below: the sum of exponentials (float64) shifted by the target's logit, one pass over the row in the
common case (`row_exp_sum`), so that the log-sum-exp and the softmax are read from the logits once and a
gradient row is written once, with nothing of (N, C) kept.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from numba import types
from numba.extending import overload

from ...opset.spec import EXACT, LABELS
from .halves import load, store, store_rounded
from .layout import (
    _CLASSES,
    _EXACT,
    _LABELS,
    _LOSS,
    _MEAN,
    _NONE,
    _PER_CLASS,
    _RANK_BYTES,
    _ROWS,
    ABSENT,
    BAD_AT,
    BAD_CLASS,
    BAD_LABEL,
    CLASSES,
    CULPRIT,
    ELEM_TYPE,
    ELEMENTWISE,
    FULL,
    INNER,
    INT64,
    ITEMSIZE,
    KEPT,
    MAX_INPUTS,
    MAX_PARAMS,
    MAX_PARTIALS,
    MAX_RANK,
    MISSING,
    MODE,
    NAMES,
    NAMES_BYTES,
    NOT_CLASSES,
    NOT_EXACT,
    NOT_INDICES,
    NOT_LOSS,
    NOT_PER_CLASS,
    NOT_ROWS,
    NTASKS,
    NTILES,
    O_ADDRESS,
    O_DIMS,
    O_ELEM_TYPE,
    O_KIND,
    O_PRESENT,
    O_RANK,
    OK,
    OP,
    OP_INPUTS,
    OP_OPTIONAL,
    OP_REDUCES,
    OP_ROLES,
    OP_TASK_TILES,
    OPERAND_WORDS,
    OPERANDS,
    OTHER,
    OUT_ADDRESS,
    OUT_DIMS,
    OUT_NUMEL,
    OUT_RANK,
    PARAMS,
    PARTIALS,
    PLAN_WORDS,
    PREFETCH,
    RANK,
    REDUCE,
    REDUCTION,
    SCALE,
    SPREAD,
    STATUS,
    STREAM,
    TASK_TILES,
    TILE,
    TOO_LARGE,
    TOO_MANY_DIMS,
    WORKSPACE,
    WORKSPACE_BYTES,
    WRONG_TYPE,
    N,
)
from .mathf import exp
from .messages import describe
from .native import select, stack, view

_jit = numba.njit(error_model="numpy", nogil=True)
# The sums over a row: reassociation lets LLVM sum in vector lanes (a float64 sum of float32 terms is off by
# far less than the result's own rounding).
_sum_jit = numba.njit(error_model="numpy", nogil=True, fastmath={"reassoc"})

# where the planner keeps the operand each class rule names
_X, _T, _W, _G = 0, 1, 2, 3
_WHICH_BYTES = 8 * MAX_INPUTS  # a constant: `stack` takes a literal


@_jit
def _operand(j):
    return OPERANDS + j * OPERAND_WORDS


# --- the passes a row function is written with ------------------------------------------------------------

@_jit
def row_max(x, s, c):
    """max over the row's c values x[0], x[s], ... (x: storage), in the compute type; NaNs are passed over (the
    sum of exponentials is NaN then). Eight running maxima: LLVM vectorises neither numba's max nor a select
    reduction (measured: 0.52 ns per float32 element, against 0.14 for this form)."""
    b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = load(x[0])
    k = 0
    while k + 8 <= c:
        b0 = _larger(load(x[k * s]), b0)
        b1 = _larger(load(x[(k + 1) * s]), b1)
        b2 = _larger(load(x[(k + 2) * s]), b2)
        b3 = _larger(load(x[(k + 3) * s]), b3)
        b4 = _larger(load(x[(k + 4) * s]), b4)
        b5 = _larger(load(x[(k + 5) * s]), b5)
        b6 = _larger(load(x[(k + 6) * s]), b6)
        b7 = _larger(load(x[(k + 7) * s]), b7)
        k += 8
    for j in range(k, c):
        b0 = _larger(load(x[j * s]), b0)
    return _larger(_larger(_larger(b0, b1), _larger(b2, b3)), _larger(_larger(b4, b5), _larger(b6, b7)))


@numba.njit(inline="always")
def _larger(v, best):
    return select(v > best, v, best)


@_jit
def _exp_shifted(v, shift):
    """exp(v - shift), compiled without fast-math flags: numba compiles an overload (exp) with its caller's
    flags, and the reassociation the sums need must not reach exp's two-part range reduction; inlined into
    their loops, these instructions keep their own flags (the sum then measured 0.38 ns per float32 element)."""
    return exp(v - shift)


@_sum_jit
def row_sum_exp(x, s, c, shift):
    """sum over the row of exp(x - shift), in float64 (in vector lanes: only the sum is reassociated)."""
    total = 0.0
    for k in range(c):
        total += np.float64(_exp_shifted(load(x[k * s]), shift))
    return total


@_sum_jit
def row_exp_into(x, s, c, shift, out):
    """out[k] = exp(x[k] - shift) over the row (out: x's storage, where it holds the compute type exactly);
    returns their sum, in float64."""
    total = 0.0
    for k in range(c):
        v = _exp_shifted(load(x[k * s]), shift)
        out[k * s] = v
        total += np.float64(v)
    return total


@_jit
def row_exp_sum(x, s, c, t, out, keep):
    """(shift, sum over the row of exp(x - shift) in float64), with out[k] = exp(x[k] - shift) where `keep`. The
    shift is the target's logit, so that one pass does: every term is at most exp(max - x[t]) and the target's is 1,
    so the sum neither underflows nor (within the type's range) overflows. Where it does overflow, or a value is
    not finite, the pass is done again from the row's maximum (a NaN stays NaN: the maximum passes it over, the
    sum does not)."""
    shift = load(x[t * s])
    total = row_exp_into(x, s, c, shift, out) if keep else row_sum_exp(x, s, c, shift)
    if not total < np.inf:
        shift = row_max(x, s, c)
        total = row_exp_into(x, s, c, shift, out) if keep else row_sum_exp(x, s, c, shift)
    return shift, total


@_sum_jit
def row_sum_below(x, s, c, top, w, weighted):
    """sum over the row of weight[k] * (top - x[k]) (weight 1 where not `weighted`), in float64: terms of one sign
    where `top` is the row's maximum, so the sum does not cancel."""
    total = 0.0
    if weighted:
        for k in range(c):
            total += np.float64(load(w[k])) * np.float64(top - load(x[k * s]))
    else:
        for k in range(c):
            total += np.float64(top - load(x[k * s]))
    return total


@_sum_jit
def row_soft_pass(x, t, s, c, shift, w, weighted, e, out, keep):
    """(sum of exp(x - shift), sum of q, sum of q * (shift - x)) over the row, in float64, with q = weight[k] *
    ((1 - e) * t[k] + e / c) (weight 1 where not `weighted`): the terms of a cross entropy against probabilities t,
    sum_k q[k] * (lse - x[k]) = below + log(total) * mass. With `keep`, out[k] = exp(x[k] - shift) too (out: x's
    storage, where it holds the compute type exactly); without, `out` is not written."""
    total = below = mass = 0.0
    kept, spread = 1.0 - e, e / c
    for k in range(c):
        v = load(x[k * s])
        q = kept * np.float64(load(t[k * s])) + spread
        if weighted:
            q *= np.float64(load(w[k]))
        exponential = _exp_shifted(v, shift)
        if keep:
            out[k * s] = exponential
        total += np.float64(exponential)
        mass += q
        below += q * np.float64(shift - v)
    return total, mass, below


@_jit
def row_soft_sums(x, t, s, c, w, weighted, e):
    """(sum of exp(x - shift), sum of q, sum of q * (shift - x)) (`row_soft_pass`) in one pass, shifted by the row's
    first logit; where the sum overflows (a logit ~88 above it in float32) or meets a non-finite value, again from
    the row's maximum (a NaN stays NaN). The float64 sum of q * (shift - x), of either sign, cancels by far less
    than the float32 result's rounding."""
    total, mass, below = row_soft_pass(x, t, s, c, load(x[0]), w, weighted, e, x, False)
    if not total < np.inf:
        total, mass, below = row_soft_pass(x, t, s, c, row_max(x, s, c), w, weighted, e, x, False)
    return total, mass, below


# --- plan --------------------------------------------------------------------------------------------------

@_jit
def _fail(w, address, status, culprit, dims, rank):
    """Record the error (the shape the rule expected in dims[:rank]) and write its message."""
    w[STATUS], w[CULPRIT], w[OTHER], w[RANK] = status, culprit, 0, rank
    return describe(w, address, view(address + NAMES, NAMES_BYTES, np.uint8), dims)


@_jit
def _same_shape(w, a, dims, rank):
    same = w[a + O_RANK] == rank
    for d in range(min(rank, w[a + O_RANK])):
        same = same and w[a + O_DIMS + d] == dims[d]
    return same


@_jit
def planner(address):
    """Check a class loss's operands and targets and lay out its call: rows in tasks of about the operator's
    task size (whole rows), a float64 partial per task for a reduced loss. Returns the status."""
    w = view(address, PLAN_WORDS, np.int64)
    n_inputs, task_tiles, reduces = w[OP + OP_INPUTS], w[OP + OP_TASK_TILES], w[OP + OP_REDUCES] != 0
    roles = w[OP + OP_ROLES:OP + OP_ROLES + MAX_INPUTS]
    optional = w[OP + OP_OPTIONAL:OP + OP_OPTIONAL + MAX_INPUTS]
    which = view(stack(_WHICH_BYTES), MAX_INPUTS, np.int64)  # by _X, _T, _W, _G: the operand, or -1
    for k in range(MAX_INPUTS):
        which[k] = -1
    shape = view(stack(_RANK_BYTES), MAX_RANK, np.int64)
    for j in range(n_inputs):
        a = _operand(j)
        if not w[a + O_PRESENT]:
            w[a + O_KIND] = ABSENT
            if not optional[j]:
                return _fail(w, address, MISSING, j, shape, 0)
            continue
        w[a + O_KIND] = FULL
        if w[a + O_RANK] > MAX_RANK:
            return _fail(w, address, TOO_MANY_DIMS, j, shape, 0)
        role = roles[j]
        if role == _ROWS or role == _LABELS:
            if w[a + O_ELEM_TYPE] != INT64:
                return _fail(w, address, NOT_INDICES, j, shape, 0)
            which[_T] = j
        elif w[a + O_ELEM_TYPE] != w[ELEM_TYPE]:
            return _fail(w, address, WRONG_TYPE, j, shape, 0)
        elif role == _EXACT:  # probabilities as targets
            which[_T] = j
        elif role == _CLASSES:
            which[_X] = j
        elif role == _PER_CLASS:
            which[_W] = j
        elif role == _LOSS:
            which[_G] = j
    x = _operand(which[_X])
    rank = w[x + O_RANK]
    if rank < 2:
        return _fail(w, address, NOT_CLASSES, which[_X], shape, 0)
    outer, c = w[x + O_DIMS], w[x + O_DIMS + 1]
    shape[0] = outer  # the rows' shape: input's without axis 1
    inner = 1
    for d in range(2, rank):
        shape[d - 1] = w[x + O_DIMS + d]
        inner *= w[x + O_DIMS + d]  # may wrap for a huge empty input: then not read (rows is 0)
    empty = outer == 0 or c == 0
    for d in range(2, rank):
        empty = empty or w[x + O_DIMS + d] == 0
    rows, n = 0, 0
    if not empty:
        rows = outer
        for d in range(1, rank):
            extent = w[x + O_DIMS + d]
            if extent > (1 << 62) // rows:
                return _fail(w, address, TOO_LARGE, which[_X], shape, 0)
            rows *= extent
        n, rows = rows, rows // c
    elif c == 0:  # no class: the rows are still there (each target must then be ignore_index)
        rows = outer
        for d in range(2, rank):
            rows *= w[x + O_DIMS + d]
    t = _operand(which[_T])
    soft = roles[which[_T]] != _ROWS  # a row of values per row: probabilities or a label list
    if soft and not _same_shape(w, t, w[x + O_DIMS:x + O_DIMS + rank], rank):
        for d in range(rank):
            shape[d] = w[x + O_DIMS + d]
        return _fail(w, address, NOT_EXACT, which[_T], shape, rank)
    if not soft and not _same_shape(w, t, shape, rank - 1):
        return _fail(w, address, NOT_ROWS, which[_T], shape, rank - 1)
    if which[_W] >= 0:
        one = view(stack(8), 1, np.int64)
        one[0] = c
        if not _same_shape(w, _operand(which[_W]), one, 1):
            return _fail(w, address, NOT_PER_CLASS, which[_W], one, 1)
    loss_rank = rank - 1 if w[REDUCTION] == _NONE else 0
    if which[_G] >= 0 and not _same_shape(w, _operand(which[_G]), shape, loss_rank):
        return _fail(w, address, NOT_LOSS, which[_G], shape, loss_rank)

    if roles[which[_T]] == _LABELS:  # every value, those after a row's last label too (PyTorch's rule)
        labels = view(w[t + O_ADDRESS], max(n, 1), np.int64)
        for e in range(n):
            k = labels[e]
            if k < -1 or k >= c:
                w[OTHER], w[BAD_AT], w[CLASSES] = k, e, c
                w[STATUS], w[CULPRIT], w[RANK] = BAD_LABEL, which[_T], 0
                return describe(w, address, view(address + NAMES, NAMES_BYTES, np.uint8), shape)
    ignore = np.int64(view(address + 8 * PARAMS, MAX_PARAMS, np.float64)[0])
    targets = view(w[t + O_ADDRESS], max(rows, 1) if not soft else 1, np.int64)
    for r in range(rows if not soft else 0):
        k = targets[r]
        if k != ignore and (k < 0 or k >= c):
            w[OTHER], w[BAD_AT], w[CLASSES] = k, r, c
            w[STATUS], w[CULPRIT], w[RANK] = BAD_CLASS, which[_T], 0
            return describe(w, address, view(address + NAMES, NAMES_BYTES, np.uint8), shape)

    w[N], w[CLASSES], w[INNER], w[NTILES] = n, c, inner, rows
    if reduces:
        w[MODE] = ELEMENTWISE if w[REDUCTION] == _NONE else REDUCE
        w[OUT_RANK] = loss_rank
        for d in range(loss_rank):
            w[OUT_DIMS + d] = shape[d]
        w[OUT_NUMEL] = rows if loss_rank else 1
    else:
        w[MODE], w[OUT_RANK], w[OUT_NUMEL] = ELEMENTWISE, rank, n
        for d in range(rank):
            w[OUT_DIMS + d] = w[x + O_DIMS + d]
    w[STREAM], w[PREFETCH] = 0, 0
    per_task = max(1, task_tiles * TILE // max(c, 1))
    if w[MODE] == REDUCE and (rows + per_task - 1) // per_task > MAX_PARTIALS:
        per_task = (rows + MAX_PARTIALS - 1) // MAX_PARTIALS
    w[TASK_TILES], w[NTASKS] = per_task, (rows + per_task - 1) // per_task
    w[PARTIALS] = 0
    w[WORKSPACE_BYTES] = 8 * max(w[NTASKS], 1) if w[MODE] == REDUCE else 0
    view(address, PLAN_WORDS, np.float64)[SCALE] = 1.0
    w[STATUS] = OK
    return OK


# --- start, task, finish -----------------------------------------------------------------------------------

@_jit
def _weight(w, j, k, dtype):
    """weight[k] as float64, 1 where the operator has no weight input or the call none."""
    if j < 0 or w[_operand(j) + O_KIND] == ABSENT:
        return 1.0
    return np.float64(load(view(w[_operand(j) + O_ADDRESS], k + 1, dtype)[k]))


@_jit
def _which(w, role):
    """The operand the rule `role` names, or -1."""
    for j in range(w[OP + OP_INPUTS]):
        if w[OP + OP_ROLES + j] == role:
            return j
    return -1


@_jit
def _every_row(w):
    """Whether every row counts (targets of `input`'s shape: probabilities, label lists) rather than the rows whose
    class index is not ignore_index."""
    return _which(w, _ROWS) < 0


@_jit
def start(address, _i, _value, dtype, _compute):
    """The kept rows' total weight (KEPT) and the classes' (SPREAD); a gradient of `mean` scales by 1 / KEPT."""
    w = view(address, PLAN_WORDS, np.int64)
    f = view(address, PLAN_WORDS, np.float64)
    j = _which(w, _PER_CLASS)
    c, rows = w[CLASSES], w[NTILES]
    spread = 0.0
    for k in range(c):
        spread += _weight(w, j, k, dtype)
    kept = 0.0
    if w[REDUCTION] == _MEAN and _every_row(w):  # every row counts, whatever the weights
        kept = np.float64(rows)
        if w[OP + OP_REDUCES] == 0:
            f[SCALE] = 1.0 / kept
    elif w[REDUCTION] == _MEAN:
        ignore = np.int64(view(address + 8 * PARAMS, MAX_PARAMS, np.float64)[0])
        targets = view(w[_operand(_which(w, _ROWS)) + O_ADDRESS], max(rows, 1), np.int64)
        for r in range(rows):
            if targets[r] != ignore:
                kept += _weight(w, j, targets[r], dtype)
        if w[OP + OP_REDUCES] == 0:
            f[SCALE] = 1.0 / kept  # every row ignored: not used (ignored rows' gradients are 0)
    f[KEPT], f[SPREAD] = kept, spread


@_jit
def _row_at(w, r):
    """The element offset of row r's first class value in `input` (and in a gradient)."""
    c, inner = w[CLASSES], w[INNER]
    outer = r // inner
    return outer * c * inner + r - outer * inner


@_jit
def _operands(w, address, dtype):
    """(the weight's operand, whether the call has one, its values (a placeholder without), the targets'
    address, the logits')."""
    j_w = _which(w, _PER_CLASS)
    weighted = j_w >= 0 and w[_operand(j_w) + O_KIND] != ABSENT
    weights = view(w[_operand(j_w) + O_ADDRESS] if weighted else address, max(w[CLASSES], 1), dtype)
    target = _operand(max(_which(w, _EXACT), _which(w, _LABELS), _which(w, _ROWS)))
    return j_w, weighted, weights, w[target + O_ADDRESS], w[_operand(_which(w, _CLASSES)) + O_ADDRESS]


@functools.cache
def task_for(op_name: str):
    """The task of one class loss: its row function on rows [i * per_task, (i + 1) * per_task)."""
    from .registry import KERNELS

    kernel = KERNELS[op_name]
    row = kernel.tile
    # probabilities or a label list as targets (a value per class, read beside the logits) rather than a class
    # index per row: no row is ignored; numba prunes the branches a constant rules out, so each form compiles its
    # own row calls only
    rules = {i.shape for i in kernel.op.inputs}
    soft, labels = EXACT in rules, LABELS in rules

    @_jit
    def loss_task(address, i, _principal, dtype, _compute):
        w = view(address, PLAN_WORDS, np.int64)
        params = view(address + 8 * PARAMS, MAX_PARAMS, np.float64)
        c, inner, rows, itemsize = w[CLASSES], w[INNER], w[NTILES], w[ITEMSIZE]
        first, ignore, span = i * w[TASK_TILES], np.int64(params[0]), max((c - 1) * inner + 1, 1)
        j_w, weighted, weights, t_address, x_address = _operands(w, address, dtype)
        targets = view(t_address, max(rows, 1), np.int64)
        spread = view(address, PLAN_WORDS, np.float64)[SPREAD]
        out = view(w[OUT_ADDRESS], max(w[OUT_NUMEL], 1), dtype)
        total = 0.0
        for r in range(first, min(rows, first + w[TASK_TILES])):
            at, loss = _row_at(w, r) * itemsize, 0.0
            x = view(x_address + at, span, dtype)
            if labels:
                if c > 0:  # a row of no class sums nothing
                    t = view(t_address + _row_at(w, r) * 8, span, np.int64)
                    loss = row(x, t, 1, c, params) if inner == 1 else row(x, t, inner, c, params)
            elif soft:
                if c > 0:
                    t = view(t_address + at, span, dtype)
                    if inner == 1:  # the contiguous case, compiled apart so that its passes run in vector lanes
                        loss = row(x, t, 1, c, weights, weighted, params)
                    else:
                        loss = row(x, t, inner, c, weights, weighted, params)
            elif targets[r] != ignore:
                k = targets[r]
                wk = _weight(w, j_w, k, dtype)
                if inner == 1:
                    loss = row(x, 1, c, k, weights, weighted, wk, spread, params)
                else:
                    loss = row(x, inner, c, k, weights, weighted, wk, spread, params)
            if w[MODE] == REDUCE:
                total += loss
            else:
                store_rounded(out, r, loss)
        if w[MODE] == REDUCE:
            view(w[WORKSPACE] + w[PARTIALS], w[NTASKS], np.float64)[i] = total

    @_jit
    def gradient_task(address, i, _principal, dtype, compute):
        w = view(address, PLAN_WORDS, np.int64)
        f = view(address, PLAN_WORDS, np.float64)
        params = view(address + 8 * PARAMS, MAX_PARAMS, np.float64)
        c, inner, rows, itemsize = w[CLASSES], w[INNER], w[NTILES], w[ITEMSIZE]
        first, ignore, span = i * w[TASK_TILES], np.int64(params[0]), max((c - 1) * inner + 1, 1)
        j_w, weighted, weights, t_address, x_address = _operands(w, address, dtype)
        targets = view(t_address, max(rows, 1), np.int64)
        g = view(w[_operand(_which(w, _LOSS)) + O_ADDRESS], max(rows, 1), dtype)
        each, scale, spread, zero = w[REDUCTION] == _NONE, f[SCALE], f[SPREAD], compute(0)
        for r in range(first, min(rows, first + w[TASK_TILES]) if c > 0 else first):  # no class: nothing to write
            at = _row_at(w, r) * itemsize
            out, x = view(w[OUT_ADDRESS] + at, span, dtype), view(x_address + at, span, dtype)
            if labels:
                t = view(t_address + _row_at(w, r) * 8, span, np.int64)
                coef = np.float64(load(g[r if each else 0])) * scale
                if inner == 1:
                    row(x, t, 1, c, params, coef, out)
                else:
                    row(x, t, inner, c, params, coef, out)
            elif soft:
                t = view(t_address + at, span, dtype)
                coef = np.float64(load(g[r if each else 0])) * scale
                if inner == 1:
                    row(x, t, 1, c, weights, weighted, params, coef, out)
                else:
                    row(x, t, inner, c, weights, weighted, params, coef, out)
            elif targets[r] == ignore:
                for m in range(c):
                    store(out, m * inner, zero)
            else:
                k = targets[r]
                coef = np.float64(load(g[r if each else 0])) * scale
                wk = _weight(w, j_w, k, dtype)
                if inner == 1:
                    row(x, 1, c, k, weights, weighted, wk, spread, params, coef, out)
                else:
                    row(x, inner, c, k, weights, weighted, wk, spread, params, coef, out)

    return loss_task if kernel.op.reduces else gradient_task


@_jit
def finish(address, _i, _value, dtype, _compute):
    w = view(address, PLAN_WORDS, np.int64)
    if w[MODE] != REDUCE:
        return
    partials = view(w[WORKSPACE] + w[PARTIALS], max(w[NTASKS], 1), np.float64)
    total = 0.0
    for i in range(w[NTASKS]):
        total += partials[i]
    if w[REDUCTION] == _MEAN:
        total /= view(address, PLAN_WORDS, np.float64)[KEPT]  # 0 / 0 where every row is ignored: NaN, as PyTorch
    store_rounded(view(w[OUT_ADDRESS], 1, dtype), 0, total)


def exact(out):
    """Whether `out`'s storage holds the compute type exactly (float32, float64), not its bits (float16, bfloat16)."""


@overload(exact)
def _exact(out):
    value = out.dtype in (types.float32, types.float64)
    return lambda out: value
