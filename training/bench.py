"""Seven training workloads as their authors write them (`workloads`), GPT-2 small as Hugging Face's users train it
(`gpt2_small`), and `lossops bench --training`: each exported (timed), then trained in PyTorch eager, in
torch.compile and in onnxruntime (the decomposition and the lossops kernels), one thread each and onnxruntime's
spinning off, side by side in one process; the ms per step of each and how far onnxruntime's losses stray from
eager's. tests/test_workloads.py holds the losses and final states to PyTorch."""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Callable

import numpy as np

from .demo import Problem, torch_step
from .optimizers import SGD, Adam, AdamW


def workloads() -> list[Problem]:
    """CTR with EmbeddingBag, a transformer encoder, a ResNet with BatchNorm, an LSTM, distillation with KL, a
    detection head with the focal loss, an acoustic model with CTC: small sizes, four batches each, cycled."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    from ..converters import torch_ops  # noqa: F401 - torch.ops.lossops.sigmoid_focal_loss

    torch.manual_seed(0)
    batch = 32

    def batches(make: Callable[[int], tuple]) -> list[tuple[tuple, tuple]]:
        return [make(k) for k in range(4)]

    # 1: click-through rate: bags of categorical ids and dense features, BCE with logits with pos_weight
    class Ctr(nn.Module):
        def __init__(self):
            super().__init__()
            self.ids = nn.EmbeddingBag(1000, 16, mode="sum")
            self.mlp = nn.Sequential(nn.Linear(16 + 8, 64), nn.ReLU(), nn.Linear(64, 1))

        def forward(self, ids, dense):
            return self.mlp(torch.cat([self.ids(ids), dense], 1)).squeeze(1)

    def ctr_batch(k):
        ids, dense = torch.randint(0, 1000, (batch, 10)), torch.randn(batch, 8)
        return (ids, dense), (((ids % 7 == 0).sum(1) + dense[:, 0] > 1.5).float(),)

    ctr = Problem("CTR: EmbeddingBag + MLP, BCEWithLogitsLoss(pos_weight)", Ctr(),
                  nn.BCEWithLogitsLoss(pos_weight=torch.tensor(3.0)), batches(ctr_batch), AdamW(lr=3e-3))

    # 2: a transformer encoder classifying sequences, cross entropy with label smoothing
    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(50, 32)
            self.layers = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True),
                                                2, enable_nested_tensor=False)
            self.head = nn.Linear(32, 5)

        def forward(self, tokens):
            return self.head(self.layers(self.embed(tokens)).mean(1))

    def encoder_batch(k):
        tokens = torch.randint(0, 50, (batch, 12))
        return (tokens,), ((tokens[:, :3].sum(1) % 5),)

    encoder = Problem("transformer encoder, cross entropy + label smoothing", Encoder(),
                      lambda out, y: F.cross_entropy(out, y, label_smoothing=0.1), batches(encoder_batch),
                      AdamW(lr=1e-3, weight_decay=0.01), max_grad_norm=1.0)

    # 3: a ResNet with BatchNorm and global average pooling, cross entropy, SGD with nesterov momentum
    class Block(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(channels), nn.ReLU(),
                                      nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels))

        def forward(self, x):
            return torch.relu(x + self.body(x))

    resnet = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), Block(16),
                           Block(16), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))

    def image_batch(k):
        images = torch.randn(batch, 3, 16, 16)
        return (images,), ((images[:, 0, :8].mean((1, 2)) > 0).long() + 2 * (images[:, 1].mean((1, 2)) > 0).long(),)

    resnet_problem = Problem("ResNet with BatchNorm, cross entropy", resnet, F.cross_entropy, batches(image_batch),
                             SGD(lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4))

    # 4: an LSTM over sequences, cross entropy on the last state, Adam with clipping
    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(8, 32, batch_first=True)
            self.head = nn.Linear(32, 4)

        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])

    def sequence_batch(k):
        x = torch.randn(batch, 10, 8)
        return (x,), ((x[:, :, 0].sum(1) > 0).long() + 2 * (x[:, -1, 1] > 0).long(),)

    lstm = Problem("LSTM, cross entropy", Recurrent(), F.cross_entropy, batches(sequence_batch), Adam(lr=3e-3),
                   max_grad_norm=1.0)

    # 5: distillation: KL to a teacher's softened probabilities plus cross entropy on the labels
    teacher = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 10))
    student = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 10))
    temperature = 2.0

    def distill_batch(k):
        x = torch.randn(batch, 20)
        with torch.no_grad():
            soft = torch.softmax(teacher(x) / temperature, 1)
        return (x,), (soft, soft.argmax(1))

    def distillation(out, soft, labels):
        kl = F.kl_div(F.log_softmax(out / temperature, 1), soft, reduction="batchmean") * temperature**2
        return 0.7 * kl + 0.3 * F.cross_entropy(out, labels)

    distill = Problem("distillation: KL batchmean + cross entropy", student, distillation, batches(distill_batch),
                      SGD(lr=0.1, momentum=0.9))

    # 6: a detection head: per-anchor class logits with the focal loss, box offsets with smooth L1
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Conv2d(8, 32, 3, padding=1), nn.ReLU())
            self.classes, self.boxes = nn.Conv2d(32, 3 * 4, 1), nn.Conv2d(32, 3 * 4, 1)

        def forward(self, features):
            h = self.trunk(features)
            return self.classes(h).flatten(1), self.boxes(h).flatten(1)

    def detection_batch(k):
        features = torch.randn(batch, 8, 8, 8)
        labels = (features[:, :4].repeat(1, 3, 1, 1).flatten(1) > 1.2).float()
        return (features,), (labels, torch.randn(batch, 12 * 64) * 0.1)

    def detection(out, labels, boxes):
        logits, offsets = out
        focal = torch.ops.lossops.sigmoid_focal_loss(logits, labels, None, 2, 0.25, 2.0)  # sum
        positives = labels.sum().clamp(min=1)
        return focal / positives + F.smooth_l1_loss(offsets * labels, boxes * labels, beta=0.1)

    head = Problem("detection head: focal loss + smooth L1", Head(), detection, batches(detection_batch),
                   Adam(lr=1e-3))

    # 7: speech: a convolutional acoustic model over 200 frames, CTC against label sequences of up to 50
    classes, frames = 32, 200

    class Acoustic(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Sequential(nn.Conv1d(classes, 64, 5, padding=2), nn.ReLU())
            self.out = nn.Linear(64, classes)

        def forward(self, features):  # (N, features, T) -> time-major log-probabilities (T, N, classes)
            return F.log_softmax(self.out(self.conv(features).permute(2, 0, 1)), 2)

    def speech_batch(k):
        lengths = torch.randint(30, 51, (16,))
        labels = torch.randint(1, classes, (16, 50))
        frame = torch.arange(frames)
        spoken = torch.where((frame % 4 < 3) & (frame < 4 * lengths.unsqueeze(1)), labels[:, frame // 4], 0)
        features = F.one_hot(spoken, classes).float().transpose(1, 2) * 2 + torch.randn(16, classes, frames)
        return (features,), (labels, 4 * lengths, lengths)  # each label 3 frames, then a blank one

    speech = Problem("speech: convolutional acoustic model, CTC", Acoustic(), F.ctc_loss, batches(speech_batch),
                     Adam(lr=3e-3))
    return [ctr, encoder, resnet_problem, lstm, distill, head, speech]


def gpt2_small(batch: int = 2, context: int = 128, dropout: bool = True) -> Problem:
    """GPT-2 small's real configuration (124M parameters, random init) from Hugging Face transformers, trained as its
    users write it: a padding attention mask (the second sequence's last quarter padded), labels -100 on the
    padding, the model's own loss, AdamW with clipping; two batches, cycled. Its dropout (0.1) draws differently in
    PyTorch and onnxruntime, so the losses stray by more than rounding; `dropout=False` compares them exactly."""
    import torch
    import transformers
    from torch import nn

    torch.manual_seed(0)
    transformers.logging.set_verbosity_error()
    off = {} if dropout else {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**off))

    class LanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids, mask, labels):
            return self.model(input_ids=ids, attention_mask=mask, labels=labels).loss

    def make(k: int) -> tuple[tuple, tuple]:
        ids = torch.randint(0, model.config.vocab_size, (batch, context))
        mask = torch.ones(batch, context, dtype=torch.long)
        mask[1, context * 3 // 4:] = 0
        return (ids, mask, ids.masked_fill(mask == 0, -100)), ()

    return Problem(f"GPT-2 small (124M parameters), batch {batch} x {context} tokens, padding, its own loss"
                   + ("" if dropout else ", no dropout"),
                   LanguageModel(), lambda loss: loss, [make(k) for k in range(2)], AdamW(lr=1e-4),
                   max_grad_norm=1.0)


def _threads(n: int):
    import onnxruntime
    import torch

    torch.set_num_threads(n)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = n
    options.inter_op_num_threads = n
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def bench(steps: int = 40, blocks: int = 5, threads: int = 1, compile_torch: bool = True,
          problems: list[Problem] | None = None) -> list[dict]:
    """Per workload (`problems`, else the seven `workloads`): the export's seconds, ms per step of each runner
    (medians over `blocks` blocks of `steps` steps, the runners alternated block by block after a warm-up of
    `steps` steps), and the largest relative loss difference of each runner against eager over the warm-up."""
    import torch

    from .export import export_training_step
    from .session import TrainingSession

    options = _threads(threads)
    rows = []
    for problem in problems or workloads():
        margs, largs = problem.batches[0]
        began = time.perf_counter()
        step = export_training_step(problem.module, problem.loss_fn, (margs, largs), problem.optimizer,
                                    problem.max_grad_norm)
        exported = time.perf_counter() - began
        arrays = [[a.numpy() for a in m + t] for m, t in problem.batches]
        runners: dict[str, Callable[[int], float]] = {}
        for name, compiled in (("PyTorch eager", False), ("torch.compile", True)):
            if compiled and not compile_torch:
                continue
            runners[name] = _torch_runner(problem, compiled)
        for mode in ("decomposition", "kernels"):
            session = TrainingSession(step, mode=mode, sess_options=options)
            runners[f"onnxruntime {mode}"] = _session_runner(session, arrays)
        losses = {name: [run(k) for k in range(steps)] for name, run in runners.items()}  # warm-up, compared
        times = {name: [] for name in runners}
        for _ in range(blocks):
            for name, run in runners.items():
                began = time.perf_counter()
                for k in range(steps):
                    run(k)
                times[name].append((time.perf_counter() - began) / steps)
        eager = np.array(losses["PyTorch eager"])
        drift = {name: float(np.max(np.abs(np.array(v) - eager) / np.abs(eager))) for name, v in losses.items()}
        rows.append({"workload": problem.name, "export s": exported,
                     "ms": {n: statistics.median(t) * 1e3 for n, t in times.items()}, "loss drift vs eager": drift})
    torch.set_num_threads(torch.get_num_threads())
    return rows


def _session_runner(session, arrays: list[list[np.ndarray]]) -> Callable[[int], float]:
    return lambda k: session.step(arrays[k % len(arrays)])


def _torch_runner(problem: Problem, compiled: bool) -> Callable[[int], float]:
    import torch

    module = copy.deepcopy(problem.module).train()
    forward = torch.compile(module) if compiled else module
    optimizer = problem.optimizer.torch(module.parameters())
    return lambda k: torch_step(problem, module, optimizer, k, forward)


def table(rows: list[dict], threads: int) -> str:
    names = list(rows[0]["ms"])
    lines = [f"ms per step, {threads} thread(s) each; each runner's time over PyTorch eager's in parentheses "
             "(above 1: slower than eager); loss drift: the largest relative difference of a runner's loss from "
             "eager's over the warm-up steps", "",
             "| workload | export s | " + " | ".join(names) + " | loss drift vs eager: torch.compile, onnxruntime |",
             "|---|---|" + "---|" * (len(names) + 1)]
    for row in rows:
        eager = row["ms"]["PyTorch eager"]
        cells = [f"{row['ms'][n]:.2f}" + ("" if n == "PyTorch eager" else f" ({row['ms'][n] / eager:.2f}x)")
                 for n in names]
        drift = row["loss drift vs eager"]
        ours = max(v for n, v in drift.items() if n.startswith("onnxruntime"))
        theirs = f"{drift['torch.compile']:.1e}" if "torch.compile" in drift else "-"
        lines.append(f"| {row['workload']} | {row['export s']:.1f} | " + " | ".join(cells)
                     + f" | {theirs}, {ours:.1e} |")
    for name in names[1:]:
        speedups = [row["ms"]["PyTorch eager"] / row["ms"][name] for row in rows]
        lines.append(f"\n{name}: eager's time over its, geometric mean {math.exp(np.mean(np.log(speedups))):.2f}x, "
                     f"lowest {min(speedups):.2f}x")
    return "\n".join(lines) + "\n"
