"""The rows engine (ort_ext/kernels/rows.py), which runs the class losses: every place its plan changes (rows per
task, one row per task past the task size, the strided layout of (N, C, d1, ...)), both front ends, all four
types, against PyTorch float64 within the conformance tolerances; its checks; and its arithmetic at the edges."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lossops import opset
from lossops.conformance.backends import BACKENDS
from lossops.conformance.cases import Spec, spec_case
from lossops.conformance.specs import label_lists
from lossops.opset.registry import module_name
from lossops.opset.spec import LABEL_LIST
from lossops.ort_ext.arrays import InvalidInput, _planned, run
from lossops.ort_ext.kernels import layout
from lossops.ort_ext.kernels.labels import MASK_CLASSES
from lossops.ort_ext.kernels.registry import KERNELS

CLASS_OPS = sorted(name for name, k in KERNELS.items() if k.rows)
LABEL_OPS = [name for name in CLASS_OPS if opset.get(name).input("target").domain == LABEL_LIST]
INDEX_OPS = [name for name in CLASS_OPS if opset.get(name).input("target").indices and name not in LABEL_OPS]
SOFT_OPS = [name for name in CLASS_OPS if name not in INDEX_OPS + LABEL_OPS]  # probabilities as targets
DTYPES = ["float32", "float64", "float16", "bfloat16"]


def test_every_class_loss_has_a_row_kernel():
    assert CLASS_OPS == sorted(op.name for op in opset.OPS.values() if op.classes)


def _per_task(op_name: str, c: int) -> int:
    return max(1, KERNELS[op_name].task_tiles * layout.TILE // c)


def points(op_name: str) -> list[tuple[str, tuple[int, ...]]]:
    """(name, input shape): rows around one, two and three tasks, for few classes, many (a task of a few rows) and
    more than a task holds (a row per task); the (N, C, d) layout, whose classes are d apart, across a task."""
    found = []
    for c in (3, 1000, KERNELS[op_name].task_tiles * layout.TILE + 5):
        per = _per_task(op_name, c)
        rows = sorted({per - 1, per, per + 1, 2 * per + 1, 3 * per} - {0}) if c < 5000 else [1, 2, 3]
        found += [(f"c{c}_rows{n}", (n, c)) for n in rows]
    c = 5
    per = _per_task(op_name, c)
    found += [(f"strided_c{c}_rows{n}", (n // 7 + 1, c, 7)) for n in (per - 1, 2 * per + 1)]
    if op_name in LABEL_OPS:  # past the classes a row's label mask holds: the labels scanned instead
        found.append((f"c{MASK_CLASSES + 1}_rows2", (2, MASK_CLASSES + 1)))
    return found


def specs(op_name: str) -> list[Spec]:
    op = opset.get(op_name)
    r = np.random.default_rng(len(op_name))
    out = []
    for k, (name, shape) in enumerate(points(op_name)):
        red = ("none", "mean", "sum")[k % 3]
        rows_shape = (shape[0], *shape[2:])
        c = shape[1]
        softmax = "CrossEntropy" in op_name
        x = r.normal(0, 3, shape) if softmax else _probabilities(r, shape, np.log)
        t = r.integers(0, c, rows_shape)
        t.flat[::4] = -100
        if op_name in SOFT_OPS:
            t = _probabilities(r, shape)
        if op_name in LABEL_OPS:
            x, t = r.normal(0, 3, shape), label_lists(r, shape, 4)
        w = r.uniform(0.3, 2.0, c) if k % 2 else None
        g = r.normal(size=rows_shape if red == "none" else ())
        attrs = {"reduction": red}
        if "label_smoothing" in op.attribute_names:
            attrs["label_smoothing"] = (0.0, 0.25)[k % 2]  # a FLOAT attribute: exact in float32
        given = {"grad_output": g, "input": x, "target": t, "weight": w}
        rows = int(np.prod(rows_shape))
        margins = 4 * c if op_name in LABEL_OPS else 0  # a row's margins, summed
        summed = max(rows if op.reduces and red != "none" else 0, c if softmax else 0, margins)
        out.append(Spec(f"{module_name(op_name)}_{name}_{red}", op_name, [given[i.name] for i in op.inputs],
                        attrs, summed))
    return out


def _probabilities(r: np.random.Generator, shape: tuple[int, ...], link=lambda p: p) -> np.ndarray:
    """`link` of probabilities over axis 1 of `shape`."""
    p = r.dirichlet(np.ones(shape[1]), (shape[0], *shape[2:]))
    return np.ascontiguousarray(np.moveaxis(link(p), -1, 1))


CASES = [(s, d) for op in CLASS_OPS for s in specs(op) for d in DTYPES]


@pytest.mark.parametrize("spec,dtype", CASES, ids=[f"{s.id}-{d}" for s, d in CASES])
def test_rows_follow_pytorch_across_the_plan(spec, dtype):
    """In onnxruntime (the session's threads) and serially (numpy front end): the same bits, within the
    conformance tolerance of PyTorch float64."""
    case = spec_case(spec, dtype)
    in_ort = BACKENDS["kernels"](case.model, case.inputs)
    ok, _, msg = case.check(in_ort)
    assert ok, msg
    direct = run(spec.op, case.inputs, **spec.attrs)
    assert in_ort.shape == direct.shape and in_ort.tobytes() == direct.tobytes()


def test_the_points_cross_the_task_size():
    """A task takes whole rows: each operator's points give one task, two and three, and a row per task."""
    for op_name in CLASS_OPS:
        tasks = set()
        for _, shape in points(op_name):
            target = {op_name in SOFT_OPS: np.zeros(shape, np.float32), op_name in LABEL_OPS: np.zeros(shape, np.int64)}
            given = {"grad_output": np.float32(1), "input": np.zeros(shape, np.float32), "weight": None,
                     "target": target.get(True, np.zeros((shape[0], *shape[2:]), np.int64))}
            inputs = [given[i.name] for i in opset.get(op_name).inputs]
            plan = _planned(op_name, inputs, {"reduction": "sum"})[0]
            tasks.add((int(plan["ntasks"][0]), int(plan["task_tiles"][0]) == 1))
        assert {n for n, _ in tasks} >= {1, 2, 3}, (op_name, tasks)
        assert (3, True) in tasks or (2, True) in tasks, (op_name, tasks)


@pytest.mark.parametrize("op_name", LABEL_OPS)
def test_a_bad_label_is_refused_before_any_read(op_name):
    """A label list's value outside [-1, C), after the row's first -1 too (PyTorch's rule), names the operator,
    the value and its place; a label list of another shape or type is refused."""
    op = opset.get(op_name)
    x = np.zeros((2, 3), np.float32)
    for bad in (3, 1 << 40, -2, -(1 << 40)):
        t = np.array([[0, 2, -1], [1, -1, bad]])
        inputs = {"grad_output": np.float32(1), "input": x, "target": t}
        with pytest.raises(InvalidInput, match=rf"{op_name}: input 'target' must hold class indices in \[0, C\) or "
                                              rf"-1 \(a row's labels end at its first -1\); it holds {bad} at flat "
                                              rf"index 5 \(C = 3\)"):
            run(op_name, [inputs[i.name] for i in op.inputs], reduction="sum")
    for t, words in ((np.zeros((2, 3), np.float32), "has element type float; expected int64"),
                     (np.zeros((2, 2), np.int64), r"has shape \(2, 2\); expected exactly input's shape \(2, 3\)")):
        with pytest.raises(InvalidInput, match=f"{op_name}: input 'target' {words}"):
            run(op_name, [{"grad_output": np.float32(1), "input": x, "target": t}[i.name] for i in op.inputs],
                reduction="sum")


@pytest.mark.parametrize("op_name", INDEX_OPS)
def test_a_bad_target_is_refused_before_any_read(op_name):
    """A class of C, far beyond it or negative (not ignore_index) names the operator, the value and its place;
    the target is checked before the output exists, so nothing is read out of bounds."""
    op = opset.get(op_name)
    x = np.zeros((4, 3), np.float32)
    for bad in (3, 1 << 40, -1, -(1 << 40)):
        t = np.array([0, 2, bad, 1])
        inputs = {"grad_output": np.float32(1), "input": x, "target": t, "weight": None}
        with pytest.raises(InvalidInput, match=rf"{op_name}: input 'target' must hold class indices in \[0, C\) "
                                              rf"or ignore_index; it holds {bad} at flat index 2 \(C = 3\)"):
            run(op_name, [inputs[i.name] for i in op.inputs], reduction="sum")
    with pytest.raises(InvalidInput, match=f"{op_name}: input 'target' has element type float; expected int64"):
        run(op_name, [{"grad_output": np.float32(1), "input": x, "target": np.zeros(4, np.float32)}.get(i.name)
                      for i in op.inputs], reduction="sum")


def _ce(x, t, **kw):
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    loss = F.cross_entropy(xt, torch.tensor(t), **kw)
    loss.backward(torch.ones_like(loss))
    return loss.detach().numpy(), xt.grad.numpy()


def test_cross_entropy_at_extreme_logits():
    """Logits of 1e4, a certain prediction (the target's gradient p - 1 cancels: computed apart, in float64), -inf
    at classes no target picks, and a target logit so far below the row's maximum that the one-pass sum (shifted by
    the target's logit) overflows float32 and is redone from the maximum."""
    x = np.array([[1e4, 0.0, -1e4], [30.0, -30.0, 0.0], [0.0, -np.inf, 5.0], [80.0, -80.0, 0.0]], np.float32)
    t = np.array([0, 1, 2, 1])
    for red in ("none", "sum"):
        loss, grad = _ce(x.astype(np.float64), t, reduction=red)
        got = run("CrossEntropyLoss", [x, t, None], reduction=red)
        np.testing.assert_allclose(got, loss, rtol=2e-6, atol=0)
        g = np.ones(4, np.float32) if red == "none" else np.float32(1)
        got_grad = run("CrossEntropyLossGrad", [g, x, t, None], reduction=red)
        np.testing.assert_allclose(got_grad, grad, rtol=2e-6, atol=1e-30)
    # a NaN logit makes its row's loss NaN (its maximum passes it over, its sum does not); a +inf logit, at the
    # target or elsewhere, too: PyTorch's log_softmax gives NaN there, loss and gradient
    x[1, 2], x[2, 0], x[3, 1] = np.nan, np.inf, np.inf
    loss, grad = _ce(x.astype(np.float64), t, reduction="none")
    assert np.isnan(loss[1:]).all() and np.isnan(grad[1:]).all()
    got = run("CrossEntropyLoss", [x, t, None], reduction="none")
    np.testing.assert_array_equal(np.isnan(got), np.isnan(loss))
    got_grad = run("CrossEntropyLossGrad", [np.ones(4, np.float32), x, t, None], reduction="none")
    np.testing.assert_array_equal(np.isnan(got_grad), np.isnan(grad))


def test_task_split_does_not_change_a_reduced_loss_with_threads():
    """The rows' partial sums are per task, added in task order: one thread and two give the same bits."""
    import onnxruntime

    from lossops.conformance.cases import node_model
    from lossops.ort_ext import InferenceSession

    r = np.random.default_rng(3)
    x, t = r.normal(size=(5000, 37)).astype(np.float32), r.integers(0, 37, 5000)
    model, feeds = node_model("CrossEntropyLoss", [x, t, None], "float32", {"reduction": "mean"})
    got = []
    for threads in (1, 2):
        so = onnxruntime.SessionOptions()
        so.intra_op_num_threads = threads
        got.append(InferenceSession(model.SerializeToString(), so, mode="kernels").run(None, feeds)[0])
    assert got[0].tobytes() == got[1].tobytes()
    assert _planned("CrossEntropyLoss", [x, t, None], {"reduction": "mean"})[0]["ntasks"][0] > 2


@pytest.mark.parametrize("op_name", SOFT_OPS)
def test_probabilities_of_another_shape_are_refused(op_name):
    """Probabilities as targets must have exactly input's shape (no broadcasting: PyTorch's rule), and its type."""
    op = opset.get(op_name)
    x = np.zeros((4, 3, 2), np.float32)
    for shape in ((4, 3), (4, 1, 2), (4, 3, 2, 1)):
        inputs = {"grad_output": np.float32(1), "input": x, "target": np.zeros(shape, np.float32)}
        with pytest.raises(InvalidInput, match=rf"{op_name}: input 'target' has shape \({', '.join(map(str, shape))}"
                                              rf"\); expected exactly input's shape \(4, 3, 2\)"):
            run(op_name, [inputs.get(i.name) for i in op.inputs], reduction="sum")
    with pytest.raises(InvalidInput, match=f"{op_name}: input 'target' has element type int64; expected float"):
        run(op_name, [{"grad_output": np.float32(1), "input": x, "target": np.zeros(x.shape, np.int64)}.get(i.name)
                      for i in op.inputs], reduction="sum")


def test_soft_targets_at_extreme_logits():
    """Logits of 1e4 and 80 apart, a first logit so far below the row's maximum that the one pass (shifted by it)
    overflows float32 and is redone from the maximum, a class of logit -inf: with target 0 its term is 0 * inf, NaN
    in the loss as PyTorch's, while the gradient stays finite as autograd's; a row of no class is 0."""
    x = np.array([[1e4, 0.0, -1e4], [80.0, -80.0, 0.0], [0.0, -np.inf, 5.0], [-100.0, 0.0, 3.0]], np.float32)
    t = np.array([[0.5, 0.25, 0.25], [0.0, 1.0, 0.0], [0.3, 0.0, 0.7], [0.1, 0.2, 0.7]], np.float32)
    for red in ("none", "sum"):
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        loss = F.cross_entropy(xt, torch.tensor(t, dtype=torch.float64), reduction=red)
        loss.backward(torch.ones_like(loss))
        got = run("SoftTargetCrossEntropyLoss", [x, t, None], reduction=red)
        np.testing.assert_allclose(got, loss.detach().numpy(), rtol=2e-6, atol=0)
        g = np.ones(4, np.float32) if red == "none" else np.float32(1)
        got_grad = run("SoftTargetCrossEntropyLossGrad", [g, x, t, None], reduction=red)
        np.testing.assert_allclose(got_grad, xt.grad.numpy(), rtol=2e-6, atol=1e-30)
    assert np.isnan(run("SoftTargetCrossEntropyLoss", [x, t, None], reduction="none")[2])
    none = run("SoftTargetCrossEntropyLoss", [np.zeros((2, 0)), np.zeros((2, 0)), None], reduction="none")
    assert none.tolist() == F.cross_entropy(torch.zeros(2, 0), torch.zeros(2, 0), reduction="none").tolist()
