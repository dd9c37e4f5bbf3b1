"""KlDivBackward: its oracle (autograd of F.kl_div), specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, grad, rng
from . import tensor, torch_and_functional

OP = "KlDivBackward"


def oracle(grad_output, input, target, *, reduction, log_target):
    import warnings

    torch, F = torch_and_functional()
    x = tensor(input).requires_grad_(True)
    t, g = tensor(target), tensor(grad_output)
    with warnings.catch_warnings():  # torch warns that 'mean' is not 'batchmean'; we test both on purpose
        warnings.simplefilter("ignore", UserWarning)
        loss = F.kl_div(x, t, reduction=reduction, log_target=bool(log_target))
    (grad,) = torch.autograd.grad(loss, x, g.expand(loss.shape))
    return grad.numpy()


def eager(t: dict, reduction: str):
    """The formula autograd evaluates: -t * g, scaled."""
    torch, _ = torch_and_functional()
    scale = 1 / t["input"].numel() if reduction == "mean" else 1.0
    return lambda: torch.mul(t["target"], t["grad_output"]).neg_().mul_(scale)


def shapes_of_gradients(prefix: str, op: str, r: np.random.Generator, x: np.ndarray, t: np.ndarray,
                        of: str, red: str) -> list[Spec]:
    """The cases of a KL gradient (`of` "input" or "target") of 4 x 5 log-probabilities `x` and probabilities
    `t`, with reduction `red`, in both log_target: equal shapes, either one as a batch of 1 (summed back where
    it is the one the gradient is of), rank 0, empty, rank 3."""
    specs = []
    for lt in (0, 1):
        tt = np.log(t) if lt else t
        a = {"reduction": red, "log_target": lt}
        g = grad(red, (4, 5), r)
        specs += [
            Spec(f"{prefix}_plain_{red}_lt{lt}", op, [g, x, tt], a),
            Spec(f"{prefix}_target_batch1_{red}_lt{lt}", op, [g, x, tt[:1]], a, 4 if of == "target" else 0),
            Spec(f"{prefix}_input_batch1_{red}_lt{lt}", op, [g, x[:1], tt], a, 4 if of == "input" else 0),
            Spec(f"{prefix}_rank0_{red}_lt{lt}", op, [np.array(0.75), np.array(-1.2), np.array(0.3)], a),
            Spec(f"{prefix}_empty_{red}_lt{lt}", op, [np.array(1.0), np.zeros((0, 5)), np.zeros((0, 5))], a),
            Spec(f"{prefix}_rank3_{red}_lt{lt}", op, [grad(red, (2, 3, 5), r), r.normal(size=(2, 3, 5)),
                                                     r.uniform(size=(3, 5))], a, 2 if of == "target" else 0),
        ]
    return specs


def specs() -> list[Spec]:
    r = rng(3)
    x = np.log(r.dirichlet(np.ones(5), size=4))
    t = r.dirichlet(np.ones(5), size=4)
    specs = []
    for red in ("none", "mean", "sum", "batchmean"):
        specs += shapes_of_gradients("kl_div_backward", OP, r, x, t, "input", red)
        specs.append(Spec(f"kl_div_backward_target_zero_{red}", OP,
                          [grad(red, (2, 3), r), r.normal(size=(2, 3)), np.array([[0.0, 0.5, 0.0], [0.0, 0.0, 1.0]])],
                          {"reduction": red, "log_target": 0}))
        specs.append(Spec(f"kl_div_backward_target_negative_{red}", OP,
                          [grad(red, (3,), r), r.normal(size=3), np.array([-0.5, 0.25, -2.0])],
                          {"reduction": red, "log_target": 0}))
    specs.append(Spec("kl_div_backward_default_attrs", OP, [np.array(1.0), x, t], {}))
    return specs
