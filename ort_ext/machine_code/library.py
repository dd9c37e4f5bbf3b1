"""The native custom-op library (custom_ops.c): its tables generated from the operator records, its build next
to the kernel libraries (aot.py), and `library_path()`, what every ONNX Runtime host registers.

Why generated: the library must check a node's attributes with the Python path's messages and hand the kernels
the same state (ort_ext/host.py), so what it needs (each operator's inputs, optional flags, attributes with their
kinds, allowed values, ranges, defaults and expectations; the OrtApi slots and OrtCustomOp fields of capi.py; the
levels of machine_code.py with their files, sizes, SHA-256 digests and CPU flags; the state's layout) is written into
lossops_tables.h from those sources when the wheel is built. A new operator adds no C.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

from ...opset import spec
from ..kernels import layout
from ..kernels.targets import ARCH, ARCHES, LEVELS, levels_of
from . import capi
from .loader import ENV, LIBRARIES, as_built, level_file, manifest, manifest_problem
from .stamp import source_stamp

FILE = "lossops_custom_ops.so"
SOURCE = Path(__file__).resolve().parent / "custom_ops.c"


def library_path() -> str:
    """The path to pass to `SessionOptions.register_custom_ops_library` (or any ONNX Runtime host's
    equivalent): lossops' operators in the domain `lossops`, on the kernels of the best level this CPU runs.
    Imports neither numba nor torch. The file is checked first against the size and SHA-256 the build recorded (a
    truncated library, mapped by ONNX Runtime, ends the process at the first page past its end). RuntimeError, in
    one line, where this install has no such library or it is not the file the build wrote."""
    path = LIBRARIES / FILE
    if not path.is_file():
        raise RuntimeError(f"lossops: this install has no native custom-op library ({path} is missing): it comes "
                           "with the platform wheel (Linux x86-64 and aarch64), or `python -m "
                           f"lossops.ort_ext.machine_code.aot {LIBRARIES}` in a checkout")
    entry = (manifest() or {}).get("library")
    if not isinstance(entry, dict) or entry.get("file") != FILE:
        why = manifest_problem() or "the manifest beside it names no native library"
        raise RuntimeError(f"lossops: {path} cannot be checked: {why}; reinstall lossops")
    if not as_built(path.read_bytes(), entry):
        raise RuntimeError(f"lossops: {path} is damaged or replaced (it is not the file the build wrote: its size or "
                           "SHA-256 differs); reinstall lossops")
    return str(path)


def choice(path: str) -> str:
    """What the library at `path` chooses in this process: a level's name, or why it registers no kernel."""
    import ctypes

    chosen = ctypes.CDLL(path).lossops_library_choice
    chosen.restype = ctypes.c_char_p
    return chosen().decode()


def compiler(arch: str) -> str:
    """The C compiler that links for `arch`: $CC for this machine's, $CC_AARCH64 (say) or Debian's cross compiler's
    name (`aarch64-linux-gnu-gcc`) for another. SystemExit, in one line, where there is none."""
    variable = "CC" if arch == ARCH else f"CC_{arch.upper()}"
    cc = os.environ.get(variable, "cc" if arch == ARCH else f"{arch}-linux-gnu-gcc")
    if shutil.which(cc) is None:
        package = "" if arch == ARCH else f" (Debian: apt-get install gcc-{arch.replace('_', '-')}-linux-gnu)"
        raise SystemExit(f"lossops: building the {arch} kernels needs a C compiler for {arch}: {cc!r} not found; "
                         f"set {variable}{package}, or build a pure wheel with LOSSOPS_AOT=0")
    return cc


def _c(value: str) -> str:
    """A C string literal (the records' text is ASCII)."""
    value.encode("ascii")
    return json.dumps(value)


def _format(template: str, **known: str) -> str:
    """A C printf format from one of the Python templates: the fields in `known` filled in (a % in them doubled),
    every other field a %s, in the order it appears."""
    parts = re.split(r"\{(\w+)\}", template)
    return "".join(part.replace("%", "%%") if k % 2 == 0 else
                   known[part].replace("%", "%%") if part in known else "%s" for k, part in enumerate(parts))


