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

from ..kernels.targets import ARCH, LEVELS, cpu_levels, levels_of
from .stamp import source_stamp

LIBRARIES = Path(__file__).resolve().parent / "prebuilt"  # what aot.py writes: manifest.json, *.so
ENV = "LOSSOPS_KERNELS"
KINDS = ("compute", "task", "plan", "start", "finish")


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
        return "the prebuilt kernels were built from other sources than the installed ones"
    if level not in cpu_levels():
        return f"this CPU cannot run {level} code (it runs {', '.join(cpu_levels()) or 'none of them'})"
    if level not in found["levels"]:
        return f"no prebuilt kernels for {level} (the install has {', '.join(found['levels']) or 'none'})"
    entry = found["levels"][level]
    path = LIBRARIES / entry["file"]
    try:
        data = path.read_bytes()
    except OSError as e:
        return f"the prebuilt library for {level} cannot be read ({e})"
    if len(data) != entry["size"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        return (f"the prebuilt library for {level} is damaged or replaced ({len(data)} bytes; the manifest says "
                f"{entry['size']} and another hash)")
    try:
        library = ctypes.CDLL(str(path))
        stamp = ctypes.c_char_p.in_dll(library, "lossops_stamp").value
        built_for = ctypes.c_char_p.in_dll(library, "lossops_level").value
    except (OSError, ValueError) as e:
        return f"the prebuilt kernels for {level} do not load ({e})"
    if stamp is None or stamp.decode() != source_stamp() or built_for is None or built_for.decode() != level:
        return f"the prebuilt library under {level}'s name was built for {built_for and built_for.decode()}"
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
    line, and the automatic choice is made instead."""
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
        _note(f"{ENV}={wanted} refused: {found}; choosing as without it")
    elif wanted:
        _note(f"{ENV}={wanted!r} is not 'jit', 'none' or one of {', '.join(levels_of())}: choosing as without it")
    levels = cpu_levels()
    why = "" if levels else (f"this CPU is not {levels_of()[0]} or later" if levels_of()
                             else f"lossops has no prebuilt kernels for {ARCH or 'this machine'}")
    if levels:
        found = load_prebuilt(levels[-1])
        if isinstance(found, Prebuilt):
            return found, ""
        why = found
    if _numba():
        if manifest() is not None or manifest_problem():  # a wheel whose libraries do not serve here: say why
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
    from ..kernels.registry import KERNELS

    return KERNELS[op_name].reads
