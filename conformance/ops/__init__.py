"""One module per operator, `<operator in snake case>.py`, found by the operator's name (as its record in
opset/ and its tile in ort_ext/kernels/), holding what conformance and the bench need of it:

- `oracle(*inputs, **attributes)`: PyTorch in float64, the independent reference every backend is held to
  (a forward operator's is differentiable: given tensors that require grad, it returns the loss tensor);
- `specs()`: its node specs (conformance/specs.py), each run in all four dtypes;
- `eager(t, reduction)`: the same computation in PyTorch eager on the tensors `t` (by input name), the bench's
  baseline, at the default attributes;
- where its formula cancels, `oracle_error(inputs, attributes)` (the oracle's own rounding) and
  `term_magnitude(inputs, attributes)` (the size of the terms that cancel), read by conformance/tolerance.py.

torch is imported inside the functions: the specs and the stored goldens serve without it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ...opset import OPS
from ...opset.registry import module_name


def module(op_name: str) -> ModuleType | None:
    """The conformance module of `op_name`, None where it has none."""
    try:
        return importlib.import_module(f"{__name__}.{module_name(op_name)}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{module_name(op_name)}":
            raise
        return None


def modules() -> dict[str, ModuleType]:
    """Every operator's conformance module, in the operator set's order."""
    return {op: m for op in OPS if (m := module(op)) is not None}


def torch_and_functional():
    """(torch, torch.nn.functional), imported when an oracle or a baseline first runs."""
    import torch
    import torch.nn.functional as F

    return torch, F


def tensor(a):
    """A float64 tensor of `a` (None stays None, a tensor stays itself: autograd can follow an oracle)."""
    import numpy as np
    import torch

    if a is None or isinstance(a, torch.Tensor):
        return a
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def result(t):
    """An oracle's output: as numpy, or the tensor itself where autograd follows it (tests/test_training.py
    differentiates the forward operators' oracles)."""
    return t if t.requires_grad else t.numpy()


def input_gradient(loss, grad_output, input, target, *, of: str = "input", **arguments):
    """The gradient of PyTorch's `loss(input, target, **arguments)` with respect to `input` (or, with
    `of="target"`, to `target`), fed `grad_output`, in float64: the oracle of a loss's backward. Array
    arguments (weights) become tensors."""
    import warnings

    import numpy as np
    import torch

    x, t = tensor(input), tensor(target)
    wrt = (x if of == "input" else t).requires_grad_(True)
    arguments = {k: tensor(v) if isinstance(v, np.ndarray) else v for k, v in arguments.items()}
    with warnings.catch_warnings():  # torch warns when target's size differs from input's: tested on purpose
        warnings.simplefilter("ignore", UserWarning)
        value = loss(x, t, **arguments)
    (grad,) = torch.autograd.grad(value, wrt, tensor(grad_output).expand(value.shape))
    return grad.numpy()
