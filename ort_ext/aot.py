"""Compile the kernels ahead of time, when a wheel is built: `python -m lossops.ort_ext.aot OUT_DIR`.

For each level (machine_code.LEVELS), processes of its own (`--jobs`, one by default, each a share of the
functions) have numba compile the functions of ort_ext/compiled.py for that level
(NUMBA_CPU_NAME/NUMBA_CPU_FEATURES: numba's optimiser then vectorises for the level's registers, as its JIT does
for the host), take each function's LLVM IR, give the entry point a stable name (`lossops_<Operator>_<kind>`,
`lossops_trampoline`) and every other symbol internal linkage, and have LLVM emit an object file for the level's
CPU; the objects are linked into one shared library with the system C
compiler. Why this route: the kernels stay the numba source they are, the machine code is the JIT's own (same
IR, same optimiser), and the libraries need neither numba nor Python at run time.

numba's function wrappers reference its runtime and CPython on their error paths (unpickling an exception,
taking the GIL to print it). The kernels never raise (error_model="numpy", no allocation through numba), so
those paths are never taken: the symbols are defined by stubs in the library, hidden, so they never stand in
for the real ones of a process that has them.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import machine_code


def _system_symbol(name: str) -> bool:
    for lib in ("libc.so.6", "libm.so.6"):
        try:
            if hasattr(ctypes.CDLL(lib), name):
                return True
        except OSError:
            continue
    return False


def _object(ir_text: str, entry: str, exported: str, machine) -> tuple[bytes, set[str], set[str]]:
    """(object code, undefined functions, undefined data) of one compiled function's module, its entry point
    renamed `exported` and everything else made internal."""
    from llvmlite import binding as llvm

    module = llvm.parse_assembly(ir_text)
    for fn in module.functions:
        if fn.is_declaration:
            continue
        if fn.name == entry:
            fn.name = exported
        else:
            fn.linkage = llvm.Linkage.internal
    undefined_data = set()
    for gv in module.global_variables:
        if gv.is_declaration:
            undefined_data.add(gv.name)
        else:
            gv.linkage = llvm.Linkage.internal
    module.verify()
    undefined = {fn.name for fn in module.functions if fn.is_declaration and not fn.name.startswith("llvm.")}
    return machine.emit_object(module), undefined, undefined_data


# pow's default version is newer than the wheel's manylinux_2_17 baseline (glibc 2.29 gave it a new one): the
# library binds the baseline's version through a hidden function of that name (LLVM emits the call from an
# intrinsic at code generation, so the IR does not declare it).
_BASELINE_POW = ["double lossops_pow_2_2_5(double, double);",
                 '__asm__(".symver lossops_pow_2_2_5, pow@GLIBC_2.2.5");',
                 "HIDDEN double pow(double x, double y) { return lossops_pow_2_2_5(x, y); }"]


def _stubs(functions: set[str], data: set[str], stamp: str, level: str) -> str:
    lines = ["/* lossops: numba's and CPython's symbols on the never-taken error paths of numba's wrappers. */",
             "#define HIDDEN __attribute__((visibility(\"hidden\")))"]
    lines += [f"HIDDEN long {name}(void) {{ return 0; }}" for name in sorted(functions)]
    lines += _BASELINE_POW
    lines += [f"HIDDEN void *{name} = 0;" for name in sorted(data)]
    lines.append(f'__attribute__((visibility("default"))) const char *lossops_stamp = "{stamp}";')
    lines.append(f'__attribute__((visibility("default"))) const char *lossops_level = "{level}";')
    return "\n".join(lines) + "\n"


def compile_part(level: str, work: Path, part: int, parts: int) -> None:
    """In a process whose numba targets `level` (see `main`): compile every `parts`-th function from the `part`-th
    into an object file in `work`, with the symbols it leaves undefined (`undefined-<part>.json`)."""
    from llvmlite import binding as llvm

    from . import compiled
    from .kernels.registry import KERNELS

    compiled.CACHE = False
    target = llvm.Target.from_triple(llvm.get_process_triple())
    machine = target.create_target_machine(cpu=level, features=machine_code.llvm_features(level), opt=3,
                                           reloc="pic", codemodel="default")
    jobs = [(f"lossops_{op}_{kind}", lambda op=op, kind=kind: compiled.functions(op)[kind])
            for op in KERNELS for kind in machine_code.KINDS]
    jobs.append(("lossops_trampoline", compiled.trampoline))
    functions, data = set(), set()
    for exported, get in jobs[part::parts]:
        fn = get()
        code, undefined, undefined_data = _object(fn._library.get_llvm_str(), fn.native_name, exported, machine)
        (work / f"{exported}.o").write_bytes(code)
        functions |= undefined
        data |= undefined_data
    (work / f"undefined-{part}.json").write_text(json.dumps({"functions": sorted(functions), "data": sorted(data)}))


def link(level: str, work: Path, out: Path) -> None:
    """Link the object files `compile_part` wrote into `work` into the level's library in `out`."""
    undefined = [json.loads(p.read_text()) for p in sorted(work.glob("undefined-*.json"))]
    functions = {f for u in undefined for f in u["functions"]}
    data = {d for u in undefined for d in u["data"]}
    stubs = work / "stubs.c"
    stubs.write_text(_stubs({f for f in functions if not _system_symbol(f)}, data, machine_code.source_stamp(), level))
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise SystemExit(f"lossops aot: linking the kernels needs a C compiler ({cc!r} not found; set CC), "
                         "or build a pure wheel with LOSSOPS_AOT=0")
    library = out / f"lossops_kernels-{level}.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-o", str(library),
                    *sorted(str(o) for o in work.glob("*.o")), str(stubs), "-lm", "-Wl,-z,defs",
                    "-Wl,-z,noexecstack", "-Wl,--strip-debug"], check=True)


