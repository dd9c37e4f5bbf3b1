"""Test cases as data: operator, inputs (float64, rounded to the dtype under test), attributes.

Shared by the operator tests of every backend. Inputs are made in float64 and rounded to the dtype under
test before both the backend and the oracle see them, so the only differences measured are the backend's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

BCEWL, BCEB, KLB = "BinaryCrossEntropyWithLogits", "BinaryCrossEntropyBackward", "KlDivBackward"


@dataclass
class Case:
    id: str
    op: str
    inputs: list[np.ndarray | None]
    attrs: dict = field(default_factory=dict)
    summed: int = 0  # terms summed into each output element (reductions, KL's sum over broadcast axes)


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _grad(reduction: str, shape: tuple[int, ...], r: np.random.Generator) -> np.ndarray:
    return r.normal(size=()) if reduction != "none" else r.normal(size=shape)


def bce_with_logits_cases() -> list[Case]:
    r = _rng(1)
    x, y = r.normal(scale=3, size=(4, 5)), r.uniform(size=(4, 5))
    cases = []
    for red in ("none", "mean", "sum"):
        s = x.size if red != "none" else 0
        cases += [
            Case(f"bcewl-plain-{red}", BCEWL, [x, y, None, None], {"reduction": red}, s),
            Case(f"bcewl-weight-full-{red}", BCEWL, [x, y, r.uniform(size=(4, 5)), None], {"reduction": red}, s),
            Case(f"bcewl-weight-scalar-{red}", BCEWL, [x, y, np.array(0.7), None], {"reduction": red}, s),
            Case(f"bcewl-weight-class-{red}", BCEWL, [x, y, r.uniform(size=5), None], {"reduction": red}, s),
            Case(f"bcewl-pos-weight-{red}", BCEWL, [x, y, None, r.uniform(0.5, 3, size=5)], {"reduction": red}, s),
            Case(f"bcewl-both-{red}", BCEWL, [x, y, r.uniform(size=(4, 1)), r.uniform(0.5, 3, size=5)],
                 {"reduction": red}, s),
            Case(f"bcewl-rank0-{red}", BCEWL, [np.array(0.3), np.array(1.0), None, None], {"reduction": red}),
            Case(f"bcewl-empty-{red}", BCEWL, [np.zeros((0, 5)), np.zeros((0, 5)), None, np.ones(5)],
                 {"reduction": red}),
            Case(f"bcewl-rank3-{red}", BCEWL, [r.normal(size=(2, 3, 4)), r.uniform(size=(2, 3, 4)), None,
                                                r.uniform(size=4)], {"reduction": red}, s),
        ]
    extreme = np.array([-1e4, -200, -100.5, -20, -1e-3, 0, 1e-3, 20, 100.5, 200, 1e4])
    for target in (0.0, 1.0, 0.5):
        cases.append(Case(f"bcewl-extreme-target{target}", BCEWL,
                          [extreme, np.full(extreme.shape, target), None, None], {"reduction": "none"}))
    cases.append(Case("bcewl-extreme-mean", BCEWL, [extreme, np.full(extreme.shape, 0.25), None, None], {},
                      extreme.size))
    cases.append(Case("bcewl-default-reduction", BCEWL, [x, y, None, None], {}, x.size))
    return cases


def bce_backward_cases() -> list[Case]:
    r = _rng(2)
    x, y = r.uniform(0.02, 0.98, size=(4, 5)), r.uniform(size=(4, 5))
    cases = []
    for red in ("none", "mean", "sum"):
        g = _grad(red, (4, 5), r)
        cases += [
            Case(f"bceb-plain-{red}", BCEB, [g, x, y, None], {"reduction": red}),
            Case(f"bceb-weight-full-{red}", BCEB, [g, x, y, r.uniform(size=(4, 5))], {"reduction": red}),
            Case(f"bceb-weight-class-{red}", BCEB, [g, x, y, r.uniform(size=5)], {"reduction": red}),
            Case(f"bceb-weight-scalar-{red}", BCEB, [g, x, y, np.array(2.5)], {"reduction": red}),
            Case(f"bceb-target-row-{red}", BCEB, [g, x, r.uniform(size=(1, 5)), None], {"reduction": red}),
            Case(f"bceb-rank0-{red}", BCEB, [np.array(1.25), np.array(0.4), np.array(1.0), None],
                 {"reduction": red}),
            Case(f"bceb-empty-{red}", BCEB, [np.array(1.0), np.zeros((0, 3)), np.zeros((0, 3)), None],
                 {"reduction": red}),
        ]
    edges = np.array([0.0, 1.0, 1e-7, 1 - 1e-7, 0.5, 0.0, 1.0])
    targets = np.array([1.0, 0.0, 1.0, 0.0, 0.5, 0.0, 1.0])
    for red in ("none", "mean", "sum"):
        cases.append(Case(f"bceb-edges-{red}", BCEB, [_grad(red, edges.shape, r), edges, targets, None],
                          {"reduction": red}))
    cases.append(Case("bceb-scalar-grad-none", BCEB, [np.array(0.5), x, y, None], {"reduction": "none"}))
    cases.append(Case("bceb-default-reduction", BCEB, [np.array(1.0), x, y, None], {}))
    return cases


def kl_div_backward_cases() -> list[Case]:
    r = _rng(3)
    x = np.log(r.dirichlet(np.ones(5), size=4))
    t = r.dirichlet(np.ones(5), size=4)
    cases = []
    for red in ("none", "mean", "sum", "batchmean"):
        for lt in (0, 1):
            tt = np.log(t) if lt else t
            a = {"reduction": red, "log_target": lt}
            g = _grad(red, (4, 5), r)
            cases += [
                Case(f"klb-plain-{red}-lt{lt}", KLB, [g, x, tt], a),
                Case(f"klb-target-batch1-{red}-lt{lt}", KLB, [g, x, tt[:1]], a),
                Case(f"klb-input-batch1-{red}-lt{lt}", KLB, [g, x[:1], tt], a, 4),
                Case(f"klb-rank0-{red}-lt{lt}", KLB, [np.array(0.75), np.array(-1.2), np.array(0.3)], a),
                Case(f"klb-empty-{red}-lt{lt}", KLB, [np.array(1.0), np.zeros((0, 5)), np.zeros((0, 5))], a),
                Case(f"klb-rank3-{red}-lt{lt}", KLB, [_grad(red, (2, 3, 5), r), r.normal(size=(2, 3, 5)),
                                                      r.uniform(size=(3, 5))], a),
            ]
        cases.append(Case(f"klb-target-zero-{red}", KLB,
                          [_grad(red, (2, 3), r), r.normal(size=(2, 3)), np.array([[0.0, 0.5, 0.0], [0.0, 0.0, 1.0]])],
                          {"reduction": red, "log_target": 0}))
        cases.append(Case(f"klb-target-negative-{red}", KLB,
                          [_grad(red, (3,), r), r.normal(size=3), np.array([-0.5, 0.25, -2.0])],
                          {"reduction": red, "log_target": 0}))
    cases.append(Case("klb-default-attrs", KLB, [np.array(1.0), x, t], {}))
    return cases


def large_cases() -> list[Case]:
    """Big enough for the kernels' blocked, multi-threaded path (blocks split on axis 0 and on axis 1)."""
    r = _rng(4)
    cases = []
    for shape in ((300, 1000), (3, 70001)):
        n, c = shape
        x, y = r.normal(scale=4, size=shape), r.uniform(size=shape)
        p = r.uniform(0.1, 1, size=shape)
        t = r.uniform(size=shape)
        for red in ("none", "mean"):
            cases += [
                Case(f"bcewl-large-{n}x{c}-{red}", BCEWL, [x, y, r.uniform(size=(n, 1)), r.uniform(0.5, 3, size=c)],
                     {"reduction": red}, x.size if red != "none" else 0),
                Case(f"bceb-large-{n}x{c}-{red}", BCEB, [_grad(red, shape, r), p, y, r.uniform(size=c)],
                     {"reduction": red}),
                Case(f"klb-large-{n}x{c}-{red}", KLB, [_grad(red, shape, r), x, t], {"reduction": red}),
                Case(f"klb-large-{n}x{c}-{red}-lt1", KLB, [_grad(red, shape, r), x, np.log(t)],
                     {"reduction": red, "log_target": 1}),
            ]
    return cases


def all_cases() -> list[Case]:
    return bce_with_logits_cases() + bce_backward_cases() + kl_div_backward_cases() + large_cases()
