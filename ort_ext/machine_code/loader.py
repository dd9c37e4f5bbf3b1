"""Where the kernels' machine code comes from, decided once per process:

- prebuilt: a platform wheel carries libraries compiled ahead of time (aot.py), one per level of its
  architecture (x86-64, aarch64); the best level the CPU supports is loaded with ctypes. Nothing is compiled
  or written, and neither numba nor Python's C API is needed by the code.
- jit: numba compiles the same functions in this process (compiled.py), cached on disk; for a checkout
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
import sys
from dataclasses import dataclass
from pathlib import Path

from ...opset.spec import quoted
from ..kernels.targets import ARCH, LEVELS, cpu_levels, levels_of
from .stamp import source_stamp

LIBRARIES = Path(__file__).resolve().parent / "prebuilt"  # what aot.py writes: manifest.json, *.so
ENV = "LOSSOPS_KERNELS"
KINDS = ("compute", "task", "plan", "start", "finish")

# Why a level's kernel library is not used, and what is used instead: the words of this loader and of the native
# library's (library.py writes them into its tables, each field a %s in the order it appears here). Both try the
# best level the CPU runs, then each level below it, then (Python with numba only) the JIT, then the
# decomposition, and say each refusal once.
ABSENT = "this install has no kernel library for {level}"
NOT_A_FILE = "the kernel library for {level} is not a file ({path})"
UNREADABLE = "the kernel library for {level} cannot be read ({path})"
DAMAGED = ("the kernel library for {level} is damaged or replaced ({path} is not the file the build wrote: its size "
           "or SHA-256 differs)")
NO_LOAD = "the kernel library for {level} does not load ({error})"
OTHER_LEVEL = "the kernel library under {level}'s name was built for {other}"
OTHER_SOURCES = "the kernel library for {level} was built from other sources than the installed ones"
CPU_CANNOT = "this CPU cannot run {level} code"
NO_LEVEL = "this CPU is not {level} or later"
TRYING = "{why}; trying {level}"
DECOMPOSITION = "{why}: lossops operators run as their standard-op decomposition"
OVERRIDE_UNKNOWN = "{env}={value} is not 'jit', 'none' or one of {levels}: choosing as without it"
OVERRIDE_REFUSED = "{env}={value} refused: {why}; choosing as without it"


def level_file(level: str) -> str:
    """The file name of a level's library (aot.py writes it, the manifest names it)."""
    return f"lossops_kernels-{level}.so"


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
    """The prebuilt libraries' manifest, or None where there is none or it is not one (`manifest_problem`)."""
    return _manifest()[0]


def manifest_problem() -> str:
    """Why ort_ext/machine_code/prebuilt/manifest.json cannot be used ("" where it can, or where there is none)."""
    return _manifest()[1]


def _manifest() -> tuple[dict | None, str]:
    path = LIBRARIES / "manifest.json"
    try:
        found = json.loads(path.read_text())
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError) as e:
        return None, f"{path} does not read as JSON ({e})"
    levels = found.get("levels") if isinstance(found, dict) else None
    if not (isinstance(found, dict) and isinstance(found.get("stamp"), str) and isinstance(found.get("ops"), dict)
            and isinstance(levels, dict)
            and all(isinstance(v, dict) and isinstance(v.get("file"), str) and isinstance(v.get("size"), int)
                    and isinstance(v.get("sha256"), str) for v in levels.values())):
        return None, (f"{path} is not a lossops manifest (expected stamp, ops, and levels each with file, size "
                      "and sha256)")
    return found, ""


def as_built(data: bytes, entry: dict) -> bool:
    """Whether a library's bytes are the file the build wrote: the size and SHA-256 its manifest entry records."""
    return len(data) == entry.get("size") and hashlib.sha256(data).hexdigest() == entry.get("sha256")


def _note(text: str) -> None:
    print(f"lossops: {text}", file=sys.stderr, flush=True)


