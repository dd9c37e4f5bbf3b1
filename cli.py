"""The `lossops` command line: each verb is one step of build -> (fuse) -> check -> prepare -> run."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path


def _load(path: str):
    """The ONNX model at `path`, or a ValueError in one line saying why it is not one."""
    import onnx

    if Path(path).is_dir():
        raise ValueError(f"{path} is a directory; expected an ONNX model file")
    if not Path(path).is_file():
        raise ValueError(f"{path}: no such file")
    try:
        model = onnx.load(path)
    except Exception as e:  # protobuf's DecodeError, missing external data, ...: all mean "not a model"
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"{path} is not a readable ONNX model ({reason})") from None
    if not model.HasField("graph") or not model.opset_import:
        raise ValueError(f"{path} is not an ONNX model: it has no graph or no opset import")
    return model


def _count(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a count; expected 1 or more")
    return value


def _counts(text: str) -> list[int]:
    """argparse type: counts separated by commas, each at least 1, no repeats."""
    counts = [_count(part.strip()) for part in text.split(",")]
    if len(set(counts)) < len(counts):
        raise argparse.ArgumentTypeError(f"{text!r} names a count twice")
    return counts


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(Path(args.output), repeat=args.repeat, size=args.size, dtypes=tuple(args.dtype or ["float32"]))


def _check(args: argparse.Namespace) -> int:
    from .opset import DOMAIN
    from .opset.model import node_problems

    model = _load(args.model)
    problems = node_problems(model)
    for node, problem in problems:
        print(f"{node}: {problem}")
    n = len(model.graph.node)
    print(f"model: {n} nodes, " + ("valid" if not problems else f"{len(problems)} problem(s)"))
    if any(node.domain == DOMAIN for node in model.graph.node):
        print(f"note: its '{DOMAIN}' nodes run on onnxruntime (the lossops kernels, or the standard-op functions "
              "the model carries); other ONNX consumers do not expand model-local functions: run `lossops lower` "
              "for them")
    failed = ["model"] if problems else []
    if args.provider == "cann":
        from .ort_ext import cann

        placed = cann.placement(model, args.cann_mode)
        for p in placed:
            print(f"{p.node}: {'CANN' if p.claimed else 'not CANN'} ({p.reason})")
        claimed = sum(p.claimed for p in placed)
        print(f"CANN {args.cann_mode} mode claims {claimed} of {len(placed)} nodes")
        if args.cann_mode == "graph" and claimed < len(placed):
            failed.append(f"CANN claims {claimed} of {len(placed)} nodes (lossops lower --for cann)")
    if args.soc:
        from .ort_ext import cann

        soc = cann.soc_problems(model, args.soc)
        for node, problem in soc:
            print(f"{node}: {problem}")
        print(f"Ascend {args.soc}: " + ("OK" if not soc else f"{len(soc)} problem(s)"))
        if soc:
            failed.append(f"Ascend {args.soc}")
    # the verdict last, and the exit status says the same
    print(f"{args.model}: " + ("OK" if not failed else "not OK: " + "; ".join(failed)))
    return 1 if failed else 0


def _doctor(args: argparse.Namespace) -> int:
    import onnxruntime

    from .ort_ext import cann, host

    print(f"onnxruntime {onnxruntime.__version__} ({onnxruntime.get_device()}), providers compiled in: "
          + ", ".join(onnxruntime.get_available_providers()))
    from .ort_ext.kernels import targets
    from .ort_ext.machine_code import loader

    why = host.why_no_kernels()
    print("lossops kernels: " + (f"{loader.code().source} (CPU levels: "
                                 f"{', '.join(targets.cpu_levels()) or 'none'})" if not why
                                 else f"{why}: lossops nodes run as their decomposition"))
    from .ort_ext.machine_code import library

    why = host.why_no_native_kernels()
    path = "" if why else library.library_path()
    print("lossops native library (for register_custom_ops_library in any ONNX Runtime host): "
          + (why or f"{path}, kernels {library.choice(path)}"))
    kit = cann.toolkit()
    for name, value in kit.env.items():
        print(f"{name}: {value or '(not set)'}")
    print("libascendcl.so: " + ("loads" if kit.loadable else f"does not load ({kit.error})"))
    reason = cann.why_unavailable()
    print("a CANN session: " + ("would run on CANN (lossops lowers lossops nodes for its graph mode)" if not reason
                                else f"would fail with a clear error: {reason}"))
    return 0


def _bench(args: argparse.Namespace) -> int:
    from .bench import main as bench_main

    if args.training:
        return _train_bench(args)
    if args.classes:
        return _class_bench(args)
    if args.transformers:
        raise ValueError("--transformers is a workload of --training: lossops bench --training --transformers")
    if args.summary or args.markdown:
        from .bench import load_runs, report, summary

        path = args.summary or args.markdown
        data = load_runs(path)
        try:
            text = (summary if args.summary else report)(data)
        except (KeyError, TypeError, IndexError, AttributeError) as e:  # runs whose rows lack a field
            raise ValueError(f"{path} is not a saved `lossops bench --json` run ({type(e).__name__}: {e})") from None
        print(text, end="")
        return 0

    return bench_main(args.large, args.blocks, args.json, args.plot, args.quick, args.threads, args.op,
                      args.machine_code, args.update)


def _conformance(args: argparse.Namespace) -> int:
    from .conformance.runner import ALL_BACKENDS, DEFAULT_BACKENDS, export_suite, run

    if args.export:
        target = Path(args.export)
        if target.exists() and not target.is_dir():
            raise ValueError(f"{target} is a file; expected a directory to write the suite into (new, or one that "
                             "exists)")
        return export_suite(target)
    return run(args.backend or (ALL_BACKENDS if args.all else DEFAULT_BACKENDS), args.k,
               failures_only=args.failures_only, sample=args.sample)


def _convert(args: argparse.Namespace) -> int:
    import onnx

    from . import converters

    model = _load(args.model)
    extra = {"for_provider": args.for_provider} if getattr(args, "for_provider", None) else {}
    converted, report = getattr(converters, args.verb)(model, **extra)
    onnx.save(converted, args.output)
    for line in report:
        print(line)
    print(f"{args.verb}: {len(report)} node(s) changed; wrote {args.output}")
    if args.verb == "lower" and not extra:
        from .conformance.consumers import CONSUMERS

        print("standard ops only; the conformance suite in this form passes on onnxruntime, "
              + ", ".join(CONSUMERS) + " (each but its declared limits: lossops conformance --backend NAME)")
    return 0


def _docs(args: argparse.Namespace) -> int:
    from .regenerate import main as docs_main

    return docs_main(write=args.write, goldens=args.goldens, verbs_table=verbs_table())


def _class_bench(args: argparse.Namespace) -> int:
    import json
    import logging
    import warnings

    from . import bench_classes

    if args.threads and len(args.threads) > 1:
        raise ValueError("--classes takes one --threads count")
    logging.getLogger("torch").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = bench_classes.bench(blocks=args.blocks, threads=args.threads[0] if args.threads else 1,
                                  large=args.large, compile_torch=not args.quick)
    print(json.dumps(run, indent=1) if args.json else bench_classes.table(run), end="")
    return 0


def _train_bench(args: argparse.Namespace) -> int:
    import json
    import logging
    import warnings

    from .extras import require

    require("torch", "the training benchmark", extra="transformers" if args.transformers else "train")
    from .training import bench as train_bench

    logging.getLogger("torch").setLevel(logging.ERROR)
    if args.threads and len(args.threads) > 1:
        raise ValueError("--training takes one --threads count")
    threads = args.threads[0] if args.threads else 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if args.transformers:
            require("transformers", "the transformers workload")
            rows = train_bench.bench(steps=3, blocks=args.blocks, threads=threads, compile_torch=not args.quick,
                                     problems=[train_bench.gpt2_small()])
        else:
            rows = train_bench.bench(blocks=args.blocks, threads=threads, compile_torch=not args.quick)
    print(json.dumps(rows, indent=1) if args.json else train_bench.table(rows, threads), end="")
    return 0


def _train_demo(args: argparse.Namespace) -> int:
    import logging
    import warnings

    from .extras import require
    from .training.demo import main as train_main

    require("torch", "the training demo", extra="train")
    logging.getLogger("torch").setLevel(logging.ERROR)  # after torch's import, which sets its loggers up
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return train_main(args.steps, args.mode, args.plot)


def build_parser() -> argparse.ArgumentParser:
    from typing import get_args

    from .conformance.runner import ALL_BACKENDS, DEFAULT_BACKENDS
    from .converters.lowering import PROVIDERS
    from .opset import OPS
    from .opset.spec import ASCEND_PARTS, DTYPE_NAMES
    from .ort_ext import cann
    from .ort_ext.session import Mode

    providers = [p for p in PROVIDERS if p]  # the providers lowering knows how to serve

    parser = argparse.ArgumentParser(prog="lossops", description="The Ascend CANN loss operators as ONNX operators, "
                                     "run in ONNX Runtime.")
    verbs = parser.add_subparsers(dest="verb", required=True)

    demo = verbs.add_parser("demo", help="build, save and run a model with the three Ascend aclnn operators",
                            description="Build one model with the three lossops operators that are Ascend aclnn "
                            "operators, save it, run it through the lossops kernels and through the standard-op "
                            "decomposition on plain onnxruntime, and print per operator and dtype the max error "
                            "against a float64 reference and the time.")
    demo.add_argument("-o", "--output", default="lossops_demo.onnx", help="where to save the model")
    demo.add_argument("--size", type=_count, default=100_000, help="elements per tensor (default 100000)")
    demo.add_argument("--repeat", type=_count, default=7, help="timed runs per measurement; the median is printed")
    demo.add_argument("--dtype", action="append", choices=list(DTYPE_NAMES),
                      help="element type to run (repeatable; default float32: where numba compiles the kernels, "
                      "each type of each operator takes it 10-25 s once)")
    demo.set_defaults(fn=_demo)

    check = verbs.add_parser("check", help="check a model with the lossops schemas, node by node",
                             description="Run onnx.checker and strict type/shape inference with the lossops schemas "
                             "and print what is wrong, node by node. Exit status 1 if anything is.")
    check.add_argument("model", help="path of an .onnx model")
    check.add_argument("--provider", choices=providers, help="also report, node by node, whether this provider "
                       "can claim it (lower lossops nodes first: lossops lower --for cann)")
    check.add_argument("--cann-mode", choices=cann.MODES, default="graph",
                       help="the CANN provider's graph mode (default) or single-op mode")
    check.add_argument("--soc", choices=ASCEND_PARTS,
                       help="apply the aclnn limits of this Ascend part to the lossops nodes")
    check.set_defaults(fn=_check)

    doctor = verbs.add_parser("doctor", help="what this machine's onnxruntime and CANN setup can run",
                              description="Print the onnxruntime build and providers, whether the lossops kernels "
                              "are available, the CANN toolkit's environment and whether libascendcl.so loads, and "
                              "what a CANN session would do.")
    doctor.set_defaults(fn=_doctor)

    bench = verbs.add_parser("bench", help="time the kernels against the decomposition, PyTorch and the roofline "
                             "(--training: seven training workloads against PyTorch eager and torch.compile)",
                             description="Time every operator (1e3 to 1e7 elements, float32 and float16, reductions "
                             "none and mean) on the lossops kernels, on its decomposition in plain onnxruntime, and "
                             "in PyTorch eager and torch.compile when installed, all with the same threads, each in "
                             "steady state (blocks of consecutive calls, runners alternated); and the memory roofline "
                             "from STREAM copy and add timed alongside. With several --threads counts: the kernels "
                             "at each count side by side.")
    bench.add_argument("--large", action="store_true", help="also 1e8 elements")
    bench.add_argument("--quick", action="store_true",
                       help="only 1e3 and 1e5 elements, and no torch.compile (it compiles each case): a smoke run")
    bench.add_argument("--blocks", type=_count, default=5, help="blocks of calls per runner and case (default 5)")
    bench.add_argument("--threads", type=_counts, metavar="N[,N...]",
                       help="threads for every runner (default: the CPUs this process may use); several counts, "
                       "such as 1,2,4,8,16: instead, the kernels at each count side by side")
    bench.add_argument("--op", action="append", choices=sorted(OPS), help="only this operator (repeatable)")
    bench.add_argument("--json", action="store_true", help="print JSON instead of the table")
    bench.add_argument("--update", metavar="RUN.json",
                       help="measure the operators (--op) anew into a stored run, keeping the other operators' rows "
                       "with the runs that measured them")
    bench.add_argument("--summary", metavar="RUN.json",
                       help="instead: the summary table of docs/bench.md from a saved `lossops bench --json` run")
    bench.add_argument("--markdown", metavar="RUN.json",
                       help="instead: every row of a saved `lossops bench --json` run as Markdown (docs/bench.md)")
    bench.add_argument("--machine-code", action="store_true",
                       help="instead: each prebuilt x86-64 level against numba's JIT, one thread (needs lossops[jit])")
    bench.add_argument("--plot", metavar="FILE.png", help="also plot GB/s per size (needs matplotlib)")
    bench.add_argument("--training", action="store_true",
                       help="instead: seven training workloads, ms per step in PyTorch eager, torch.compile and "
                       "onnxruntime (decomposition and kernels), one thread each unless --threads (needs "
                       "lossops[train]; --quick leaves torch.compile out)")
    bench.add_argument("--classes", action="store_true",
                       help="instead: cross entropy at a classifier's and a language model's sizes, forward and "
                       "forward+backward, against ORT's standard ops, PyTorch eager and torch.compile (--large: also "
                       "(512, 128256); --quick leaves torch.compile out)")
    bench.add_argument("--transformers", action="store_true",
                       help="with --training: GPT-2 small's real configuration from Hugging Face transformers (124M "
                       "parameters; minutes to export; needs lossops[transformers])")
    bench.set_defaults(fn=_bench)

    conformance = verbs.add_parser(
        "conformance", help="run the conformance suite on one or more backends, or export it",
        description="Hold backends to the lossops conformance suite (graph cases with PyTorch float64 goldens, ONNX "
        "node-test format) and print one table (case, backend, max error, tolerance, result), each backend's summary "
        "as it finishes, and all of them at the end (Ctrl-C: those that finished). Exit status 1 on any failure; a "
        "backend that cannot run here is reported unavailable, not failed.")
    conformance.add_argument("--backend", action="append",
                             choices=ALL_BACKENDS,
                             help="backend to run (repeatable; default: " + ", ".join(DEFAULT_BACKENDS) + ")")
    conformance.add_argument("--all", action="store_true",
                             help="every backend, the other ONNX consumers included (those installed; minutes)")
    conformance.add_argument("-k", metavar="PATTERN", help="only cases whose name matches this regular expression")
    conformance.add_argument("--failures-only", action="store_true", help="print only the failing rows")
    conformance.add_argument("--sample", action="store_true",
                             help="each case in one element type, the types taking turns (a quarter of the cases)")
    conformance.add_argument("--export", metavar="DIR", help="write the suite to DIR instead of running it")
    conformance.set_defaults(fn=_conformance, own_interrupt=True)

    for verb, text in (("fuse", "replace the loss subgraphs PyTorch's exporters emit (BCE with logits, torchvision's "
                                "focal loss, a reduced MSE or L1) by lossops nodes"),
                       ("lower", "replace every lossops node by its standard-op decomposition")):
        sub = verbs.add_parser(verb, help=text, description=text[0].upper() + text[1:] + "; print what changed.")
        sub.add_argument("model", help="input .onnx model")
        sub.add_argument("-o", "--output", required=True, help="where to write the result")
        if verb == "lower":
            sub.add_argument("--for", dest="for_provider", choices=providers, metavar="PROVIDER",
                             help="shape the result for a provider (cann: what its graph mode can claim)")
        sub.set_defaults(fn=_convert)

    docs = verbs.add_parser("docs", help="regenerate every generated file of a checkout, or say which are stale",
                            description="Write (--write) or check (the default) what lossops generates from its own "
                            "sources: docs/operators.md, docs/bench.md, the guide's tables of operators and verbs, "
                            "and with --goldens the conformance suite's goldens (needs torch). Exit status 1 when "
                            "checking finds a stale file.")
    docs.add_argument("--write", action="store_true", help="write the stale files instead of naming them")
    docs.add_argument("--goldens", action="store_true",
                      help="also the conformance goldens (needs torch; regenerated in memory to check them)")
    docs.set_defaults(fn=_docs)

    train = verbs.add_parser("train-demo", help="train four small models in PyTorch and in onnxruntime side by side",
                             description="Export training steps (forward, lossops backward, optimizer update) of four "
                             "small models and run them in onnxruntime next to PyTorch on the same batches; print how "
                             "far the losses and final states differ and the step times. Needs lossops[train].")
    train.add_argument("--steps", type=_count, default=100)
    train.add_argument("--plot", metavar="FILE.png", help="also plot both loss curves (needs matplotlib)")
    train.add_argument("--mode", choices=sorted(get_args(Mode)), default="decomposition",
                       help="run the lossops nodes as standard ops (plain onnxruntime) or on the kernels")
    train.set_defaults(fn=_train_demo)
    return parser


def verbs_table() -> str:
    """The guide's table of verbs, from the parser: each verb with its arguments and its help line."""
    parser = build_parser()
    (verbs,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {c.dest: c.help for c in verbs._choices_actions}
    lines = ["| verb | what it does |", "|---|---|"]
    for name, sub in verbs.choices.items():
        words = []
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            value = action.metavar or action.dest.upper()
            if not action.option_strings:
                words.append(value)
            else:
                option = max(action.option_strings, key=len)
                word = option if action.nargs == 0 else f"{option} {value}"
                words.append(word if action.required else f"[{word}]")
        lines.append(f"| `lossops {' '.join([name, *words])}` | {helps[name]} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from .extras import MissingExtra

    args = build_parser().parse_args(argv)

    def interrupted(signum, frame):
        # Ends the process here, wherever the signal lands: a KeyboardInterrupt raised inside a C callback (numba's
        # compiler calls back into Python) is printed as "Exception ignored" and lost, and the verb ran on.
        # Nothing is left half-written: cache entries are written to temporary files and renamed.
        sys.stdout.flush()
        print(f"lossops {args.verb}: interrupted", file=sys.stderr, flush=True)
        os._exit(130)

    # Only over Python's own Ctrl-C handler: a process started with SIGINT ignored (a background job of a script)
    # keeps ignoring it, and a caller's own handler stays
    previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    # a verb that reports what it finished before a Ctrl-C (conformance) takes Python's KeyboardInterrupt
    ours = previous is signal.default_int_handler and not getattr(args, "own_interrupt", False)
    if ours:
        signal.signal(signal.SIGINT, interrupted)
    try:
        return args.fn(args)
    except (OSError, ValueError, MissingExtra) as e:
        print(f"lossops {args.verb}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C, in a compile or a run: one line, and the shell's status for SIGINT
        print(f"lossops {args.verb}: interrupted", file=sys.stderr)
        return 130
    finally:
        if ours:  # main() called in-process (tests, a user's script) gives the handler back
            signal.signal(signal.SIGINT, previous)


if __name__ == "__main__":
    sys.exit(main())
