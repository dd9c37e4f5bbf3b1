"""The seven workloads of `lossops bench --training` (train_bench.py), as their authors write them: each exports
(its own check passes) and trains in onnxruntime as in PyTorch eager on the same batches.

Two implementations of a training run part ways as rounding differences grow, the faster the smaller the loss
gets: torch.compile and eager part as far as onnxruntime and eager do (`lossops bench --training` prints both
drifts). So the losses are held to 1e-4 over the first 10 steps, before that growth, and after 100 steps
onnxruntime must have trained as far as eager (within a quarter of its final loss)."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

from lossops.training.bench import bench, workloads
from lossops.training.demo import run

pytestmark = pytest.mark.slow  # minutes on 2 cores: CI runs it (pytest -m slow)

logging.getLogger("torch").setLevel(logging.ERROR)

NAMES = [w.name for w in workloads()]


@pytest.mark.parametrize("index", range(len(NAMES)), ids=NAMES)
def test_workload_trains_as_pytorch(index):
    problem = workloads()[index]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run(problem, 100, "decomposition")
    assert result.session.definition.check.worst <= 1e-5
    early = np.abs(result.ort_losses[:10] - result.torch_losses[:10]) / np.abs(result.torch_losses[:10])
    assert early.max() <= 1e-4, early.max()
    assert abs(result.ort_losses[-1] - result.torch_losses[-1]) <= 0.25 * result.torch_losses[-1]
    assert result.torch_losses[-1] < 0.8 * result.torch_losses[0]  # it trains


def test_the_training_bench_times_every_runner_torch_compile_included():
    """`lossops bench --training` on one workload, its torch.compile runner included: every runner gives a time
    and a loss drift (torch.compile's module wrapper refuses to be asked its truth: the runner must not ask)."""
    problem = workloads()[0]  # CTR: a module of its own class, with no __len__
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (row,) = bench(steps=2, blocks=1, problems=[problem])
    runners = ["PyTorch eager", "torch.compile", "onnxruntime decomposition", "onnxruntime kernels"]
    assert list(row["ms"]) == runners and all(ms > 0 for ms in row["ms"].values())
    assert all(drift <= 1e-4 for drift in row["loss drift vs eager"].values()), row
