"""Training steps that plain ONNX Runtime runs: `export_training_step` traces one optimizer step of a PyTorch
module and loss (forward, lossops backward operators, the optimizer's update) into one ONNX model, checked against
PyTorch autograd before it is returned (`check.py`); `TrainingSession` runs it, with checkpoints
(`checkpoint.py`) that PyTorch reads back.

Export needs torch (`lossops[train]`); a session, its checkpoints and the optimizers do not. Names are looked up
when first used, so `import lossops.training` costs nothing until then.
"""

if __name__ != "lossops.training":  # the repository root is the package `lossops` (docs/design.md)
    raise ImportError(f"import lossops.training, not {__name__}: this folder is a subpackage of lossops")

import importlib

# each public name and its module
_PUBLIC = {"export_training_step": "export", "TrainingStep": "export", "StepExportError": "errors",
           "StepCheckError": "check", "SGD": "optimizers", "Adam": "optimizers", "AdamW": "optimizers",
           "Optimizer": "optimizers", "TrainingSession": "session", "load_into_torch": "checkpoint"}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
