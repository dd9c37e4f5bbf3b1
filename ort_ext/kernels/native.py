"""The low-level pieces the compiled kernels are written with (numba intrinsics): arrays over raw addresses,
buffers on the stack, fused multiply-add, float bit casts and constants in a value's own float type.

The kernels run inside ONNX Runtime's threads, where numba's runtime must not be touched: its allocator goes
through CPython's (and tracemalloc hooks that take the GIL), and any exception makes numba's C wrapper take
the GIL to print it. So the kernels allocate nothing on the heap (callers hand them memory; temporaries live
on the stack) and contain nothing that can raise (error_model="numpy", no bounds checks, no allocation).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .targets import ARCH

_i8p = ir.IntType(8).as_pointer()


@intrinsic
def voidptr(typingctx, address):
    """An address (an integer) as a void*."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], _i8p)

    return types.voidptr(address), codegen


@numba.njit(inline="always")
def view(address, n, dtype):
    """The n elements of `dtype` at `address`, as a 1-D array (no copy, no ownership)."""
    return numba.carray(voidptr(address), n, dtype)


@intrinsic
def stack(typingctx, nbytes):
    """The address of `nbytes` (a constant) of 64-byte aligned memory on the calling function's stack, valid
    until it returns (allocated once, in its entry block, whatever loop the call sits in). Allocated as a
    count of int64 words: an [n x i8] array type made LLVM's InstCombine take seconds per buffer (measured:
    4.5 against 0.8 s to compile one function with an 8 KB buffer)."""
    if not isinstance(nbytes, types.IntegerLiteral):
        return None
    words = (nbytes.literal_value + 7) // 8

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        with builder.goto_entry_block():
            slot = builder.alloca(i64, size=ir.Constant(i64, words))
        slot.align = 64
        return builder.ptrtoint(slot, i64)

    return types.int64(nbytes), codegen


@intrinsic
def fmuladd(typingctx, a, b, c):
    """a*b + c, fused where the hardware has FMA (llvm.fmuladd; separate multiply and add elsewhere)."""
    if not (isinstance(a, types.Float) and a == b == c):
        return None

    def codegen(context, builder, sig, args):
        ty = args[0].type
        fn = builder.module.declare_intrinsic("llvm.fmuladd", [ty], ir.FunctionType(ty, [ty, ty, ty]))
        return builder.call(fn, args)

    return a(a, b, c), codegen


def machine_flag(builder: ir.IRBuilder, name: str, value: bool) -> ir.Value:
    """An i1 that depends on the machine the code is for, read from the internal constant `name` (`value`: this
    process's CPU). LLVM's first passes fold it, and the IR numba's front end makes is the same for every
    machine: machine_code/aot.py compiles it once for every level, setting each flag for the level (its `flags`)."""
    module = builder.module
    try:
        flag = module.get_global(name)
    except KeyError:
        flag = ir.GlobalVariable(module, ir.IntType(1), name)
        flag.linkage, flag.global_constant = "internal", True
        flag.initializer = ir.Constant(ir.IntType(1), int(value))
    return builder.load(flag)


def has_feature(arch: str, features: str | None, x86_feature: str) -> bool:
    """Whether the code numba compiles for `arch` with `features` (an LLVM feature string; None: this host's CPU)
    has the x86-64 feature `x86_feature` (f16c, fma); every aarch64 CPU has what those give (ARMv8-A's FCVT and
    FMADD)."""
    if arch != "x86_64":
        return True
    if features is not None:
        return f"+{x86_feature}" in features.split(",")
    return bool(llvm.get_host_cpu_features().get(x86_feature))


def hardware_fma(arch: str, features: str | None) -> bool:
    """Whether that code has a fused multiply-add instruction (x86-64 from x86-64-v3)."""
    return has_feature(arch, features, "fma")


FMA_FLAG = "lossops_hardware_fma"
HARDWARE_FMA = hardware_fma(ARCH, numba.config.CPU_FEATURES)  # NUMBA_CPU_FEATURES where set


@numba.njit
def _product_error_in_float64(a, b, p):
    return np.float32(np.float64(a) * np.float64(b) - np.float64(p))


@intrinsic
def product_error32(typingctx, a, b, p):
    """a * b - p for float32 a, b, p, rounded once to float32: one fused multiply-add where the machine has one
    (a machine flag), else in float64, where a float32 product is exact; the same bits either way."""
    if not (a == b == p == types.float32):
        return None

    def codegen(context, builder, sig, args):
        ty = ir.FloatType()
        fma = builder.module.declare_intrinsic("llvm.fma", [ty], ir.FunctionType(ty, [ty, ty, ty]))
        fused = builder.call(fma, [args[0], args[1], builder.fneg(args[2])])
        software = context.compile_internal(builder, _product_error_in_float64.py_func, sig, args)
        return builder.select(machine_flag(builder, FMA_FLAG, HARDWARE_FMA), fused, software)

    return types.float32(a, b, p), codegen


def streaming_stores(arch: str) -> bool:
    """Whether the engine streams large outputs on `arch`: on x86-64 a non-temporal store writes a cache line
    without first reading it (a plain store's read-for-ownership makes a large output cost twice its bytes),
    and `sfence` orders such stores. Not on aarch64, where nothing measured them."""
    return arch == "x86_64"


