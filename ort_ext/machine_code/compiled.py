"""The functions compiled from the kernels' Python source: per operator, the ONNX Runtime callbacks
(`compute`, and `task`, run on the session's intra-op threads) and the numpy front end's steps (`plan`,
`start`, `task`, `finish`), plus the `trampoline` every lossops op is registered with.

One definition serves both ways the machine code is made: numba compiles these in a process that has numba
(a checkout, `lossops[jit]`; cached on disk by cache.py), and aot.py compiles the same
functions when a wheel is built, into libraries that need neither numba nor Python (machine_code.py loads them).

The compiled code never calls into Python and never raises (error_model="numpy", no allocation through numba's
runtime): it runs inside ONNX Runtime's threads, and in the prebuilt libraries numba's runtime is absent.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
import time

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import types
from numba.core import cgutils, sigutils
from numba.core.ccallback import CFunc
from numba.extending import intrinsic

from . import cache, capi

cache.install()  # before any lossops function is compiled: the cache's locators and source stamp

from ...opset import OPS  # noqa: E402
from ...opset.spec import DTYPE_NAMES  # noqa: E402
from ..kernels import engine  # noqa: E402
from ..kernels.layout import S_API, S_ELEM_TYPE, S_ITEMSIZE, S_PARAMS, S_REDUCTION, S_WORKER, STATE_WORDS  # noqa: E402
from ..kernels.native import PLANNER, stack, view  # noqa: E402
from ..kernels.registry import KERNELS  # noqa: E402

CACHE = True  # numba's on-disk cache; aot.py turns it off (the wheel carries the code instead)

ELEMENT_NAMES = {elem: name for name, elem in DTYPE_NAMES.items()}
_PLAN_BYTES = engine.PLAN_BYTES  # a module constant: `stack` takes a literal
_API_WORDS = 512  # a bound for viewing the OrtApi table (its highest slot used here is 274)
S = capi.SLOTS
_CREATE_STATUS, _MUTABLE_DATA, _ELEMENT_TYPE, _DIMS_COUNT, _DIMS, _TYPE_AND_SHAPE = (
    S["CreateStatus"], S["GetTensorMutableData"], S["GetTensorElementType"], S["GetDimensionsCount"],
    S["GetDimensions"], S["GetTensorTypeAndShape"])
_INPUT_COUNT, _INPUT, _OUTPUT, _RELEASE_INFO, _PARALLEL_FOR = (
    S["KernelContext_GetInputCount"], S["KernelContext_GetInput"], S["KernelContext_GetOutput"],
    S["ReleaseTensorTypeAndShapeInfo"], S["KernelContext_ParallelFor"])
_OUT_OF_MEMORY = np.frombuffer(b"lossops: out of memory for a kernel's workspace of ", np.uint8).copy()
_BYTES = np.frombuffer(b" bytes", np.uint8).copy()

# Signatures, with every pointer an int64. Every OrtApi function lossops calls takes pointers and size_t and
# returns an OrtStatus* (or nothing), the same machine signature on x86-64 and aarch64.
SIGNATURES = {
    "compute": types.int64(types.int64, types.int64),  # OrtStatus* (void* kernel state, OrtKernelContext*)
    "task": types.void(types.int64, types.uint64),  # void (void* plan, size_t task): ORT's ParallelFor callback
    "plan": types.int64(types.int64),  # status (void* plan)
    "start": types.void(types.int64),
    "finish": types.void(types.int64),
}


def _call_codegen(result: ir.Type, n_args: int):
    def codegen(context, builder, sig, llargs):
        i64 = ir.IntType(64)
        values = [builder.extract_value(llargs[1], k) for k in range(n_args)]
        target = builder.inttoptr(llargs[0], ir.FunctionType(result, [i64] * n_args).as_pointer())
        value = builder.call(target, values)
        return context.get_dummy_value() if isinstance(result, ir.VoidType) else value

    return codegen


def _int64_args(fn, args) -> bool:
    return (isinstance(fn, types.Integer) and isinstance(args, types.BaseTuple)
            and all(isinstance(t, types.Integer) and t.bitwidth == 64 for t in args))


@intrinsic
def call(typingctx, fn, args):
    """Call the C function at address `fn` with a tuple of 64-bit integer arguments; its result as int64."""
    if not _int64_args(fn, args):
        return None
    return types.int64(fn, args), _call_codegen(ir.IntType(64), len(args))


@intrinsic
def call_void(typingctx, fn, args):
    """Call the C function at address `fn`, which returns nothing, with a tuple of 64-bit integer arguments."""
    if not _int64_args(fn, args):
        return None
    return types.none(fn, args), _call_codegen(ir.VoidType(), len(args))


@intrinsic
def malloc(typingctx, nbytes):
    """libc malloc, from compiled code."""
    if not isinstance(nbytes, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(8).as_pointer(),
                                                                            [ir.IntType(64)]), "malloc")
        return builder.ptrtoint(builder.call(fn, [args[0]]), ir.IntType(64))

    return types.int64(nbytes), codegen


@intrinsic
def free(typingctx, address):
    """libc free, from compiled code."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(),
                                                                            [ir.IntType(8).as_pointer()]), "free")
        builder.call(fn, [builder.inttoptr(args[0], ir.IntType(8).as_pointer())])
        return context.get_dummy_value()

    return types.none(address), codegen


