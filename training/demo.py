"""Four small training problems, trained in PyTorch and in onnxruntime side by side on the same batches
(`lossops train-demo`; tests/test_training.py holds the two to 1e-5): the loss of every step, the final
module state, and the time of a step both ways."""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .optimizers import SGD, Adam, AdamW, Optimizer


@dataclass
class Problem:
    name: str
    module: object  # torch.nn.Module
    loss_fn: Callable
    batches: list[tuple[tuple, tuple]]  # (module inputs, loss arguments) per batch, cycled
    optimizer: Optimizer
    schedule: Callable[[int], float] | None = None  # learning rate by step index (None: the optimizer's)
    max_grad_norm: float | None = None


def problems(steps: int = 100) -> list[Problem]:
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)

    def batches(x, *rest, size=32):
        return [((x[k:k + size],), tuple(r[k:k + size] for r in rest)) for k in range(0, len(x), size)]

    # 1: multi-label MLP, BCE with logits with a per-class pos_weight argument, AdamW on a cosine schedule
    x = torch.randn(256, 16)
    labels = (x[:, :5] + 0.5 * torch.randn(256, 5) > 0.8).float()
    pos_weight = ((1 - labels).sum(0) / labels.sum(0).clamp(min=1)).clamp(max=10)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 5))
    adamw = AdamW(lr=3e-3, weight_decay=1e-2)

    def cosine(k: int) -> float:
        return adamw.lr * 0.5 * (1 + math.cos(math.pi * k / steps))

    mlp_problem = Problem("MLP, BCE with logits + pos_weight", mlp,
                          lambda out, y, pw: F.binary_cross_entropy_with_logits(out, y, pos_weight=pw),
                          [(i, (*t, pos_weight)) for i, t in batches(x, labels)], adamw, cosine)

    # 2: CNN with BatchNorm (convolutions without bias: batch norm cancels it, and Adam would amplify its
    # rounding-noise gradient), sigmoid, BCE, Adam
    images = torch.randn(128, 1, 8, 8)
    classes = torch.stack([images[:, 0, :4].mean((1, 2)) > 0, images[:, 0, :, :4].mean((1, 2)) > 0,
                           images[:, 0].mean((1, 2)) > 0.1], 1).float()
    cnn = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.Conv2d(8, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.Flatten(), nn.Linear(8 * 4 * 4, 3), nn.Sigmoid())
    cnn_problem = Problem("CNN + BatchNorm, sigmoid + BCE", cnn, lambda out, y: F.binary_cross_entropy(out, y),
                          batches(images, classes), Adam(lr=3e-3))

    # 3: distillation: a student's log_softmax against a fixed teacher's softened probabilities
    teacher = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 10))
    with torch.no_grad():
        soft = torch.softmax(teacher(x) * 3.0, dim=-1)
    student = nn.Sequential(nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 10), nn.LogSoftmax(dim=-1))
    distill_problem = Problem("distillation student, log_softmax + KlDiv batchmean", student,
                              lambda out, t: F.kl_div(out, t, reduction="batchmean"), batches(x, soft),
                              SGD(lr=0.2, momentum=0.9, nesterov=True, weight_decay=1e-4))

    # 4: a multi-label head whose pos_weight is a buffer of the module; gradients clipped to norm 1
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 5))
            self.register_buffer("pos_weight", pos_weight.clone())

        def forward(self, x):
            return self.body(x)

    head = Head()
    head_problem = Problem("multi-label head, pos_weight a module buffer", head,
                           lambda out, y: F.binary_cross_entropy_with_logits(out, y, pos_weight=head.pos_weight),
                           batches(x, labels), SGD(lr=0.1, momentum=0.9, weight_decay=1e-4), max_grad_norm=1.0)
    return [mlp_problem, cnn_problem, distill_problem, head_problem]


@dataclass
class Result:
    problem: Problem
    torch_losses: np.ndarray
    ort_losses: np.ndarray
    torch_state: dict[str, np.ndarray]  # the module's state_dict at the end
    ort_state: dict[str, np.ndarray]
    torch_step_s: float  # median seconds per step, steps 5 and later
    ort_step_s: float
    session: object  # the TrainingSession

    @property
    def loss_difference(self) -> float:
        """Largest |onnxruntime - PyTorch| / |PyTorch| over the steps' losses."""
        return float(np.max(np.abs(self.ort_losses - self.torch_losses) / np.abs(self.torch_losses)))

    @property
    def state_difference(self) -> float:
        """Largest difference of a final state tensor relative to that tensor's largest magnitude."""
        return max(float(np.max(np.abs(self.ort_state[n].astype(np.float64) - v), initial=0))
                   / max(float(np.max(np.abs(v), initial=0)), 1e-30) for n, v in self.torch_state.items())


