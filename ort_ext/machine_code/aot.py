"""Compile the kernels ahead of time, when a wheel is built: `python -m lossops.ort_ext.machine_code.aot OUT_DIR`.

Processes of its own (`--jobs`, each a share of the operators) have numba type and lower the functions of
compiled.py once, and optimise each function's LLVM IR for every level of one architecture
(targets.LEVELS; `--arch aarch64` cross-compiles on x86-64) with numba's own passes and a target machine
for the level, as numba's JIT does on a host of that level (`_for_every_level`), so the optimiser vectorises
for the level's registers. Each level's IR then gets stable entry-point names (`lossops_<Operator>_<kind>`,
`lossops_trampoline`, `lossops_plan`), every other symbol internal linkage, and LLVM emits an object file for
the level's CPU; the objects are linked into one shared library per level with a C compiler for the
architecture (library.compiler). Why this route: the kernels stay the numba source they are, the
code is numba's (its IR, its optimiser, computing bit for bit what its JIT computes), and the libraries need
neither numba nor Python at run time.

numba's function wrappers reference its runtime and CPython on their error paths (unpickling an exception,
taking the GIL to print it). The kernels never raise (error_model="numpy", no allocation through numba), so
those paths are never taken: the symbols are defined by stubs in the library, hidden, so they never stand in
for the real ones of a process that has them.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..kernels import targets
from . import library, loader


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


def _baseline_pow(arch: str) -> list[str]:
    """pow's default version is newer than the wheel's manylinux_2_17 baseline (glibc 2.29 gave it a new one): the
    library binds the baseline's version through a hidden function of that name (LLVM emits the call from an
    intrinsic at code generation, so the IR does not declare it)."""
    version = targets.ARCHES[arch].glibc_baseline
    return ["double lossops_baseline_pow(double, double);",
            f'__asm__(".symver lossops_baseline_pow, pow@{version}");',
            "HIDDEN double pow(double x, double y) { return lossops_baseline_pow(x, y); }"]


# numba's runtime and CPython: what the never-taken error paths of numba's wrappers call
_STUBBED = ("NRT_", "Py", "_Py", "numba_")


def _stubs(functions: set[str], data: set[str], stamp: str, level: str) -> str:
    lines = ["/* lossops: numba's and CPython's symbols on the never-taken error paths of numba's wrappers. */",
             "#define HIDDEN __attribute__((visibility(\"hidden\")))"]
    lines += [f"HIDDEN long {name}(void) {{ return 0; }}" for name in sorted(functions)]
    lines += _baseline_pow(targets.LEVELS[level].arch)
    lines += [f"HIDDEN void *{name} = 0;" for name in sorted(data)]
    lines.append(f'__attribute__((visibility("default"))) const char *lossops_stamp = "{stamp}";')
    lines.append(f'__attribute__((visibility("default"))) const char *lossops_level = "{level}";')
    return "\n".join(lines) + "\n"


def triple(level: str) -> str:
    """The LLVM target triple of a level's code."""
    return targets.ARCHES[targets.LEVELS[level].arch].triple


