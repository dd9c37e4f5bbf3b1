"""The engine of the sequence losses (CtcLoss and its gradient): a call is computed a sequence at a time, a
sequence being one column n of `log_probs` (T, N, C): its first input_lengths[n] frames, each C class values
N * C elements apart from the next, against its target_lengths[n] labels.

It follows engine.py's steps on the same PLAN record (layout.py) and front ends:

    plan     checks the operands against the sequence rules (opset/spec.py: sequences, target sequences,
             lengths, loss), blank against [0, C), every length against [0, T] or [0, S] (the concatenated
             targets' against their number), and every label against [0, C) other than blank, before anything is
             allocated: a bad value is an error naming the operator and the input, never a read out of bounds
    start    each sequence's first label's offset in `targets` (padded: n * S; concatenated: the lengths before it)
    task     sequence i: its extended labels (a blank before, between and after them) and the operator's sequence
             function (`ops/<operator>.py`, registered with `@sequence_kernel`) on it, in float64
    finish   a loss: the sequences' float64 losses, added in order, divided by N for `mean`

The recursions run in the log domain in float64 whatever the element type (a loss adds up T frames' terms); a
state's value after frame t is kept in a row of W + 2 values, W = 2L + 1 states for a target of L labels, with
two -inf before them (alpha, which reads the two states before) or after them (beta, the two after), so that
every state's update is the same branch-free formula.
"""

from __future__ import annotations

import functools

import numba
import numpy as np

from .halves import load, store_rounded
from .layout import (
    _LENGTHS,
    _LOSS,
    _MEAN,
    _NONE,
    _RANK_BYTES,
    _SEQUENCES,
    _TARGET_SEQUENCES,
    ABSENT,
    BAD_AT,
    BAD_BLANK,
    BAD_LENGTH,
    BAD_TARGET,
    CLASSES,
    CULPRIT,
    DIMS,
    ELEM_TYPE,
    ELEMENTWISE,
    FULL,
    INT64,
    ITEMSIZE,
    MAX_INPUTS,
    MAX_PARAMS,
    MAX_RANK,
    MISSING,
    MODE,
    NAMES,
    NAMES_BYTES,
    NOT_CONCATENATED,
    NOT_INDICES,
    NOT_LENGTHS,
    NOT_LOSS,
    NOT_SEQUENCES,
    NOT_TARGET_SEQUENCES,
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
    OP_REDUCES,
    OP_ROLES,
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
    STATUS,
    STREAM,
    TASK_TILES,
    TOO_LARGE,
    TOO_MANY_DIMS,
    WORKSPACE,
    WORKSPACE_BYTES,
    WRONG_TYPE,
    N,
)
from .mathf import exp, log
from .messages import describe
from .native import select, stack, view

_jit = numba.njit(error_model="numpy", nogil=True)

# The words of the PLAN's `dims` (the tile engine's merged F, which a sequence call has no use for) that hold a
# sequence call's sizes: frames, sequences, classes, a padded target's width (0: concatenated), the most states
# of any sequence (2 * its longest target + 1), the bytes of one task's scratch, and the operands.
_T, _B, _C, _S, _W, _TASK_BYTES, _LP, _TARGETS, _INPUT_LENGTHS, _TARGET_LENGTHS, _GRAD = (DIMS + k for k in range(11))
NEVER = -np.inf


@_jit
def _operand(j):
    return OPERANDS + j * OPERAND_WORDS


@_jit
def _fail(w, address, status, culprit, dims, rank):
    """Record the error (the shape the rule expected in dims[:rank]) and write its message."""
    w[STATUS], w[CULPRIT], w[RANK] = status, culprit, rank
    return describe(w, address, view(address + NAMES, NAMES_BYTES, np.uint8), dims)


@_jit
def _bad_value(w, address, status, culprit, value, at, bound, dims):
    """A value out of its range: `value` at index `at`, `bound` the rule's (T, S, the targets' number, or C)."""
    w[OTHER], w[BAD_AT], w[CLASSES] = value, at, bound
    return _fail(w, address, status, culprit, dims, 0)


@_jit
def _is_vector(w, a, n):
    return w[a + O_RANK] == 1 and w[a + O_DIMS] == n