def load_prebuilt(level: str) -> Prebuilt | str:
    """The prebuilt library of `level`, or why it cannot be used: nothing is loaded that this CPU cannot run or
    that is not the file the manifest names (a truncated file mapped by the loader would end the process)."""
    found, problem = _manifest()
    if problem:
        return problem
    if found is None:
        return "this install has no prebuilt kernels"
    if found["stamp"] != source_stamp():
        return OTHER_SOURCES.format(level=level)
    if level not in cpu_levels():
        return CPU_CANNOT.format(level=level)
    if level not in found["levels"]:
        return ABSENT.format(level=level)
    entry = found["levels"][level]
    path = LIBRARIES / entry["file"]
    if path.exists() and not path.is_file():
        return NOT_A_FILE.format(level=level, path=path)
    try:
        data = path.read_bytes()
    except OSError:
        return UNREADABLE.format(level=level, path=path)
    if not as_built(data, entry):
        return DAMAGED.format(level=level, path=path)
    try:
        library = ctypes.CDLL(str(path))
        stamp = ctypes.c_char_p.in_dll(library, "lossops_stamp").value
        built_for = ctypes.c_char_p.in_dll(library, "lossops_level").value
    except (OSError, ValueError) as e:
        return NO_LOAD.format(level=level, error=e)
    if built_for is None or built_for.decode() != level:
        return OTHER_LEVEL.format(level=level, other=built_for.decode() if built_for else "none")
    if stamp is None or stamp.decode() != source_stamp():
        return OTHER_SOURCES.format(level=level)
    return Prebuilt(f"prebuilt {level}", tuple(found["ops"]), library)


def _numba() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):
        return False


def _jit() -> Jit:
    from ..kernels.registry import KERNELS

    return Jit("numba JIT", tuple(KERNELS))


@functools.cache
def _choice() -> tuple[Code | None, str]:
    """(this process's machine code, or None; why None). An override that cannot be honoured is said in one
    line, and the automatic choice is made instead: the best level this CPU runs, then each level below it (each
    refusal said once), then numba's JIT where it is installed, then the decomposition."""
    wanted = os.environ.get(ENV, "").strip()
    if wanted == "none":
        return None, f"turned off by {ENV}=none"
    if wanted == "jit" and _numba():
        return _jit(), ""
    if wanted == "jit":
        _note(f"{ENV}=jit, but numba is not installed (pip install 'lossops[jit]'): choosing as without it")
    elif wanted in LEVELS:
        found = load_prebuilt(wanted)
        if isinstance(found, Prebuilt):
            return found, ""
        _note(OVERRIDE_REFUSED.format(env=ENV, value=wanted, why=found))
    elif wanted:
        _note(OVERRIDE_UNKNOWN.format(env=ENV, value=quoted(wanted.encode()), levels=", ".join(levels_of())))
    levels = cpu_levels()
    why = "" if levels else (NO_LEVEL.format(level=levels_of()[0]) if levels_of()
                             else f"lossops has no prebuilt kernels for {ARCH or 'this machine'}")
    built = (manifest() or {}).get("levels", {})
    # best first; where the install has no usable manifest, one try says why (it is no level's own problem)
    tried = [level for level in reversed(levels) if level in built] or levels[-1:]
    for k, level in enumerate(tried):
        found = load_prebuilt(level)
        if isinstance(found, Prebuilt):
            return found, ""
        why = found
        if k + 1 < len(tried):
            _note(TRYING.format(why=why, level=tried[k + 1]))
    if _numba():
        if manifest() is not None or manifest_problem():  # a wheel whose libraries do not serve here: say why
            _note(f"{why}; compiling them with numba instead")
        return _jit(), ""
    why = f"{why}, and numba is not installed (pip install 'lossops[jit]' for the compiled kernels)"
    _note(DECOMPOSITION.format(why=why))
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
    from ..kernels.registry import KERNELS

    return KERNELS[op_name].reads
