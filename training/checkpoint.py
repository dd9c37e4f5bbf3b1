"""Training checkpoints: a `TrainingSession`'s whole state (module, optimizer, step count) and loss history in one
safetensors file, read back into a session or into PyTorch.

safetensors rather than `torch.save` pickles: the format loads without torch and without running code (a pickle
can run any code on load). Module state keeps the module's state_dict keys, so `module.load_state_dict` takes it
once the optimizer entries (`<param>/<slot>`, `step`) are left out; `load_into_torch` does that and also fills a
torch.optim optimizer's state. safetensors' numpy API has no bfloat16: such entries are stored as their uint16
bits and listed in the metadata.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from ..extras import require
from ..ort_ext.session import array, bfloat16_dtype, ortvalue
from .optimizers import STEP

if TYPE_CHECKING:
    from .session import TrainingSession

FORMAT = "lossops.training-state/1"  # the checkpoint's metadata says which layout it has
BFLOAT16 = "bfloat16"  # the metadata entry that lists the bfloat16 entries, stored as their uint16 bits


def save(session: TrainingSession, path: str) -> None:
    """Write `session`'s whole state (module, optimizer, step count) and loss history to a safetensors file."""
    require("safetensors", "saving training checkpoints")
    from safetensors.numpy import save_file

    d = session.definition
    tensors = {n: np.require(array(v), requirements="C") for n, v in session.state.items()  # keeps rank 0
               if n not in d.not_saved}
    # safetensors' numpy API has no bfloat16: those entries are stored as their bits, and listed
    bits = sorted(n for n, t in tensors.items() if t.dtype == bfloat16_dtype())
    tensors.update({n: tensors[n].view(np.uint16) for n in bits})
    tensors[d.step_input] = np.array(session.steps, dtype=np.int64)
    metadata = {"format": FORMAT, "optimizer": json.dumps(d.settings), "lr": repr(session.lr),
                "hyper": json.dumps(session.hyper), "max_grad_norm": json.dumps(d.max_grad_norm),
                "history": json.dumps(session.history), "aliases": json.dumps(d.aliases), BFLOAT16: json.dumps(bits)}
    save_file(tensors, path, metadata=metadata)

def load(session: TrainingSession, path: str) -> None:
    """Restore into `session` a state `save` wrote; its entries must match this step's, by name, shape and type."""
    require("safetensors", "loading training checkpoints")
    from safetensors import safe_open

    with safe_open(path, framework="numpy") as f:
        metadata = f.metadata() or {}
        if metadata.get("format") != FORMAT:
            raise ValueError(f"{path}: not a lossops training checkpoint (format {metadata.get('format')!r}; "
                             f"expected {FORMAT!r})")
        if _settings(json.loads(metadata["optimizer"])) != _settings(session.definition.settings):
            raise ValueError(f"{path}: saved with optimizer {metadata['optimizer']}; this step uses "
                             f"{json.dumps(session.definition.settings)}")
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    tensors.update({n: tensors[n].view(bfloat16_dtype()) for n in json.loads(metadata.get(BFLOAT16, "[]"))})
    step = session.definition.step_input
    kept = session.definition.not_saved  # not saved: they keep this session's values
    expected = set(session.state) - set(kept) | {step}
    if set(tensors) != expected:
        raise ValueError(f"{path}: its entries do not match this training step's (missing "
                         f"{sorted(expected - set(tensors))}, unexpected {sorted(set(tensors) - expected)})")
    for name, value in session.state.items():
        if name in kept:
            tensors[name] = array(value)
            continue
        saved = tensors[name]
        if saved.shape != tuple(value.shape()) or saved.dtype != array(value).dtype:
            raise ValueError(f"{path}: {name} is {saved.dtype}{list(saved.shape)}; this step has "
                             f"{array(value).dtype}{value.shape()}")
    session.state = {n: ortvalue(tensors[n]) for n in session.state}
    session.steps = int(tensors[step])
    session.lr = float(metadata["lr"])
    session.hyper = json.loads(metadata.get("hyper", "null")) or dict(session.definition.hyper)
    session.history = json.loads(metadata["history"])


def load_into_torch(path: str, module, optimizer=None) -> None:
    """Load a checkpoint that `TrainingSession.save` wrote into a PyTorch `module` (strict: every key; a tied
    parameter's other names from its one entry) and, if given, into `optimizer`, a torch.optim optimizer over
    `module.parameters()` of the same kind, so that training can go on in PyTorch."""
    torch = require("torch", "loading a checkpoint into PyTorch", extra="train")
    require("safetensors", "loading training checkpoints")
    from safetensors import safe_open
    from safetensors.torch import load_file

    tensors = load_file(path)
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata() or {}
    aliases = json.loads(metadata.get("aliases", "{}"))
    tensors.update({n: tensors[n].view(torch.bfloat16) for n in json.loads(metadata.get(BFLOAT16, "[]"))})
    own = {k: v for k, v in tensors.items() if k != STEP and "/" not in k}
    module.load_state_dict(own | {alias: own[name] for alias, name in aliases.items()}, strict=True)
    if optimizer is None:
        return
    state = {}
    for index, (name, _) in enumerate(module.named_parameters()):
        slots = {k.split("/", 1)[1]: v for k, v in tensors.items() if k.split("/", 1)[0] == name and "/" in k}
        if "exp_avg" in slots:  # Adam keeps its step count per parameter, as a float tensor
            slots["step"] = tensors[STEP].to(torch.float32)
        if slots:
            state[index] = slots
    saved = optimizer.state_dict()
    saved["state"] = state
    optimizer.load_state_dict(saved)


def _settings(optimizer: dict) -> dict:
    """What must agree between a checkpoint's optimizer and a step's: all but the default learning rate."""
    return {k: v for k, v in json.loads(json.dumps(optimizer)).items() if k != "lr"}