@_jit
def planner(address):
    """Check a sequence loss's operands and values and lay out its call: a task per sequence, each with its own
    scratch, and a float64 partial per sequence for a reduced loss. Returns the status."""
    w = view(address, PLAN_WORDS, np.int64)
    n_inputs, reduces = w[OP + OP_INPUTS], w[OP + OP_REDUCES] != 0
    roles = w[OP + OP_ROLES:OP + OP_ROLES + MAX_INPUTS]
    shape = view(stack(_RANK_BYTES), MAX_RANK, np.int64)
    x = t = il = tl = g = -1
    for j in range(n_inputs):
        a = _operand(j)
        if not w[a + O_PRESENT]:
            w[a + O_KIND] = ABSENT
            return _fail(w, address, MISSING, j, shape, 0)
        w[a + O_KIND] = FULL
        if w[a + O_RANK] > MAX_RANK:
            return _fail(w, address, TOO_MANY_DIMS, j, shape, 0)
        role = roles[j]
        if role == _TARGET_SEQUENCES or role == _LENGTHS:
            if w[a + O_ELEM_TYPE] != INT64:
                return _fail(w, address, NOT_INDICES, j, shape, 0)
            if role == _TARGET_SEQUENCES:
                t = j
            elif il < 0:
                il = j
            else:
                tl = j
        elif w[a + O_ELEM_TYPE] != w[ELEM_TYPE]:
            return _fail(w, address, WRONG_TYPE, j, shape, 0)
        elif role == _SEQUENCES:
            x = j
        elif role == _LOSS:
            g = j
    a = _operand(x)
    if w[a + O_RANK] != 3:
        return _fail(w, address, NOT_SEQUENCES, x, shape, 0)
    frames, batch, c = w[a + O_DIMS], w[a + O_DIMS + 1], w[a + O_DIMS + 2]
    shape[0] = batch
    if (batch > 0 and frames > (1 << 62) // batch) or (frames * batch > 0 and c > (1 << 62) // (frames * batch)):
        return _fail(w, address, TOO_LARGE, x, shape, 0)
    at = _operand(t)
    padded = w[at + O_RANK] == 2
    if not (padded or w[at + O_RANK] == 1) or (padded and w[at + O_DIMS] != batch):
        return _fail(w, address, NOT_TARGET_SEQUENCES, t, shape, 1)
    for j in (il, tl):
        if not _is_vector(w, _operand(j), batch):
            return _fail(w, address, NOT_LENGTHS, j, shape, 1)
    loss_rank = 1 if w[REDUCTION] == _NONE else 0
    if g >= 0 and not (w[_operand(g) + O_RANK] == loss_rank and (loss_rank == 0 or w[_operand(g) + O_DIMS] == batch)):
        return _fail(w, address, NOT_LOSS, g, shape, loss_rank)
    blank = np.int64(view(address + 8 * PARAMS, MAX_PARAMS, np.float64)[0])
    if blank < 0 or blank >= c:
        w[CLASSES] = c
        return _fail(w, address, BAD_BLANK, x, shape, 0)

    inputs = view(w[_operand(il) + O_ADDRESS], max(batch, 1), np.int64)
    for k in range(batch):
        if inputs[k] < 0 or inputs[k] > frames:
            return _bad_value(w, address, BAD_LENGTH, il, inputs[k], k, frames, shape)
    width = w[at + O_DIMS + 1] if padded else 0
    count = w[at + O_DIMS] if not padded else 0  # the concatenated targets' number
    targets = view(w[_operand(tl) + O_ADDRESS], max(batch, 1), np.int64)
    total, longest = 0, 0
    for k in range(batch):
        most = width if padded else count
        if targets[k] < 0 or targets[k] > most:
            return _bad_value(w, address, BAD_LENGTH, tl, targets[k], k, most, shape)
        total = min(total + targets[k], 1 << 62)
        longest = max(longest, targets[k])
    if not padded and total != count:
        shape[0] = total
        return _fail(w, address, NOT_CONCATENATED, t, shape, 1)
    labels = view(w[at + O_ADDRESS], max(w[at + O_DIMS] * (width if padded else 1), 1), np.int64)
    start = 0
    for k in range(batch):
        first = k * width if padded else start
        for e in range(first, first + targets[k]):
            v = labels[e]
            if v < 0 or v >= c or v == blank:
                return _bad_value(w, address, BAD_TARGET, t, v, e, c, shape)
        start += targets[k]

    states = 2 * longest + 1
    w[_T], w[_B], w[_C], w[_S], w[_W] = frames, batch, c, width, states
    w[_LP], w[_TARGETS], w[_INPUT_LENGTHS], w[_TARGET_LENGTHS] = x, t, il, tl
    w[_GRAD] = g
    w[N], w[CLASSES], w[NTILES], w[TASK_TILES], w[NTASKS] = frames * batch * c, c, batch, 1, batch
    # one task's scratch (float64 or int64 words): its extended labels, skip penalties and a frame's emissions, two
    # rows of states (a gradient: three), and for a gradient every frame's alpha and a value per class
    words = 3 * states + (2 if reduces else 3) * (states + 2)
    if not reduces:
        if frames > 0 and states + 2 > (1 << 40) // frames:
            return _fail(w, address, TOO_LARGE, x, shape, 0)
        words += frames * (states + 2) + c
    w[_TASK_BYTES] = 8 * words
    if batch > 0 and words > (1 << 40) // batch:
        return _fail(w, address, TOO_LARGE, x, shape, 0)
    if reduces:
        w[MODE] = ELEMENTWISE if loss_rank else REDUCE
        w[OUT_RANK], w[OUT_DIMS], w[OUT_NUMEL] = loss_rank, batch, batch if loss_rank else 1
    else:
        w[MODE], w[OUT_RANK], w[OUT_NUMEL] = ELEMENTWISE, 3, frames * batch * c
        for d in range(3):
            w[OUT_DIMS + d] = w[a + O_DIMS + d]
    w[STREAM], w[PREFETCH] = 0, 0
    # the workspace: each sequence's first label's offset, its float64 loss, then the tasks' scratch
    w[PARTIALS] = 8 * batch
    w[WORKSPACE_BYTES] = 16 * batch + w[_TASK_BYTES] * batch
    view(address, PLAN_WORDS, np.float64)[SCALE] = 1.0
    w[STATUS] = OK
    return OK


@_jit
def start(address, _i, _value, _dtype, _compute):
    """Each sequence's first label's offset in `targets`."""
    w = view(address, PLAN_WORDS, np.int64)
    batch = w[_B]
    offsets = view(w[WORKSPACE], max(batch, 1), np.int64)
    lengths = view(w[_operand(w[_TARGET_LENGTHS]) + O_ADDRESS], max(batch, 1), np.int64)
    padded, at = w[_operand(w[_TARGETS]) + O_RANK] == 2, 0
    for k in range(batch):
        offsets[k] = k * w[_S] if padded else at
        at += lengths[k]


@_jit
def extend(labels, length, blank, ext, penalty):
    """ext[:2L + 1]: blank, labels[0], blank, ..., labels[L - 1], blank; penalty[:2L + 1], what reaching a state
    from two states before it adds: 0 at a label after a different label, -inf elsewhere (a blank, the first
    label, a repeated label, whose blank between may not be skipped)."""
    for s in range(2 * length + 1):
        odd = s % 2 == 1
        ext[s] = labels[s // 2] if odd else blank
        penalty[s] = 0.0 if odd and s >= 3 and labels[s // 2] != labels[s // 2 - 1] else NEVER


@numba.njit(error_model="numpy", nogil=True, inline="always")
def logsumexp3(a, b, c):
    """log(exp(a) + exp(b) + exp(c)) from their maximum; -inf where all are -inf (not NaN); NaN where a term is NaN
    or +inf (inf - inf, as PyTorch's). Two exponentials: the maximum's, exp(top - top), is 1 (0 at -inf)."""
    high, low = select(b > a, b, a), select(b > a, a, b)
    top, middle = select(c > high, c, high), select(c > high, high, c)
    safe = select(top == NEVER, 0.0, top)
    x = top - safe
    own = select(x == 0.0, 1.0, select(x == NEVER, 0.0, np.nan))
    return safe + log(own + exp(middle - safe) + exp(low - safe))


@_jit
def emissions(lp, ext, states, emit):
    """emit[s]: a frame's log-probability (lp: its C values, storage) at state s's class, in float64. Gathered
    apart from the recursion, whose loop then runs in vector lanes (a gather inside it made it 4.5 times slower,
    measured)."""
    for s in range(states):
        emit[s] = np.float64(load(lp[ext[s]]))


@_jit
def alpha_step(before, after, penalty, states, emit):
    """after[2 + s] = logsumexp(before[2 + s], before[1 + s], before[s] + penalty[s]) + emit[s], for the `states`
    states."""
    for s in range(states):
        after[2 + s] = logsumexp3(before[2 + s], before[1 + s], before[s] + penalty[s]) + emit[s]


@_jit
def alpha_start(row, states):
    """The state before the first frame: 0 at the first state (the blank before the labels), -inf elsewhere; the
    two pads before the states -inf."""
    for s in range(states + 2):
        row[s] = NEVER
    row[2] = 0.0


@_jit
def final_loss(alpha, length):
    """-log likelihood from alpha after the last frame (states from index 2): its last two states, 2L and
    2L - 1 (the latter where L > 0)."""
    last = alpha[2 + 2 * length]
    before = alpha[1 + 2 * length] if length > 0 else NEVER
    return -logsumexp3(last, before, NEVER)


@_jit
def _prepared(w, address, i):
    """Sequence i's scratch (its extended labels and skip penalties filled in, then its emission row and its rows
    of states), its target length and its frames."""
    batch, states = w[_B], w[_W]
    scratch = w[WORKSPACE] + 16 * batch + i * w[_TASK_BYTES]
    ext, penalty = view(scratch, states, np.int64), view(scratch + 8 * states, states, np.float64)
    length, frames = _lengths(w, i)
    labels = view(w[_operand(w[_TARGETS]) + O_ADDRESS] + 8 * view(w[WORKSPACE], batch, np.int64)[i],
                  max(length, 1), np.int64)
    extend(labels, length, np.int64(view(address + 8 * PARAMS, MAX_PARAMS, np.float64)[0]), ext, penalty)
    return scratch, ext, penalty, view(scratch + 16 * states, states, np.float64), length, frames


@functools.cache
def task_for(op_name: str):
    """The task of one sequence loss: its sequence function on sequence i."""
    from .registry import KERNELS

    kernel = KERNELS[op_name]
    sequence = kernel.tile

    @_jit
    def loss_task(address, i, _principal, dtype, _compute):
        w = view(address, PLAN_WORDS, np.int64)
        params = view(address + 8 * PARAMS, MAX_PARAMS, np.float64)
        batch, c, states = w[_B], w[_C], w[_W]
        scratch, ext, penalty, emit, length, frames = _prepared(w, address, i)
        lp = view(w[_operand(w[_LP]) + O_ADDRESS] + i * c * w[ITEMSIZE], max(w[N], 1), dtype)
        rows = view(scratch + 24 * states, 2 * (states + 2), np.float64)
        loss = sequence(lp, batch * c, frames, ext, penalty, emit, length, rows, params)
        if w[MODE] == REDUCE:
            divisor = np.float64(max(length, 1)) if w[REDUCTION] == _MEAN else 1.0
            view(w[WORKSPACE] + w[PARTIALS], batch, np.float64)[i] = loss / divisor
        else:
            store_rounded(view(w[OUT_ADDRESS], batch, dtype), i, loss)

    @_jit
    def gradient_task(address, i, _principal, dtype, _compute):
        w = view(address, PLAN_WORDS, np.int64)
        params = view(address + 8 * PARAMS, MAX_PARAMS, np.float64)
        frames_all, batch, c, states = w[_T], w[_B], w[_C], w[_W]
        scratch, ext, penalty, emit, length, frames = _prepared(w, address, i)
        itemsize = w[ITEMSIZE]
        lp = view(w[_operand(w[_LP]) + O_ADDRESS] + i * c * itemsize, max(w[N], 1), dtype)
        out = view(w[OUT_ADDRESS] + i * c * itemsize, max(w[N], 1), dtype)
        g = view(w[_operand(w[_GRAD]) + O_ADDRESS], max(batch, 1), dtype)
        coef = np.float64(load(g[np.int64(i) if w[REDUCTION] == _NONE else 0]))
        if w[REDUCTION] == _MEAN:
            coef = coef / np.float64(max(length, 1)) / np.float64(batch)
        rows = view(scratch + 24 * states, 3 * (states + 2), np.float64)
        alphas = view(scratch + 24 * states + 24 * (states + 2), max(frames_all, 1) * (states + 2), np.float64)
        per_class = view(scratch + 24 * states + 24 * (states + 2) + 8 * frames_all * (states + 2), max(c, 1),
                         np.float64)
        sequence(lp, out, batch * c, frames, frames_all, c, ext, penalty, emit, length, rows, alphas, per_class,
                 coef, params)

    return loss_task if kernel.op.reduces else gradient_task


@_jit
def _lengths(w, i):
    """(target length, input length) of sequence i."""
    return (view(w[_operand(w[_TARGET_LENGTHS]) + O_ADDRESS], i + 1, np.int64)[i],
            view(w[_operand(w[_INPUT_LENGTHS]) + O_ADDRESS], i + 1, np.int64)[i])


@_jit
def finish(address, _i, _value, dtype, _compute):
    w = view(address, PLAN_WORDS, np.int64)
    if w[MODE] != REDUCE:
        return
    batch = w[_B]
    partials = view(w[WORKSPACE] + w[PARTIALS], max(batch, 1), np.float64)
    total = 0.0
    for i in range(batch):
        total += partials[i]
    if w[REDUCTION] == _MEAN:
        total /= np.float64(batch)  # 0 / 0 for no sequence: NaN
    store_rounded(view(w[OUT_ADDRESS], 1, dtype), 0, total)