def _for_every_level(levels: list[str]) -> None:
    """From now on in this process every library numba compiles into (one per compiled function) has a twin per
    level, with a codegen made as numba makes its JIT's for a host of that level (for another architecture's
    level, numba's codegen with that architecture's target machine and no JIT). A twin gets the library's IR as
    numba lowered it (the machine flags of kernels/native.py set for the level, the triple the level's), runs
    numba's function passes on it, links the twins of the libraries the library links, and runs numba's module
    passes: each level's IR is optimised once, by numba's own passes at numba's default level, and `_object`
    generates its code once. The front end's IR is the same for every architecture but for the flags and triple.

    numba's JIT itself, whose code this process never runs, does not compile these libraries: their IR is lowered
    (and numba's function passes run on it at level 0), but never linked, optimised or given to the JIT, whose
    code generation was a large part of the build's time. numba's runtime, compiled before anything else, is the
    one library the JIT compiles here. A twin differs from the JIT's code in one respect: numba links a library
    into another after its JIT has prepared the library's module for code generation (in place), where a twin
    links the optimised IR. The results are the same bit for bit (tests/test_prebuilt.py), and so is the speed
    (docs/speed.md)."""
    from llvmlite import binding as llvm
    from numba.core import codegen, config
    from numba.core.registry import cpu_target
    from numba.core.runtime import rtsys

    from ..kernels import halves, native

    def flags(name: str) -> dict[str, bool]:  # the machine flags (native.machine_flag) of a level
        arch, features = targets.LEVELS[name].arch, targets.llvm_features(name)
        return {halves.HARDWARE_HALF_FLAG: halves.hardware_half(arch, features),
                native.STREAMING_FLAG: native.streaming_stores(arch),
                native.FMA_FLAG: native.hardware_fma(arch, features)}

    this_process = {halves.HARDWARE_HALF_FLAG: halves.HARDWARE_HALF, native.STREAMING_FLAG: native.STREAMING_STORES,
                    native.FMA_FLAG: native.HARDWARE_FMA}

    def set_flags(text: str, values: dict[str, bool]) -> str:
        for flag, value in values.items():
            text = re.sub(rf"^(@\"?{flag}[^=\n]*= internal constant i1 )(true|false)", f"\\g<1>{str(value).lower()}",
                          text, flags=re.M)
        return text

    default, unused = config._OptLevel(3), config._OptLevel(0)  # numba's default NUMBA_OPT; its JIT's here

    @contextlib.contextmanager
    def level(name: str | None = None):  # numba's passes at its default level, and its codegen for a level
        saved = config.OPT, config.CPU_NAME, config.CPU_FEATURES
        config.OPT = default
        if name:
            config.CPU_NAME, config.CPU_FEATURES = targets.LEVELS[name].cpu, targets.llvm_features(name)
        try:
            yield
        finally:
            config.OPT, config.CPU_NAME, config.CPU_FEATURES = saved

    class CrossCodegen(codegen.JITCPUCodegen):  # numba's codegen for another architecture: its passes, no JIT
        def __init__(self, module_name: str, level_name: str):
            self.level_name = level_name
            super().__init__(module_name)

        def _init(self, llvm_module):
            target = llvm.Target.from_triple(triple(self.level_name))
            self._tm = target.create_target_machine(cpu=config.CPU_NAME, features=config.CPU_FEATURES, opt=3,
                                                    reloc="pic", codemodel="default")
            self._target_data = self._tm.target_data
            self._data_layout = str(self._target_data)
            self._loopvect, self._opt_level = False, 0

        def _create_empty_module(self, name):
            module = super()._create_empty_module(name)
            module.triple = triple(self.level_name)
            return module

    if any(targets.LEVELS[name].arch != targets.ARCH for name in levels):
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
    twins_codegen = {}
    for name in levels:
        with level(name):
            twins_codegen[name] = (codegen.JITCPUCodegen(f"lossops-aot-{name}")
                                   if targets.LEVELS[name].arch == targets.ARCH
                                   else CrossCodegen(f"lossops-aot-{name}", name))
    config.OPT = unused
    library = codegen.CPUCodeLibrary
    init, add, finalize = library.__init__, library.add_llvm_module, library.finalize

    def __init__(self, codegen_, name):
        init(self, codegen_, name)
        twin = codegen_ in twins_codegen.values()
        self.lossops_twins = {} if twin else {lv: cg.create_library(name) for lv, cg in twins_codegen.items()}

    def add_llvm_module(self, ll_module):
        text = None
        with level():
            for name, twin in self.lossops_twins.items():
                copy = ll_module.clone()
                values = flags(name)
                if values != this_process and any(f in (text := text or str(ll_module)) for f in values):
                    copy = llvm.parse_assembly(set_flags(text, values))
                    copy.name = ll_module.name
                if targets.LEVELS[name].arch != targets.ARCH:
                    copy.triple = triple(name)
                add(twin, copy)  # the original: numba's function passes, for the twin's level
        add(self, ll_module)

    def finalize_(self):
        if self.lossops_twins and jit_skipped:  # without numba's JIT: the addresses are 0, the environments unset
            self._finalized = True
        else:  # numba's runtime; a twin (linked before its library was finalized)
            finalize(self)
        with level():
            for name, twin in self.lossops_twins.items():  # numba's finalize, up to handing the module to its JIT
                for linked in dict.fromkeys(self._linking_libraries):
                    twin._final_module.link_in(linked.lossops_twins[name]._get_module_for_linking(), preserve=True)
                twin._optimize_final_module()
                twin._final_module.verify()
                twin._finalized = True

    def set_env(self, env_name, env):
        if self._engine.get_global_value_address(env_name):  # 0 for a library the JIT never got
            set_env_(self, env_name, env)

    set_env_ = codegen.JITCPUCodegen.set_env
    codegen.JITCPUCodegen.set_env = set_env
    library.__init__, library.add_llvm_module, library.finalize = __init__, add_llvm_module, finalize_
    jit_skipped = False
    rtsys.initialize(cpu_target.target_context)  # numba's runtime: its library twinned, and compiled by the JIT
    jit_skipped = True


