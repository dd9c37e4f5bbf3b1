import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # tests import their helpers as top-level modules

from record import MAX_ULPS


def pytest_addoption(parser):
    parser.addoption("--plans", choices=("cover", "full"), default="cover",
                     help="test_plans.py: a covering design of the plan thresholds (CI), or their full product")


def pytest_configure(config):
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller prepared the machine code
        return
    from machine_code_once import prepare

    prepare(lambda line: print(line, file=sys.stderr, flush=True))


def pytest_terminal_summary(terminalreporter):
    if MAX_ULPS:
        terminalreporter.section("largest error against PyTorch float64, in ulps of the output dtype")
        for (backend, dtype), ulps in sorted(MAX_ULPS.items()):
            terminalreporter.write_line(f"{backend:14s} {dtype:9s} {ulps:8.3f}")