_OPTIONS = {"nopython": True, "error_model": "numpy", "nogil": True}


class _CFunc(CFunc):
    """numba's @cfunc, cached on disk where CACHE is set; `before_compiling` runs when numba compiles the function
    rather than loading it from the cache."""

    def __init__(self, fn, kind: str, before_compiling=None):
        super().__init__(fn, sigutils.normalize_signature(SIGNATURES[kind]), locals={}, options=dict(_OPTIONS))
        self._before_compiling = before_compiling

    def _compile_uncached(self):
        if self._before_compiling is not None:
            self._before_compiling()
        return super()._compile_uncached()


def _cfunc(fn, kind: str, before_compiling=None) -> CFunc:
    compiled = _CFunc(fn, kind, before_compiling)
    if CACHE:
        compiled.enable_caching()
    compiled.compile()
    return compiled


@functools.cache
def functions(op_name: str, elem_type: int | None = None) -> Functions:
    """The compiled functions of operator `op_name`, by kind (machine_code.KINDS): for every element type (the
    plan's, dispatched at run time), or for `elem_type` alone, which takes numba a quarter of the time."""
    if op_name not in KERNELS:
        raise ValueError(f"'{op_name}' has no lossops kernel; the kernels are {sorted(KERNELS)}")
    n_inputs = len(OPS[op_name].inputs)
    op = op_name  # a literal for the engine's per-operator entry points
    elem = elem_type  # likewise, where given

    def task(plan, i):
        engine.task(op, plan, i, elem)

    def plan(address):
        return engine.plan(op, address)

    def start(address):
        engine.start(op, address, elem)

    def finish(address):
        engine.finish(op, address, elem)

    def compute(kernel, context):
        state = view(kernel, STATE_WORDS, np.int64)
        api = view(state[S_API], _API_WORDS, np.int64)
        plan = stack(_PLAN_BYTES)
        w = view(plan, engine.PLAN_WORDS, np.int64)
        for k in range(engine.OPERANDS):
            w[k] = 0
        w[engine.ELEM_TYPE], w[engine.ITEMSIZE] = state[S_ELEM_TYPE], state[S_ITEMSIZE]
        w[engine.REDUCTION] = state[S_REDUCTION]
        for k in range(engine.MAX_PARAMS):  # float64 bits, copied as words
            w[engine.PARAMS + k] = state[S_PARAMS + k]
        out = view(stack(16), 2, np.int64)  # out-parameters of the API calls
        out_address = out.ctypes.data
        status = call(api[_INPUT_COUNT], (context, out_address))
        count = out[0]
        for j in range(n_inputs):
            a = engine.OPERANDS + j * engine.OPERAND_WORDS
            w[a + engine.O_PRESENT] = 0
            if status or j >= count:
                continue
            status = call(api[_INPUT], (context, np.int64(j), out_address))
            value = out[0]
            if status or value == 0:  # an absent optional input
                continue
            status = call(api[_TYPE_AND_SHAPE], (value, out_address))
            if status:
                continue
            info = out[0]
            status = call(api[_ELEMENT_TYPE], (info, out_address))
            elem_type = out[0] & 0xFFFFFFFF  # an enum (int) written into a 64-bit slot
            if status == 0:
                status = call(api[_DIMS_COUNT], (info, out_address))
            rank = out[0]
            if status == 0 and rank <= engine.MAX_RANK:  # a larger rank is reported by the engine
                status = call(api[_DIMS], (info, plan + 8 * (a + engine.O_DIMS), rank))
            call(api[_RELEASE_INFO], (info,))
            if status == 0:
                status = call(api[_MUTABLE_DATA], (value, out_address))
            w[a + engine.O_PRESENT], w[a + engine.O_ADDRESS] = 1, out[0]
            w[a + engine.O_ELEM_TYPE], w[a + engine.O_RANK] = elem_type, rank
        if status:
            return status
        if engine.plan(op, plan):
            return call(api[_CREATE_STATUS], (np.int64(capi.ORT_INVALID_ARGUMENT), plan + engine.MESSAGE))
        status = call(api[_OUTPUT], (context, np.int64(0), plan + 8 * engine.OUT_DIMS, w[engine.OUT_RANK],
                                     out_address))
        if status == 0:
            status = call(api[_MUTABLE_DATA], (out[0], out_address))
        if status:
            return status
        w[engine.OUT_ADDRESS] = out[0]
        workspace = 0
        if w[engine.WORKSPACE_BYTES]:
            workspace = malloc(w[engine.WORKSPACE_BYTES] + 64)
            if workspace == 0:
                msg = view(plan + engine.MESSAGE, engine.MESSAGE_BYTES, np.uint8)
                pos = engine.put_int(msg, engine.put(msg, 0, _OUT_OF_MEMORY), w[engine.WORKSPACE_BYTES])
                msg[engine.put(msg, pos, _BYTES)] = 0
                return call(api[_CREATE_STATUS], (np.int64(capi.ORT_FAIL), plan + engine.MESSAGE))
            w[engine.WORKSPACE] = (workspace + 63) // 64 * 64
        engine.start(op, plan, elem)
        tasks = w[engine.NTASKS]
        if tasks > 1:
            status = call(api[_PARALLEL_FOR], (context, state[S_WORKER], tasks, np.int64(0), plan))
        elif tasks == 1:  # through its address, as ParallelFor calls it: compute holds no copy of the tile loops
            call_void(state[S_WORKER], (plan, np.int64(0)))
        if status == 0:
            engine.finish(op, plan, elem)
        if workspace:
            free(workspace)
        return status

    definitions = {"compute": compute, "task": task, "plan": plan, "start": start, "finish": finish}
    what = op_name if elem_type is None else f"{op_name} ({ELEMENT_NAMES[elem_type]})"
    return Functions(what, definitions)


