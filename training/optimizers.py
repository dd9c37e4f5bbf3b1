"""Optimizers written into a training-step graph, with torch.optim's single-tensor semantics (the CPU
default): SGD (momentum, dampening, nesterov, weight decay), Adam and AdamW (bias correction, amsgrad),
and clipping of the gradients by their global norm (torch.nn.utils.clip_grad_norm_).

The step graph takes the learning rate, the other hyper-parameters (`Optimizer.hyper`: momentum, betas,
weight decay, ...) and the count of steps already taken as run-time inputs (float64 and int64 scalars), so
any schedule works without re-exporting. What shapes the graph is fixed at export: which state an optimizer
keeps (a momentum buffer where momentum is not 0), nesterov, amsgrad, and whether weight decay is applied
(where it is not 0). Scalars that PyTorch computes in Python (1 - beta, bias corrections, lr / bias
correction) are computed in float64 here too, then cast to the parameter's type, as PyTorch casts them when
it hands them to its float32 kernels.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from onnx import TensorProto

from ..opset.builder import Nodes

LR, STEP = "lr", "step"  # the step graph's run-time scalars: learning rate, steps taken before this one


def new_name(name: str) -> str:
    """The step graph's output for state entry `name`."""
    return f"{name}.new"


def gradient_name(param: str) -> str:
    """The optimizer-step-alone graph's input for the gradient of `param` (gradient accumulation)."""
    return f"{param}.grad"


def slot_name(param: str, slot: str) -> str:
    """The state entry of optimizer slot `slot` (torch.optim's name, e.g. exp_avg) for parameter `param`."""
    return f"{param}/{slot}"


def _scalar(g: Nodes, value: str, elem: int) -> str:
    """A float64 run-time scalar in the parameter's type."""
    return g.op("Cast", value, to=elem)


def _one_minus(g: Nodes, value: str, elem: int) -> str:
    """1 - a float64 run-time scalar, computed in float64 (as Python computes it), in the parameter's type."""
    return g.op("Cast", g.op("Sub", g.const(1.0, TensorProto.DOUBLE), value), to=elem)


@dataclass(frozen=True)
class SGD:
    """torch.optim.SGD. `lr` is the default of the step's run-time learning rate."""

    lr: float = 1e-3
    momentum: float = 0.0
    dampening: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False

    def __post_init__(self):
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening 0 (as torch.optim.SGD)")

    @property
    def slots(self) -> tuple[str, ...]:
        """Per-parameter state, named as torch.optim's state dict names it."""
        return ("momentum_buffer",) if self.momentum else ()

    @property
    def hyper(self) -> dict[str, float]:
        """The run-time hyper-parameters besides `lr`, with their values at export (those the graph uses)."""
        names = (("momentum", "dampening") if self.momentum else ()) + (("weight_decay",) if self.weight_decay else ())
        return {n: float(getattr(self, n)) for n in names}

    def update(self, g: Nodes, param: str, grad: str, state: dict[str, str], elem: int, first: str,
               lr: str, step: str, hyper: dict[str, str]) -> tuple[str, dict[str, str]]:
        """(new parameter, new state) for one parameter. `first` is true on the first step (bool scalar);
        `lr` is the learning rate in float64, `step` the new step count in float64, `hyper` the inputs of the
        other hyper-parameters (float64)."""
        d = grad
        if self.weight_decay:
            d = g.op("Add", d, g.op("Mul", param, _scalar(g, hyper["weight_decay"], elem)))
        new_state = {}
        if self.momentum:
            buf = state["momentum_buffer"]
            momentum = _scalar(g, hyper["momentum"], elem)
            later = g.op("Add", g.op("Mul", buf, momentum), g.op("Mul", d, _one_minus(g, hyper["dampening"], elem)))
            # torch.optim.SGD's first step sets the buffer to the gradient itself, whatever the dampening
            buf = g.op("Where", first, d, later, hint="momentum_buffer")
            new_state["momentum_buffer"] = buf
            d = g.op("Add", d, g.op("Mul", buf, momentum)) if self.nesterov else buf
        return g.op("Sub", param, g.op("Mul", d, _scalar(g, lr, elem))), new_state

    def torch(self, params, lr: float | None = None):
        import torch

        return torch.optim.SGD(params, lr=self.lr if lr is None else lr, momentum=self.momentum,
                               dampening=self.dampening, weight_decay=self.weight_decay, nesterov=self.nesterov)