def compile_part(levels: list[str], work: Path, part: int, parts: int) -> None:
    """In a process of its own (see `main`): compile the functions of every `parts`-th operator from the
    `part`-th (and the trampoline and the planner in part 0) into an object file per level in `work/<level>`,
    with the symbols they leave undefined (`undefined-<part>.json`)."""
    from llvmlite import binding as llvm

    _for_every_level(levels)
    from ..kernels.native import PLANNER
    from ..kernels.registry import KERNELS
    from . import compiled

    compiled.CACHE = False
    machines = {level: llvm.Target.from_triple(triple(level)).create_target_machine(
        cpu=targets.LEVELS[level].cpu, features=targets.llvm_features(level), opt=3, reloc="pic",
        codemodel="default") for level in levels}
    jobs = {op: [(f"lossops_{op}_{kind}", lambda op=op, kind=kind: compiled.functions(op)[kind])
                 for kind in loader.KINDS] for op in list(KERNELS)[part::parts]}
    if part == 0:
        jobs["the trampoline and the planner"] = [("lossops_trampoline", compiled.trampoline),
                                                  (PLANNER, compiled.planner)]
    functions, data = set(), set()
    for what, functions_of in jobs.items():
        began = time.perf_counter()
        for exported, get in functions_of:
            fn = get()
            for level in levels:
                optimised = fn._library.lossops_twins[level]._final_module
                if targets.LEVELS[level].arch != "x86_64" and "@llvm.x86." in str(optimised):
                    raise SystemExit(f"lossops aot: {exported} keeps an x86-64 intrinsic in its {level} code")
                code, undefined, undefined_data = _object(str(optimised), fn.native_name, exported,
                                                          machines[level])
                (work / level / f"{exported}.o").write_bytes(code)
                functions |= undefined
                data |= undefined_data
        print(f"lossops aot: {what} compiled in {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    undefined_symbols = {"functions": sorted(functions), "data": sorted(data)}
    (work / f"undefined-{part}.json").write_text(json.dumps(undefined_symbols))


def link(level: str, work: Path, out: Path) -> None:
    """Link the object files `compile_part` wrote into `work/<level>` into the level's library in `out`."""
    undefined = [json.loads(p.read_text()) for p in sorted(work.glob("undefined-*.json"))]
    exported = {o.stem for o in (work / level).glob("*.o")}  # one object per exported function, named after it
    functions = {f for u in undefined for f in u["functions"]} - exported
    data = {d for u in undefined for d in u["data"]}
    stubbed = {f for f in functions if not _system_symbol(f)}
    unexpected = sorted(f for f in stubbed if not f.startswith(_STUBBED))
    if unexpected:  # a stub would return 0 where the code expects a result (a half conversion's libcall, say)
        raise SystemExit(f"lossops aot: the {level} kernels call {unexpected}, which no library here defines")
    stubs = work / level / "stubs.c"
    stubs.write_text(_stubs(stubbed, data, loader.source_stamp(), level))
    cc = library.compiler(targets.LEVELS[level].arch)
    path = out / loader.level_file(level)
    # -Bsymbolic: the operators' calls to lossops_plan bind to this library's planner at link time, never to
    # another library's of that name that the process loaded first (another level, another version)
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-o", str(path),
                    *sorted(str(o) for o in (work / level).glob("*.o")), str(stubs), "-lm", "-Wl,-z,defs",
                    "-Wl,-Bsymbolic", "-Wl,-z,noexecstack", "-Wl,--strip-debug"], check=True)


def write_manifest(out: Path, levels: list[str]) -> None:
    """What loader.py reads: the sources' stamp, each level's library, what each kernel reads; and the
    native custom-op library's file, size and hash."""
    from ..kernels.registry import KERNELS

    def entry(file: str) -> dict:
        data = (out / file).read_bytes()
        return {"file": file, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    manifest = {
        "stamp": loader.source_stamp(),
        "levels": {level: entry(loader.level_file(level)) for level in levels},
        "library": entry(library.FILE),
        "ops": {op: {"reads": list(k.reads[:len(k.op.inputs)])} for op, k in KERNELS.items()},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lossops.ort_ext.machine_code.aot",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="the directory to write the libraries and manifest.json into")
    parser.add_argument("--arch", default=targets.ARCH, choices=list(targets.ARCHES),
                        help="the architecture to compile for (default: this machine's; aarch64 is cross-compiled "
                        "on x86-64 with a C compiler for it, see `library.compiler`)")
    parser.add_argument("--levels", nargs="*", choices=list(targets.LEVELS),
                        help="some of the architecture's levels (default: all)")
    parser.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 4),
                        help="processes, each compiling a share of the operators for every level (default: one "
                        "per CPU, up to 4)")
    parser.add_argument("--part", nargs=2, metavar=("PART", "WORK"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    levels = [level for level in targets.levels_of(args.arch) if args.levels is None or level in args.levels]
    if not levels or (args.levels and len(levels) < len(args.levels)):
        parser.error(f"the levels of {args.arch} are {', '.join(targets.levels_of(args.arch))}")
    if args.part:  # the child process of one part
        part, work = args.part
        compile_part(levels, Path(work), int(part), args.jobs)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"lossops aot: compiling every operator's kernels for {args.arch}: {', '.join(levels)} in {args.jobs} "
          "processes (minutes)", file=sys.stderr, flush=True)
    began = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="lossops-aot-"))

    def child(part: int) -> None:  # none of numba's settings from outside: `_for_every_level` makes its own
        env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
        env["NUMBA_CACHE_DIR"] = str(work / f"cache-{part}")
        subprocess.run([sys.executable, "-m", __spec__.name, str(args.out), "--jobs", str(args.jobs),
                        "--arch", args.arch, "--levels", *levels, "--part", str(part), str(work)], env=env, check=True)

    try:
        for level in levels:
            (work / level).mkdir()
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as parts:  # one process each
            list(parts.map(child, range(args.jobs)))
        for level in levels:
            link(level, work, args.out)
        library.build(args.out, work, args.arch)  # the native custom-op library, which loads them
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"lossops aot: {', '.join(levels)} in {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    write_manifest(args.out, levels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