STREAMING_FLAG = "lossops_streaming_stores"
STREAMING_STORES = streaming_stores(ARCH)


@intrinsic
def streams(typingctx):
    """Whether the machine the code is for streams large outputs (`streaming_stores`), as a machine flag."""

    def codegen(context, builder, sig, args):
        return machine_flag(builder, STREAMING_FLAG, STREAMING_STORES)

    return types.boolean(), codegen


PLANNER = "lossops_plan"  # the symbol of the planner (engine.planner), compiled once for every operator


@intrinsic
def call_planner(typingctx, address):
    """Call the planner through its symbol, which the JIT (machine_code/compiled.py) or the library's link defines:
    an operator's code then holds a call, not a copy of the planner."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        planner = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64]), PLANNER)
        return builder.call(planner, [args[0]])

    return types.int64(address), codegen


@intrinsic
def stream_32(typingctx, dst, src):
    """Copy 32 bytes from address src to address dst, both 32-byte aligned, with a non-temporal store."""
    if not (isinstance(dst, types.Integer) and isinstance(src, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        vector = ir.VectorType(ir.IntType(64), 4).as_pointer()
        value = builder.load(builder.inttoptr(args[1], vector), align=32)
        store = builder.store(value, builder.inttoptr(args[0], vector), align=32)
        store.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))
        return context.get_dummy_value()

    return types.void(dst, src), codegen


@intrinsic
def prefetch(typingctx, address):
    """A hint to bring the cache line at `address` (an integer) into every cache level; never faults, whatever
    the address. llvm.prefetch: x86-64's prefetcht0, aarch64's prfm."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [_i8p, i32, i32, i32]))
        read, every_level, data = ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)
        builder.call(fn, [builder.inttoptr(args[0], _i8p), read, every_level, data])
        return context.get_dummy_value()

    return types.void(address), codegen


@intrinsic
def store_fence(typingctx):
    """sfence: the non-temporal stores before it are visible before any store after it. x86-64's instruction,
    emitted where numba lowers for x86-64 only; the engine calls it on its streamed path alone, which the
    streaming flag folds away for a machine that does not stream (machine_code/aot.py checks that none is left)."""

    def codegen(context, builder, sig, args):
        if ARCH == "x86_64":
            fn = builder.module.declare_intrinsic("llvm.x86.sse.sfence", fnty=ir.FunctionType(ir.VoidType(), []))
            builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def bits32(typingctx, value):
    """The bits of a float32, as a non-negative int64."""
    if value != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.zext(builder.bitcast(args[0], ir.IntType(32)), ir.IntType(64))

    return types.int64(value), codegen


@intrinsic
def bits64(typingctx, value):
    """The bits of a float64, as an int64."""
    if value != types.float64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(value), codegen


def _low_bits(builder, value, width: int):
    have = value.type.width
    if have > width:
        return builder.trunc(value, ir.IntType(width))
    return builder.zext(value, ir.IntType(width)) if have < width else value


@intrinsic
def float32_of(typingctx, value):
    """The float32 whose bits are the low 32 bits of an integer."""
    if not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(_low_bits(builder, args[0], 32), ir.FloatType())

    return types.float32(value), codegen


@intrinsic
def float64_of(typingctx, value):
    """The float64 whose bits are the low 64 bits of an integer."""
    if not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(_low_bits(builder, args[0], 64), ir.DoubleType())

    return types.float64(value), codegen


@intrinsic
def small_int_to(typingctx, value, like):
    """An integer known to fit in 32 bits, converted to like's float type through int32: AVX2 converts int32
    vectors to floats but not int64 ones (numba does integer arithmetic in int64, which would keep the loop
    scalar)."""
    if not (isinstance(value, types.Integer) and isinstance(like, types.Float)):
        return None

    def codegen(context, builder, sig, args):
        target = ir.FloatType() if sig.return_type == types.float32 else ir.DoubleType()
        return builder.sitofp(_low_bits(builder, args[0], 32), target)

    return like(value, like), codegen


@intrinsic
def select(typingctx, condition, a, b):
    """a if condition else b, as one LLVM select: no branch, so loops around it vectorise (a conditional
    expression is a branch, which LLVM turns into a select only when both arms are cheap: not a division)."""
    if not (isinstance(condition, types.Boolean) and a == b):
        return None

    def codegen(context, builder, sig, args):
        return builder.select(args[0], args[1], args[2])

    return a(condition, a, b), codegen


def like(x, c):
    """The constant c in x's float type (numba would promote float32 op int literal to float64)."""


@overload(like, inline="always")
def _like(x, c):
    if x == types.float32:
        return lambda x, c: np.float32(c)
    if x == types.float64:
        return lambda x, c: np.float64(c)
    return None


@numba.njit(inline="always")
def stream_copy(dst, src, nbytes):
    """dst[:nbytes] = src[:nbytes] (addresses, both 32-byte aligned) without reading dst's lines into the
    cache; a tail under 32 bytes is stored as usual. Call `store_fence` before the data is handed on. Only
    where `streams()`: the engine plans a streamed output nowhere else."""
    k = 0
    while k + 32 <= nbytes:
        stream_32(dst + k, src + k)
        k += 32
    tail_dst, tail_src = view(dst + k, nbytes - k, np.uint8), view(src + k, nbytes - k, np.uint8)
    for j in range(nbytes - k):
        tail_dst[j] = tail_src[j]
