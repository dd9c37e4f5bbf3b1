"""Every case of tests/catalogue.py exported as a one-step training graph (SGD, lr 1) and held to PyTorch twice:
by the export's own check (float64 autograd, relative error at most 1e-5 in float32), and here, independently,
by the parameter update the step makes against PyTorch's float32 gradient; a layer's eval-mode forward against
PyTorch's. A case declared as failing must fail with a one-paragraph error naming the op."""

from __future__ import annotations

import copy
import logging
import warnings

import numpy as np
import pytest
import torch
from catalogue import Case, cases

from lossops.training import SGD, StepExportError, TrainingSession, export_training_step
from lossops.training.check import FLOOR

pytestmark = pytest.mark.slow  # minutes on 2 cores: CI runs it (pytest -m slow)

logging.getLogger("torch").setLevel(logging.ERROR)

# the update p - lr * g, computed in float32, against PyTorch's float32 g: their own rounding, and the update's
UPDATE_RTOL, ROUNDING = 1e-4, 4 * float(np.finfo(np.float32).eps)


def _export(case: Case, module):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export_training_step(module, case.loss, (case.module_args, case.loss_args), SGD(lr=1.0))


def _update_error(case: Case, module, step) -> float:
    """The largest |(p_before - p_after) - g| over |g|'s largest, over the trained parameters."""
    session = TrainingSession(step)
    reference = copy.deepcopy(module).train()
    loss = case.loss(reference(*case.module_args), *case.loss_args)
    named = dict(reference.named_parameters())
    grads = dict(zip(step.trained, torch.autograd.grad(loss, [named[n] for n in step.trained]), strict=True))
    before = {n: v.copy() for n, v in session.parameters().items()}
    session.step([a.numpy() for a in case.module_args + case.loss_args])
    after = session.parameters()
    worst = 0.0
    largest = max(float(g.abs().max()) for g in grads.values())
    for name, grad in grads.items():
        g = grad.double().numpy()
        update = before[name].astype(np.float64) - after[name]
        # a gradient that is zero up to rounding (a bias before BatchNorm) is measured against a thousandth of
        # the largest one
        allowed = UPDATE_RTOL * max(np.abs(g).max(), 1e-3 * largest) + ROUNDING * np.abs(before[name]).max()
        worst = max(worst, float(np.abs(update - g).max() / allowed))
    return worst * UPDATE_RTOL  # in units of the gradient's size, where the rounding allowance is small


@pytest.mark.parametrize("case", [c for c in cases() if c.cannot is None], ids=lambda c: c.name)
def test_exported_step_follows_pytorch(case):
    module = case.make()
    step = _export(case, module)
    assert step.check is not None and step.check.reference == "float64"
    assert max(v for k, v in step.check.errors.items() if k.startswith("grad ")) <= FLOOR[torch.float32]
    if step.check.twin:  # dropout: the update is random; its mask is held to PyTorch in test_dropout_step
        return
    assert _update_error(case, module, step) <= UPDATE_RTOL
    if case.layer:
        session = TrainingSession(step)
        expected = copy.deepcopy(module).eval()(*case.module_args).detach().numpy()
        np.testing.assert_allclose(session.evaluate(*[a.numpy() for a in case.module_args]), expected,
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", [c for c in cases() if c.cannot is not None], ids=lambda c: c.name)
def test_what_cannot_export_says_why_in_one_paragraph(case):
    with pytest.raises(StepExportError) as caught:
        _export(case, case.make())
    message = str(caught.value)
    assert case.cannot in message and message.startswith("export_training_step: ") and "\n" not in message


def measure(case: Case) -> str:
    """The case's row of the catalogue table (tests/catalogue.py)."""
    module = case.make()
    try:
        step = _export(case, module)
    except StepExportError as e:
        return f"| {case.name} | no: {str(e).removeprefix('export_training_step: ')} | | |"
    grads = max(v for k, v in step.check.errors.items() if k.startswith("grad "))
    twin = " (without dropout)" if step.check.twin else ""
    update = "random (dropout)" if step.check.twin else f"{_update_error(case, module, step):.1e}"
    return f"| {case.name} | yes | {grads:.1e}{twin} | {update} |"