def write_manifest(out: Path, levels: list[str]) -> None:
    """What machine_code.py reads: the sources' stamp, each level's library, what each kernel reads."""
    from .kernels.registry import KERNELS

    def entry(level: str) -> dict:
        data = (out / f"lossops_kernels-{level}.so").read_bytes()
        return {"file": f"lossops_kernels-{level}.so", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    manifest = {
        "stamp": machine_code.source_stamp(),
        "levels": {level: entry(level) for level in levels},
        "ops": {op: {"reads": list(k.reads[:len(k.op.inputs)])} for op, k in KERNELS.items()},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lossops.ort_ext.aot", description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="the directory to write the libraries and manifest.json into")
    parser.add_argument("--levels", nargs="*", default=list(machine_code.LEVELS), choices=list(machine_code.LEVELS))
    parser.add_argument("--jobs", type=int, default=1, help="processes per level (default 1)")
    parser.add_argument("--part", nargs=3, metavar=("LEVEL", "PART", "WORK"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.part:  # the child process of one part of one level
        level, part, work = args.part
        compile_part(level, Path(work), int(part), args.jobs)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)

    def child(level: str, part: int, work: Path) -> None:
        env = dict(os.environ, NUMBA_CPU_NAME=level, NUMBA_CPU_FEATURES=machine_code.llvm_features(level),
                   NUMBA_CACHE_DIR=tempfile.mkdtemp(prefix="lossops-aot-cache-"))
        try:
            subprocess.run([sys.executable, "-m", "lossops.ort_ext.aot", str(args.out), "--jobs", str(args.jobs),
                            "--part", level, str(part), str(work)], env=env, check=True)
        finally:
            shutil.rmtree(env["NUMBA_CACHE_DIR"], ignore_errors=True)

    def build(level: str) -> tuple[str, float]:
        print(f"lossops aot: {level} started (numba compiles every operator's kernels for it: minutes)",
              file=sys.stderr, flush=True)
        began = time.perf_counter()
        work = Path(tempfile.mkdtemp(prefix=f"lossops-aot-{level}-"))
        try:
            with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as parts:  # one process each
                list(parts.map(lambda k: child(level, k, work), range(args.jobs)))
            link(level, work, args.out)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return level, time.perf_counter() - began

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(args.levels)) as pool:  # mostly one core each
        for done in concurrent.futures.as_completed([pool.submit(build, level) for level in args.levels]):
            level, seconds = done.result()
            print(f"lossops aot: {level} in {seconds:.0f} s", file=sys.stderr, flush=True)
    write_manifest(args.out, args.levels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