def _attribute(op, a) -> tuple[list[str], str]:
    """(the arrays an attribute's entry points to, its entry in the operator's table)."""
    kind = {str: "s", int: "i", float: "f"}[a.kind]
    arrays, allowed_s, allowed_i, codes = [], "NULL", "NULL", "NULL"
    prefix = f"{op.name}_{a.name}"
    param = -1 if a.name == "reduction" else op.params.index(a)
    if a.enum and kind == "s":
        allowed_s, codes = f"{prefix}_allowed", f"{prefix}_codes"
        arrays.append(f"static const char *const {allowed_s}[] = {{{', '.join(_c(v) for v in a.allowed)}}};")
        values = [layout.REDUCTION_CODES[v] if a.name == "reduction" else a.allowed.index(v) for v in a.allowed]
        arrays.append(f"static const int64_t {codes}[] = {{{', '.join(map(str, values))}}};")
    elif a.enum:
        allowed_i = f"{prefix}_allowed"
        arrays.append(f"static const int64_t {allowed_i}[] = {{{', '.join(str(v) for v in a.allowed)}}};")
    low = "-INFINITY" if a.low is None else repr(float(a.low))
    high = "INFINITY" if a.high is None else repr(float(a.high))
    said = {"op": op.name, "name": a.name}
    entry = (f"{{{_c(a.name)}, '{kind}', {param}, {len(a.allowed)}, "
             f"{allowed_s}, {allowed_i}, {codes}, {low}, {high}, "
             f"{_c(a.default) if kind == 's' else 'NULL'}, {a.default if kind == 'i' else 0}, "
             f"{repr(float(a.default)) if kind == 'f' else '0.0'}, "
             f"{_c(_format(spec.WRONG_KIND, **said, expected=a.type_expectation()))}, "
             f"{_c(_format(spec.NOT_SINGLE, **said, expected=a.type_expectation()))}, "
             f"{_c(_format(spec.NOT_ALLOWED, **said, expected=a.expectation()))}}}")
    return arrays, entry