class Functions:
    """One operator's compiled functions, compiled (or loaded from the cache) when first asked for: a session
    needs `compute` and `task`, the numpy front end `plan`, `start`, `task` and `finish`."""

    def __init__(self, what: str, definitions: dict):
        self._what, self._definitions = what, definitions
        self._compiled: dict[str, CFunc] = {}
        self._lock = threading.Lock()

    def __getitem__(self, kind: str) -> CFunc:
        return self.get(kind)[0]

    def get(self, *kinds: str) -> list[CFunc]:
        """The compiled functions of `kinds`, compiling those not compiled yet (said once, with the time)."""
        with self._lock:
            began: list[float] = []

            def announce() -> None:  # once, and only where numba compiles rather than loads
                if not began:
                    began.append(time.perf_counter())
                    print(f"lossops: compiling the kernels of {self._what} with numba (once: later processes load "
                          "them from the cache)", file=sys.stderr, flush=True)

            planner(announce if CACHE else None)  # called by its symbol from this code: defined first
            for kind in kinds:
                if kind not in self._compiled:
                    self._compiled[kind] = _cfunc(self._definitions[kind], kind, announce if CACHE else None)
                    _immortal(self._compiled[kind])
            if began:
                print(f"lossops: compiled {self._what} in {time.perf_counter() - began[0]:.0f} s", file=sys.stderr,
                      flush=True)
            return [self._compiled[kind] for kind in kinds]


def _immortal(*objects) -> None:
    """Keep compiled functions (and the machine code they own) alive through interpreter teardown: a session
    still running in another thread then must not jump into freed memory."""
    for obj in objects:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


_PLANNER: list[CFunc] = []
_PLANNER_LOCK = threading.Lock()


def planner(before_compiling=None) -> CFunc:
    """The planner every operator's `plan` calls (engine.planner), compiled once per process (or loaded from the
    cache) before the first operator's code; its symbol (native.PLANNER) is defined for the JIT here, and a
    library defines it by exporting it under that name (aot.py)."""
    with _PLANNER_LOCK:
        if not _PLANNER:

            def lossops_plan(address):
                return engine.planner(address)

            compiled = _cfunc(lossops_plan, "plan", before_compiling)
            _immortal(compiled)
            llvm.add_symbol(PLANNER, compiled.address)
            _PLANNER.append(compiled)
        return _PLANNER[0]


@functools.cache
def trampoline() -> CFunc:
    """KernelComputeV2 of every lossops op: the state's first word is its operator's compute function (so an
    operator's code is looked up when a session first uses it, not when the library is registered)."""

    def lossops_trampoline(kernel, context):
        return call(view(kernel, 1, np.int64)[0], (kernel, context))

    compiled = _cfunc(lossops_trampoline, "compute")
    _immortal(compiled)
    return compiled
