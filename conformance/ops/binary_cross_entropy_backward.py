"""BinaryCrossEntropyBackward: its oracle (aten's own backward kernel), specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ...opset.spec import REDUCTIONS
from ..specs import Spec, grad, rng
from . import tensor, torch_and_functional

OP = "BinaryCrossEntropyBackward"


def oracle(grad_output, input, target, weight=None, *, reduction):
    torch, _ = torch_and_functional()
    g, x, y, w = map(tensor, (grad_output, input, target, weight))
    # aten's own backward kernel (the op torch_npu dispatches to aclnnBinaryCrossEntropyBackward)
    g, y = g.expand(x.shape), y.expand(x.shape)
    w = None if w is None else w.expand(x.shape)
    return torch.ops.aten.binary_cross_entropy_backward(g, x, y, w, REDUCTIONS.index(reduction)).numpy()


def eager(t: dict, reduction: str):
    torch, _ = torch_and_functional()
    x, g, code = t["input"], t["grad_output"], REDUCTIONS.index(reduction)
    return lambda: torch.ops.aten.binary_cross_entropy_backward(g.expand(x.shape), x, t["target"], None, code)


def specs() -> list[Spec]:
    r = rng(2)
    x, y = r.uniform(0.02, 0.98, size=(4, 5)), r.uniform(size=(4, 5))
    specs = []
    for red in ("none", "mean", "sum"):
        g = grad(red, (4, 5), r)
        specs += [
            Spec(f"bce_backward_plain_{red}", OP, [g, x, y, None], {"reduction": red}),
            Spec(f"bce_backward_weight_full_{red}", OP, [g, x, y, r.uniform(size=(4, 5))], {"reduction": red}),
            Spec(f"bce_backward_weight_class_{red}", OP, [g, x, y, r.uniform(size=5)], {"reduction": red}),
            Spec(f"bce_backward_weight_scalar_{red}", OP, [g, x, y, np.array(2.5)], {"reduction": red}),
            Spec(f"bce_backward_target_row_{red}", OP, [g, x, r.uniform(size=(1, 5)), None], {"reduction": red}),
            Spec(f"bce_backward_rank0_{red}", OP, [np.array(1.25), np.array(0.4), np.array(1.0), None],
                 {"reduction": red}),
            Spec(f"bce_backward_empty_{red}", OP, [np.array(1.0), np.zeros((0, 3)), np.zeros((0, 3)), None],
                 {"reduction": red}),
        ]
    edges = np.array([0.0, 1.0, 1e-7, 1 - 1e-7, 0.5, 0.0, 1.0])
    targets = np.array([1.0, 0.0, 1.0, 0.0, 0.5, 0.0, 1.0])
    for red in ("none", "mean", "sum"):
        specs.append(Spec(f"bce_backward_edges_{red}", OP, [grad(red, edges.shape, r), edges, targets, None],
                          {"reduction": red}))
    specs.append(Spec("bce_backward_scalar_grad_none", OP, [np.array(0.5), x, y, None], {"reduction": "none"}))
    specs.append(Spec("bce_backward_default_reduction", OP, [np.array(1.0), x, y, None], {}))
    return specs