def _sha256_constants() -> tuple[list[int], list[int]]:
    """SHA-256's round constants and initial hash (FIPS 180-4: the first 32 bits of the fractional parts of the
    cube roots of the first 64 primes, and of the square roots of the first 8), computed in integers."""
    primes = [p for p in range(2, 312) if all(p % d for d in range(2, int(p ** 0.5) + 1))][:64]

    def icbrt(n: int) -> int:
        x = 1 << ((n.bit_length() + 2) // 3)
        while True:
            y = (2 * x + n // (x * x)) // 3
            if y >= x:
                return x
            x = y

    k = [icbrt(p << 96) & 0xFFFFFFFF for p in primes]
    h = [math.isqrt(p << 64) & 0xFFFFFFFF for p in primes[:8]]
    return k, h


def tables(level_files: dict[str, bytes], arch: str) -> str:
    """lossops_tables.h: everything custom_ops.c knows, from the sources that hold it, for a library of `arch`."""
    from ...opset import DOMAIN, OPS
    from ..kernels.registry import KERNELS
    from . import loader

    lines = ["/* Generated by lossops.ort_ext.library from the operator records, capi.py, machine_code.py and",
             " * kernels/layout.py when the kernels are built: do not edit. */",
             f"#define LOSSOPS_STAMP {_c(source_stamp())}",
             f"#define LOSSOPS_DOMAIN {_c(DOMAIN)}",
             f"#define LOSSOPS_ENV {_c(ENV)}",
             f"#define LOSSOPS_ARCH_MACRO __{arch}__",
             f"#define CPUINFO_KEY {_c(ARCHES[arch].cpuinfo_key)}",
             f"#define GLIBC_BASELINE {_c(ARCHES[arch].glibc_baseline)}",
             f"#define LOSSOPS_API_VERSION {capi.API_VERSION}",
             f"#define LOSSOPS_OP_VERSION {capi.OP_VERSION}",
             f"#define ORT_INVALID_ARGUMENT {capi.ORT_INVALID_ARGUMENT}",
             f"#define INPUT_REQUIRED {capi.INPUT_REQUIRED}",
             f"#define INPUT_OPTIONAL {capi.INPUT_OPTIONAL}",
             f"#define QUOTED_BYTES {spec.QUOTED_MOST}"]
    # the loader's words (loader.py), as printf formats: each field a %s, in the order the template has it
    lines += [f"#define SAID_{name} {_c(_format(getattr(loader, name)))}"
              for name in ("ABSENT", "NOT_A_FILE", "UNREADABLE", "DAMAGED", "NO_LOAD", "OTHER_LEVEL", "OTHER_SOURCES",
                           "CPU_CANNOT", "NO_LEVEL", "TRYING", "DECOMPOSITION", "OVERRIDE_UNKNOWN", "OVERRIDE_REFUSED")]
    lines += [f"#define NOT_SINGLE_{name} {_c(phrase)}" for name, phrase in spec.NOT_SINGLE_KINDS.items()
              if name in ("FLOATS", "INTS", "STRINGS", "TENSOR")]
    lines += [f"#define SLOT_{name} {slot}" for name, slot in capi.SLOTS.items()]
    lines += [f"#define {name} {getattr(layout, name)}"
              for name in ("INT64", "S_COMPUTE", "S_API", "S_WORKER", "S_ELEM_TYPE", "S_ITEMSIZE", "S_REDUCTION",
                           "S_PARAMS", "STATE_WORDS")]
    fields = [f"    {'uint32_t ' if ctype is capi.C.c_uint32 else 'void *'}{name};"
              for name, ctype in capi.OrtCustomOp._fields_]
    lines += ["typedef struct {", *fields, "} lossops_custom_op;"]
    k, h = _sha256_constants()
    lines.append(f"static const uint32_t SHA256_K[64] = {{{', '.join(f'0x{v:08x}' for v in k)}}};")
    lines.append(f"static const uint32_t SHA256_H[8] = {{{', '.join(f'0x{v:08x}' for v in h)}}};")
    lines.append("static const struct lossops_level LEVELS[] = {")
    for level in levels_of(arch):  # size -1: not built
        data = level_files.get(level)
        size, digest = (-1, "") if data is None else (len(data), hashlib.sha256(data).hexdigest())
        lines.append(f"    {{{_c(level)}, {_c(level_file(level))}, {size}, {_c(digest)}, "
                     f"{_c(' '.join(LEVELS[level].needs))}}},")
    lines.append("};")
    lines.append("static const struct lossops_type TYPES[] = {")
    lines += [f"    {{{elem}, {dtype.itemsize}}}," for elem, dtype in layout.ELEMENT_TYPES.items()]
    lines.append("};")
    entries = []
    everyone = sorted({a.name for name in KERNELS for a in OPS[name].attributes})
    for name in KERNELS:
        op = OPS[name]
        own = [a.name for a in op.attributes]
        foreign = [n for n in everyone if n not in own]
        lines.append(f"static const char *const {name}_foreign[] = {{{', '.join(map(_c, foreign)) or 'NULL'}}};")
        attributes = []
        for a in op.attributes:
            arrays, entry = _attribute(op, a)
            lines += arrays
            attributes.append(entry)
        lines.append(f"static const unsigned char {name}_optional[] = "
                     f"{{{', '.join(str(int(i.optional)) for i in op.inputs)}}};")
        lines.append(f"static const unsigned char {name}_indices[] = "
                     f"{{{', '.join(str(int(i.indices)) for i in op.inputs)}}};")
        lines.append(f"static const struct lossops_attribute {name}_attributes[] = {{")
        lines += [f"    {entry}," for entry in attributes]
        lines.append("};")
        unknown = _format(spec.UNKNOWN_ATTRIBUTE, op=op.name, names=op.attribute_names)
        entries.append(f"    {{{_c(name)}, {len(op.inputs)}, {name}_optional, {name}_indices, {len(op.attributes)}, "
                       f"{name}_attributes, {len(foreign)}, {name}_foreign, {_c(unknown)}}},")
    lines += ["static const struct lossops_op OPS[] = {", *entries, "};"]
    return "\n".join(lines) + "\n"


def build(out: Path, work: Path, arch: str) -> Path:
    """Compile custom_ops.c with its tables into `out`, next to the kernel libraries of `arch` built there."""
    built = {level: (out / level_file(level)).read_bytes() for level in levels_of(arch)
             if (out / level_file(level)).is_file()}
    (work / "lossops_tables.h").write_text(tables(built, arch))
    cc = compiler(arch)
    library = out / FILE
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-format-truncation",
                    "-fvisibility=hidden", f"-I{work}", "-o", str(library), str(SOURCE),
                    "-Wl,--no-as-needed", "-l:libdl.so.2", "-lpthread", "-lm",  # glibc before 2.34: dlopen's home
                    "-Wl,-z,defs", "-Wl,-z,noexecstack", "-Wl,--strip-debug"], check=True)
    return library
