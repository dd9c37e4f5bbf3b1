"""Where the kernels' machine code comes from, decided once per process:

- prebuilt: a wheel carries libraries compiled ahead of time (ort_ext/aot.py), one per x86-64 level; the best
  level the CPU supports is loaded with ctypes. Nothing is compiled or written, and neither numba nor Python's
  C API is needed by the code.
- jit: numba compiles the same functions in this process (ort_ext/compiled.py), cached on disk; for a checkout
  and for platforms without prebuilt code, with `lossops[jit]`.
- none: the operators run as their standard-op decomposition, said once, in one line.

`LOSSOPS_KERNELS` chooses instead: `jit`, a level (`x86-64-v3`), or `none`.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # the lossops package (the repository root in a checkout)
LIBRARIES = Path(__file__).resolve().parent / "prebuilt"  # what ort_ext/aot.py writes: manifest.json, *.so
# everything the machine code is made from: the kernels and their engine, the compiled ORT callbacks and the
# OrtApi slots they call, how a library is built, the operator records (the numpy front end, kernels/__init__.py,
# is Python that calls the code, not part of it)
SOURCES = ("ort_ext/kernels/*.py", "ort_ext/compiled.py", "ort_ext/capi.py", "ort_ext/aot.py", "opset/*.py")
_NOT_COMPILED = ("ort_ext/kernels/__init__.py",)
ENV = "LOSSOPS_KERNELS"
KINDS = ("compute", "task", "plan", "start", "finish")

# The levels, best last, each named as LLVM names the CPU it targets: the x86-64 micro-architecture levels (the
# psABI's), then x86-64-v4 scheduled for AMD's Zen 4 and 5. For each, the /proc/cpuinfo flags it adds to the
# one before and the LLVM features it adds. LLVM's generic x86-64-v4 prefers 256-bit vectors (Skylake-SP's
# tuning); the v4 libraries use the 512-bit registers, as numba's JIT does on an AVX-512 host that does not
# prefer 256 (Zen 4/5, Sapphire Rapids), where the loops with exp and log gain most. On Zen the generic
# schedule left the log loops of BinaryCrossEntropy behind the JIT (docs/speed.md); sse4a, which only
# AMD's CPUs have, marks a CPU with AVX-512 as a Zen 4 or later.
LEVELS = {
    "x86-64-v2": (("cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"),
                  "+cx16,+sahf,+popcnt,+sse3,+sse4.1,+sse4.2,+ssse3"),
    "x86-64-v3": (("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"),
                  "+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,+movbe,+xsave"),
    "x86-64-v4": (("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
                  "+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl,+evex512,-prefer-256-bit"),
    "znver4": (("sse4a",), ""),
}


def llvm_features(level: str) -> str:
    """The LLVM feature string of a level: its own features and those of the levels below it."""
    names = list(LEVELS)
    return ",".join(LEVELS[n][1] for n in names[:names.index(level) + 1] if LEVELS[n][1])


@functools.cache
def source_stamp() -> str:
    """A hash over every source the compiled code is made from: a prebuilt library or a cache entry whose
    stamp differs was made from other sources and is never used."""
    digest = hashlib.sha256()
    for pattern in SOURCES:
        for path in sorted(PACKAGE.glob(pattern)):
            if path.relative_to(PACKAGE).as_posix() in _NOT_COMPILED:
                continue
            digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


source_stamp()  # now, as the modules are imported: an upgrade under a running process must not pair the old
# Python (the record's layout) with the new machine code


def cpu_levels() -> list[str]:
    """The levels this CPU runs, lowest first (none off Linux x86-64)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return []
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return []
    have, levels = set(flags), []
    for level, (needs, _) in LEVELS.items():
        if not have.issuperset(needs):
            break
        levels.append(level)
    return levels


@dataclass(frozen=True)
class Code:
    """The machine code of every operator with a kernel: `address(op, kind)` of each compiled function."""

    source: str  # for people: "prebuilt x86-64-v3", "numba JIT"
    ops: tuple[str, ...]

    def address(self, op_name: str, kind: str, elem_type: int | None = None) -> int:
        """The address of `kind` for `op_name`: serving every element type, or where the code is compiled on
        demand, `elem_type` (where given) alone."""
        return self.addresses(op_name, (kind,), elem_type)[0]

    def addresses(self, op_name: str, kinds: tuple[str, ...], elem_type: int | None = None) -> list[int]:
        raise NotImplementedError

    def trampoline(self) -> int:
        raise NotImplementedError