@dataclass(frozen=True)
class Adam:
    """torch.optim.Adam (L2 weight decay added to the gradient)."""

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    amsgrad: bool = False
    decoupled = False  # AdamW: decay the parameter itself

    @property
    def slots(self) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if self.amsgrad else ())

    @property
    def hyper(self) -> dict[str, float]:
        """The run-time hyper-parameters besides `lr` (betas as beta1, beta2), with their values at export."""
        values = {"beta1": self.betas[0], "beta2": self.betas[1], "eps": self.eps}
        return {k: float(v) for k, v in values.items()} | ({"weight_decay": float(self.weight_decay)}
                                                          if self.weight_decay else {})

    def update(self, g: Nodes, param: str, grad: str, state: dict[str, str], elem: int, first: str,
               lr: str, step: str, hyper: dict[str, str]) -> tuple[str, dict[str, str]]:
        double = TensorProto.DOUBLE
        beta1, beta2 = hyper["beta1"], hyper["beta2"]
        if self.weight_decay and self.decoupled:
            keep = g.op("Sub", g.const(1.0, double), g.op("Mul", lr, hyper["weight_decay"]))
            param = g.op("Mul", param, g.op("Cast", keep, to=elem))
        elif self.weight_decay:
            grad = g.op("Add", grad, g.op("Mul", param, _scalar(g, hyper["weight_decay"], elem)))
        m, v = state["exp_avg"], state["exp_avg_sq"]
        # exp_avg.lerp_(grad, 1 - beta1), exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        m = g.op("Add", m, g.op("Mul", g.op("Sub", grad, m), _one_minus(g, beta1, elem)), hint="exp_avg")
        v = g.op("Add", g.op("Mul", v, _scalar(g, beta2, elem)),
                 g.op("Mul", g.op("Mul", grad, grad), _one_minus(g, beta2, elem)), hint="exp_avg_sq")
        new_state = {"exp_avg": m, "exp_avg_sq": v}
        if self.amsgrad:
            v = new_state["max_exp_avg_sq"] = g.op("Max", state["max_exp_avg_sq"], v, hint="max_exp_avg_sq")
        correction1 = g.op("Sub", g.const(1.0, double), g.op("Pow", beta1, step))
        correction2_sqrt = g.op("Sqrt", g.op("Sub", g.const(1.0, double), g.op("Pow", beta2, step)))
        step_size = g.op("Cast", g.op("Div", lr, correction1), to=elem)
        denom = g.op("Add", g.op("Div", g.op("Sqrt", v), g.op("Cast", correction2_sqrt, to=elem)),
                     _scalar(g, hyper["eps"], elem))
        return g.op("Sub", param, g.op("Mul", g.op("Div", m, denom), step_size)), new_state

    def torch(self, params, lr: float | None = None):
        import torch

        cls = torch.optim.AdamW if self.decoupled else torch.optim.Adam
        return cls(params, lr=self.lr if lr is None else lr, betas=self.betas, eps=self.eps,
                   weight_decay=self.weight_decay, amsgrad=self.amsgrad)


@dataclass(frozen=True)
class AdamW(Adam):
    """torch.optim.AdamW: the parameter decays by lr * weight_decay before the Adam step."""

    weight_decay: float = 1e-2
    decoupled = True


Optimizer = SGD | Adam


def clip_by_global_norm(g: Nodes, grads: list[str], elems: list[int], max_norm: float) -> list[str]:
    """torch.nn.utils.clip_grad_norm_(max_norm): scale every gradient by min(1, max_norm / (norm + 1e-6)),
    the norm taken over all gradients together (computed in float64)."""
    double = TensorProto.DOUBLE
    squares = [g.op("ReduceSumSquare", g.op("Cast", grad, to=double), keepdims=0) for grad in grads]
    total = squares[0] if len(squares) == 1 else g.op("Sum", *squares)
    norm = g.op("Sqrt", total, hint="grad_norm")
    coef = g.op("Min", g.op("Div", g.const(max_norm, double), g.op("Add", norm, g.const(1e-6, double))),
                g.const(1.0, double), hint="clip_coef")
    return [g.op("Mul", grad, g.op("Cast", coef, to=elem)) for grad, elem in zip(grads, elems, strict=True)]


def describe(optimizer: Optimizer) -> dict:
    """The optimizer as JSON-able data (saved with a checkpoint)."""
    return {"type": type(optimizer).__name__, **dataclasses.asdict(optimizer)}