def run(problem: Problem, steps: int = 100, mode: str = "decomposition") -> Result:
    """Train `problem` for `steps` steps in PyTorch and in onnxruntime, one step of each in turn."""
    from .export import export_training_step
    from .session import TrainingSession

    reference = copy.deepcopy(problem.module).train()
    optimizer = problem.optimizer.torch(reference.parameters())
    (module_args, loss_args) = problem.batches[0]
    exported = export_training_step(problem.module, problem.loss_fn, (module_args, loss_args), problem.optimizer,
                                    problem.max_grad_norm)
    session = TrainingSession(exported, mode=mode)
    # A loss that reads a buffer (pos_weight) reads the original module's in the PyTorch run too: the copy's
    # buffer has the same values and neither is trained.
    torch_losses, torch_times, ort_times = [], [], []
    lr = problem.schedule or (lambda k: problem.optimizer.lr)
    for k in range(steps):
        module_in, loss_in = problem.batches[k % len(problem.batches)]
        for group in optimizer.param_groups:
            group["lr"] = lr(k)
        start = time.perf_counter()
        torch_losses.append(torch_step(problem, reference, optimizer, k))
        torch_times.append(time.perf_counter() - start)
        arrays = [a.numpy() for a in module_in + loss_in]
        start = time.perf_counter()
        session.step(arrays, lr(k))
        ort_times.append(time.perf_counter() - start)
    torch_state = {k: v.detach().numpy() for k, v in reference.state_dict().items()}
    return Result(problem, np.array(torch_losses), np.array(session.history), torch_state, session.state_dict(),
                  statistics.median(torch_times[5:] or torch_times), statistics.median(ort_times[5:] or ort_times),
                  session)


def torch_step(problem: Problem, module, optimizer, k: int, forward=None) -> float:
    """One step of `problem` in PyTorch on its batch `k`, as its author writes the loop (`forward`: the module's
    compiled form, where given); the loss."""
    import torch

    module_in, loss_in = problem.batches[k % len(problem.batches)]
    optimizer.zero_grad()
    # `is None`, not `or`: torch.compile's module wrapper raises TypeError when asked its truth (its __len__)
    loss = problem.loss_fn((module if forward is None else forward)(*module_in), *loss_in)
    loss.backward()
    if problem.max_grad_norm is not None:
        torch.nn.utils.clip_grad_norm_(module.parameters(), problem.max_grad_norm)
    optimizer.step()
    return loss.item()


def table(results: list[Result], mode: str) -> list[str]:
    lines = [f"| model | optimizer | steps | loss: largest rel. diff | final state: largest rel. diff "
             f"| PyTorch eager ms/step | onnxruntime ({mode}) ms/step | PyTorch / onnxruntime |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        o = r.problem.optimizer
        name = type(o).__name__ + (" nesterov" if getattr(o, "nesterov", False) else "")
        name += ", schedule" if r.problem.schedule else ""
        name += f", clip {r.problem.max_grad_norm:g}" if r.problem.max_grad_norm else ""
        lines.append(f"| {r.problem.name} | {name} | {len(r.torch_losses)} | {r.loss_difference:.1e} "
                     f"| {r.state_difference:.1e} | {r.torch_step_s * 1e3:.3f} | {r.ort_step_s * 1e3:.3f} "
                     f"| {r.torch_step_s / r.ort_step_s:.2f}x |")
    return lines


def plot(results: list[Result], path: str) -> None:
    from ..extras import require

    require("matplotlib", "lossops train-demo --plot").use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.5 * len(results), 3.6), squeeze=False)
    for ax, r in zip(axes[0], results, strict=True):
        ax.plot(r.torch_losses, label="PyTorch eager", linewidth=3, alpha=0.5)
        ax.plot(r.ort_losses, label="onnxruntime", linestyle="--")
        ax.set_title(r.problem.name, fontsize=8)
        ax.set_xlabel("step")
    axes[0][0].set_ylabel("loss")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(steps: int, mode: str, plot_path: str | None = None) -> int:
    from .. import opset
    from ..extras import require

    if plot_path:
        require("matplotlib", "lossops train-demo --plot")  # before the training, not after
    results = []
    for problem in problems(steps):
        print(f"{problem.name}: exporting its training step and training {steps} steps both ways...", flush=True)
        results.append(run(problem, steps, mode))
        graph = results[-1].session.definition.model.graph
        nodes = sorted({n.op_type for n in graph.node if n.domain == opset.DOMAIN})
        print(f"{problem.name}: loss {results[-1].torch_losses[0]:.4f} -> {results[-1].torch_losses[-1]:.4f}; "
              f"lossops nodes in the step graph: {', '.join(nodes)}")
    print()
    print("\n".join(table(results, mode)))
    print("\nrel. diff: |onnxruntime - PyTorch| / |PyTorch| per step's loss; for the final state, per tensor "
          "relative to its largest magnitude. Times: medians from step 5 on, the two stepped in turn.")
    if plot_path:
        plot(results, plot_path)
        print(f"wrote {plot_path}")
    return 0