@dataclass(frozen=True)
class Prebuilt(Code):
    library: ctypes.CDLL | None = None

    def addresses(self, op_name: str, kinds: tuple[str, ...], elem_type: int | None = None) -> list[int]:
        if op_name not in self.ops:
            raise ValueError(f"'{op_name}' has no lossops kernel; the kernels are {sorted(self.ops)}")
        return [ctypes.cast(getattr(self.library, f"lossops_{op_name}_{kind}"), ctypes.c_void_p).value
                for kind in kinds]

    def trampoline(self) -> int:
        return ctypes.cast(self.library.lossops_trampoline, ctypes.c_void_p).value


class Jit(Code):
    def addresses(self, op_name: str, kinds: tuple[str, ...], elem_type: int | None = None) -> list[int]:
        from . import compiled

        return [f.address for f in compiled.functions(op_name, elem_type).get(*kinds)]

    def trampoline(self) -> int:
        from . import compiled

        return compiled.trampoline().address


def manifest() -> dict | None:
    try:
        return json.loads((LIBRARIES / "manifest.json").read_text())
    except (OSError, ValueError):
        return None


def _note(text: str) -> None:
    print(f"lossops: {text}", file=sys.stderr, flush=True)


def load_prebuilt(level: str) -> Prebuilt | str:
    """The prebuilt library of `level`, or why it cannot be used."""
    found = manifest()
    if found is None:
        return "this install has no prebuilt kernels"
    if found.get("stamp") != source_stamp():
        return "the prebuilt kernels were built from other sources than the installed ones"
    if level not in found.get("levels", {}):
        return f"no prebuilt kernels for {level} (the install has {', '.join(found.get('levels', {})) or 'none'})"
    try:
        library = ctypes.CDLL(str(LIBRARIES / found["levels"][level]))
        stamp = ctypes.c_char_p.in_dll(library, "lossops_stamp").value
    except (OSError, ValueError) as e:
        return f"the prebuilt kernels for {level} do not load ({e})"
    if stamp is None or stamp.decode() != source_stamp():
        return f"the prebuilt library for {level} is not the one its manifest names"
    return Prebuilt(f"prebuilt {level}", tuple(found["ops"]), library)


def _numba() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):
        return False


def _jit() -> Jit:
    from .kernels.registry import KERNELS

    return Jit("numba JIT", tuple(KERNELS))


@functools.cache
def _choice() -> tuple[Code | None, str]:
    """(this process's machine code, or None; why None)."""
    wanted = os.environ.get(ENV, "").strip()
    if wanted == "none":
        return None, f"turned off by {ENV}=none"
    if wanted == "jit":
        return _jit(), ""
    if wanted:
        if wanted not in LEVELS:
            raise ValueError(f"{ENV}={wanted!r}; expected 'jit', 'none' or one of {', '.join(LEVELS)}")
        found = load_prebuilt(wanted)
        if isinstance(found, str):
            raise ValueError(f"{ENV}={wanted}: {found}")
        return found, ""
    levels = cpu_levels()
    why = "this CPU is not x86-64-v2 or later" if not levels else ""
    if levels:
        found = load_prebuilt(levels[-1])
        if isinstance(found, Prebuilt):
            return found, ""
        why = found
    if _numba():
        if manifest() is not None:  # a wheel whose libraries do not serve here: say why numba compiles
            _note(f"{why}; compiling them with numba instead")
        return _jit(), ""
    why = f"{why}, and numba is not installed (pip install 'lossops[jit]' for the compiled kernels)"
    _note(f"{why}: lossops operators run as their standard-op decomposition")
    return None, why


def code() -> Code | None:
    """This process's machine code for the kernels, or None (the decomposition runs; said once)."""
    return _choice()[0]


def why_none() -> str:
    """Why `code()` is None ("" where it is not)."""
    return _choice()[1]


def reads(op_name: str) -> tuple[bool, ...]:
    """Per input of `op_name`: does its kernel read the input's data (for the bench's bytes moved)."""
    found = manifest()
    if isinstance(code(), Prebuilt) and found is not None:
        return tuple(found["ops"][op_name]["reads"])
    from .kernels.registry import KERNELS

    return KERNELS[op_name].reads
