"""Three small training problems, run for some SGD steps in PyTorch and in onnxruntime side by side
(`lossops train-demo`; the tests hold the two to 1e-5)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .converters.training import SGD, export_training_step


@dataclass
class Problem:
    name: str
    module: object  # torch.nn.Module
    loss_fn: Callable
    inputs: tuple
    loss_args: tuple


def problems() -> list[Problem]:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)

    def mlp(out: int, final=None):
        layers = [torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, out)]
        return torch.nn.Sequential(*layers, *([final] if final else []))

    x = torch.randn(32, 6)
    labels = (x[:, :3] + 0.3 * torch.randn(32, 3) > 0).float()
    target = torch.softmax(x[:, :4] * 2, dim=-1)
    return [
        Problem("mlp + BinaryCrossEntropyWithLogits (pos_weight)", mlp(3),
                lambda out, y, pw: F.binary_cross_entropy_with_logits(out, y, pos_weight=pw),
                (x,), (labels, torch.tensor([1.0, 2.0, 0.5]))),
        Problem("mlp + sigmoid + BinaryCrossEntropy", mlp(3, torch.nn.Sigmoid()),
                lambda out, y: F.binary_cross_entropy(out, y), (x,), (labels,)),
        Problem("mlp + log_softmax + KlDiv (batchmean)", mlp(4, torch.nn.LogSoftmax(dim=-1)),
                lambda out, t: F.kl_div(out, t, reduction="batchmean"), (x,), (target,)),
    ]


DEFAULT_OPTIMIZER = SGD(lr=0.1, momentum=0.9)


def run(problem: Problem, steps: int = 20, optimizer: SGD = DEFAULT_OPTIMIZER, mode: str = "decomposition"):
    """(PyTorch losses, onnxruntime losses, PyTorch final parameters, onnxruntime final parameters)."""
    import torch

    from .ort_ext import TrainingSession

    reference = copy.deepcopy(problem.module)
    exported = export_training_step(copy.deepcopy(problem.module), problem.loss_fn,
                                    (problem.inputs, problem.loss_args), optimizer)
    session = TrainingSession(exported.model, exported.parameters, exported.buffers, mode=mode)
    data = dict(zip(exported.data, [a.numpy() for a in problem.inputs + problem.loss_args], strict=True))
    sgd = torch.optim.SGD(reference.parameters(), lr=optimizer.lr, momentum=optimizer.momentum)
    torch_losses, ort_losses = [], []
    for _ in range(steps):
        sgd.zero_grad()
        loss = problem.loss_fn(reference(*problem.inputs), *problem.loss_args)
        loss.backward()
        sgd.step()
        torch_losses.append(loss.item())
        ort_losses.append(session.step(data))
    torch_params = {f"module.{k}": v.detach().numpy() for k, v in reference.named_parameters()}
    return np.array(torch_losses), np.array(ort_losses), torch_params, session.parameters(), exported


def main(steps: int, mode: str) -> int:
    for problem in problems():
        torch_losses, ort_losses, torch_params, ort_params, exported = run(problem, steps, mode=mode)
        nodes = sorted({f"{n.op_type}" for n in exported.model.graph.node if n.domain == "lossops"})
        print(f"{problem.name}: lossops nodes in the step graph: {', '.join(nodes)}")
        print(f"{'step':>4s} {'PyTorch loss':>14s} {'onnxruntime loss':>17s} {'rel diff':>9s}")
        for k, (a, b) in enumerate(zip(torch_losses, ort_losses, strict=True)):
            print(f"{k:4d} {a:14.8f} {b:17.8f} {abs(a - b) / max(abs(a), 1e-30):9.1e}")
        worst = max(float(np.max(np.abs(ort_params[n] - p)) / max(float(np.max(np.abs(p))), 1e-30))
                    for n, p in torch_params.items())
        print(f"final parameters: largest difference relative to the tensor's largest value {worst:.1e}\n")
    return 0
