import re
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests import their helpers as top-level modules

from record import MAX_ULPS

# Slow tests that CI leaves out (its 30 minutes on 2 cores hold the x86-64 wheel's build, both suites and the C
# host): each costs CI a minute or more, or repeats what another test of its kind in CI shows. They carry the mark
# `long` besides `slow`; `pytest -m long` (or `.ci/run --full`) runs them, as before a release. Names (a `*` in
# one stands for any text), and why CI can leave them out.
LONG = {
    "test_other_consumers_pass_the_suite_but_their_declared_limits[tvm]":
        "TVM compiles each case's model: 10 minutes (OpenVINO, tract and the rest run)",
    **{f"test_other_consumers_pass_the_suite_but_their_declared_limits[opset{v}]": "opset13 runs"
       for v in (17, 18, 22, 23)},
    "test_other_consumers_pass_the_suite_but_their_declared_limits[onnxsim]": "onnxoptimizer's runs",
    "test_model_rewriting_tools_keep_every_form_running[onnxsim-*]": "onnxoptimizer's run",
    "test_exported_step_follows_pytorch[LSTM, 2 layers]": "the LSTM workload trains as PyTorch",
    "test_exported_step_follows_pytorch[GRU, 2 layers]": "the LSTM workload trains as PyTorch",
    "test_exported_step_follows_pytorch[* none]": "each loss's mean runs (its none and sum: -m long)",
    "test_exported_step_follows_pytorch[* sum]": "each loss's mean runs (its none and sum: -m long)",
    "test_workload_trains_as_pytorch[LSTM*]": "the catalogue's layers run, and three workloads",
    "test_workload_trains_as_pytorch[transformer*]": "the catalogue's layers run, and three workloads",
    "test_workload_trains_as_pytorch[ResNet*]": "the catalogue's layers run, and three workloads",
    "test_bert_classifier_with_padding_and_token_types_trains_as_pytorch": "GPT-2's runs",
    "test_a_downloaded_architecture_trains_as_pytorch[*]": "GPT-2's runs, and DistilBERT's export with its defaults",
    "test_a_downloaded_architecture_exports_with_its_defaults[RoBERTa masked LM]": "DistilBERT's runs",
    "test_torch_compile_is_a_runner_of_the_same_computation": "inductor compiles C++ for each case",
    "test_gpt2_small_at_real_size_is_a_training_bench_workload": "124M parameters: minutes",
    "test_wheel_and_sdist_hold_exactly_the_package":
        "CI builds the wheel from the sdist, installs it and runs every verb (.ci/wheel.sh)",
    "test_a_recurrent_layer_keeps_its_sequence_axis_fixed": "a transformer's named axes run",
    **{f"test_exported_step_follows_pytorch[{loss} mean]": "the fast suite trains it as its lossops nodes"
       for loss in ("mse_loss", "l1_loss", "smooth_l1_loss", "soft_margin_loss")},
    "test_exported_step_follows_pytorch[TransformerEncoderLayer]": "MultiheadAttention and GPT-2's blocks run",
    # numba compiling in fresh processes, a minute each: quick start 1 compiles into a cache and loads from it, and
    # the prebuilt level is held to the JIT bit for bit (tests/test_prebuilt.py)
    **{name: "the JIT compiles and caches in quick start 1" for name in (
        "test_damaged_compile_cache_entries_are_compiled_again",
        "test_entries_compiled_by_different_processes_load_together", "test_read_only_package_and_no_home")},
    "test_model_rewriting_tools_keep_every_form_running[onnxoptimizer-cann]": "its functions form runs",
    # a variant of a layer whose common form runs: AdaptiveAvgPool2d(1), MaxPool2d and AvgPool2d, the other two
    # EmbeddingBags, a depthwise strided Conv2d, BatchNorm2d, cross entropy over (N, C, H, W)
    **{f"test_exported_step_follows_pytorch[{variant}]": "the layer's common form runs" for variant in (
        "AdaptiveAvgPool2d((3, 2)) of 7x5", "AdaptiveMaxPool2d", "AvgPool2d, ceil_mode, count_include_pad=False",
        "EmbeddingBag sum, 2-D input", "EmbeddingBag max, padding_idx", "Conv2d, dilation", "BatchNorm1d",
        "cross_entropy (N, C, d1, d2, d3)")},
}


def long(name: str) -> bool:
    return any(re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), name) for pattern in LONG)


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items):
    for item in items:
        if long(item.name):  # slow too, so that the fast suite leaves it out
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.long)


def pytest_addoption(parser):
    parser.addoption("--plans", choices=("cover", "full"), default="cover",
                     help="test_plans.py: a covering design of the plan thresholds (CI), or their full product")


def pytest_configure(config):
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller prepared the machine code
        return
    from machine_code_once import prepare

    prepare(lambda line: print(line, file=sys.stderr, flush=True))
    if getattr(config.option, "numprocesses", None):  # pytest-xdist's controller (in one process, a test's
        # capture would swallow the line)
        config.pluginmanager.register(_Heartbeat(config), "lossops-heartbeat")


class _Heartbeat:
    """A line whenever no test has ended for a minute, naming the tests still running: with -n the longest tests
    (processes that compile, the guide's snippets) can be the last ones left, and pytest prints nothing until one
    ends. In the controller only, from the start and end of each test that the workers report."""

    QUIET = 60.0

    def __init__(self, config):
        self._config = config
        self._running: dict[str, float] = {}
        self._last = time.monotonic()
        self._done = threading.Event()

    def pytest_runtest_logstart(self, nodeid):
        self._running[nodeid] = time.monotonic()

    def pytest_runtest_logfinish(self, nodeid):
        self._running.pop(nodeid, None)
        self._last = time.monotonic()

    def pytest_sessionstart(self):
        threading.Thread(target=self._beat, daemon=True).start()

    def pytest_sessionfinish(self):
        self._done.set()

    def _beat(self):
        terminal = self._config.pluginmanager.getplugin("terminalreporter")
        while not self._done.wait(5):
            now = time.monotonic()
            running = sorted(list(self._running.items()), key=lambda item: item[1])
            if terminal is None or not running or now - self._last < self.QUIET:
                continue
            self._last = now
            names = ", ".join(f"{nodeid} ({now - began:.0f} s)" for nodeid, began in running)
            terminal.write_line(f"lossops tests: still running {names}")


def pytest_terminal_summary(terminalreporter):
    if MAX_ULPS:
        terminalreporter.section("largest error against PyTorch float64, in ulps of the output dtype")
        for (backend, dtype), ulps in sorted(MAX_ULPS.items()):
            terminalreporter.write_line(f"{backend:14s} {dtype:9s} {ulps:8.3f}")
