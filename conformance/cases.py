"""The conformance cases, written like onnx's node cases: each builds a graph and its inputs; the expected
outputs come from PyTorch in float64 (each operator's oracle, conformance/ops/), computed once by `golden.py`
and stored.

Node specs (conformance/specs.py) give an operator, inputs in float64 and attributes: each operator's own in
its conformance module, and here those that cross operators (plans, ranks). Each becomes one case per dtype,
the inputs rounded to the dtype before both the backend and the oracle see them. Graph cases combine lossops
nodes with standard ops.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from onnx import ModelProto, TensorProto, helper

from .. import opset
from ..opset.registry import module_name
from ..opset.shapes import infer
from ..opset.spec import DTYPE_NAMES, LABEL_LIST
from . import ops
from .specs import Spec, draw, grad, label_lists, rng, sequence_batch

BCEWL, BCEB, KLB, KL = "BinaryCrossEntropyWithLogits", "BinaryCrossEntropyBackward", "KlDivBackward", "KlDiv"


# the functions whose specs make up the suite: each operator's, then those registered with @spec_source
SPEC_SOURCES: list[Callable[[], list[Spec]]] = [m.specs for m in ops.modules().values()]


def spec_source(function: Callable[[], list[Spec]]) -> Callable[[], list[Spec]]:
    """Register `function`'s specs as part of the conformance suite."""
    SPEC_SOURCES.append(function)
    return function


def large_specs() -> list[Spec]:
    """Every operator, big enough for the kernels' blocked, multi-threaded path (blocks split on axis 0 and on
    axis 1), unreduced and reduced. The inputs are drawn from their records' domains: required ones in full,
    optional ones per row and per column in turn; the other values of an enum attribute (log_target) take turns
    across the shapes."""
    r = rng(4)
    specs = []
    for k, shape in enumerate(((300, 1000), (3, 70001))):
        n, c = shape
        for op in opset.OPS.values():
            if op.classes:
                specs += _large_class_specs(op, n, c, r)
                continue
            if op.sequences:
                specs += _large_sequence_specs(op, n, c, r)
                continue
            enums = {a.name: a.allowed[k % len(a.allowed)] for a in op.attributes if a.enum and a.name != "reduction"}
            suffix = "".join(f"_{name}{value}" for name, value in enums.items())
            for red in ("none", "mean"):
                optional = iter([(n, 1), (c,)] * len(op.inputs))
                inputs = [grad(red, shape, r) if i.name == "grad_output" else
                          draw(r, i.domain, next(optional) if i.optional else shape) for i in op.inputs]
                summed = n * c if op.reduces and red != "none" else 0
                specs.append(Spec(f"{module_name(op.name)}_large_{n}x{c}_{red}{suffix}", op.name, inputs,
                                  {"reduction": red, **enums}, summed))
    return specs


def _large_class_specs(op, n: int, c: int, r: np.random.Generator) -> list[Spec]:
    """A class loss at a large size: the classes on axis 1 (1000 or 70001 of them), a tenth of the rows
    ignored (or probabilities as targets), a weight per class."""
    x, t = draw(r, op.inputs[op.principal].domain, (n, c)), r.integers(0, c, n)
    t[::10] = -100
    if not op.input("target").indices:  # probabilities
        t = r.dirichlet(np.ones(c), size=n)
    elif op.input("target").domain == LABEL_LIST:  # up to ten labels a row
        t = label_lists(r, (n, c), 10)
    specs = []
    for red in ("none", "mean"):
        inputs = [grad(red, (n,), r) if i.name == "grad_output" else x if i.name == "input" else t
                  if i.name == "target" else r.uniform(0.3, 2.0, c) for i in op.inputs]
        reduced = n if op.reduces and red != "none" else 0
        softmax = c if "CrossEntropy" in op.name else 0  # each value is relative to a sum over the classes
        margins = 10 * c if op.input("target").domain == LABEL_LIST else 0  # a row's margins, summed
        specs.append(Spec(f"{module_name(op.name)}_large_{n}x{c}_{red}", op.name, inputs, {"reduction": red},
                          max(reduced, softmax, margins)))
    return specs


def _large_sequence_specs(op, n: int, c: int, r: np.random.Generator) -> list[Spec]:
    """A sequence loss at a large size: 100 frames of 60 sequences over 40 classes (tasks on every thread),
    or 20 frames of 3 sequences over 70001 classes; targets of up to 30 labels, half of them concatenated."""
    frames, batch, classes = (100, 60, 40) if n == 300 else (20, 3, c)
    inputs = sequence_batch(r, frames, batch, classes, min(30, frames // 2), concatenated=n != 300)
    states = 2 * min(30, frames // 2) + 1
    specs = []
    for red in ("none", "mean"):
        given = [grad(red, (batch,), r)] if op.name.endswith("Backward") else []
        summed = frames * states * (batch if op.reduces and red != "none" else 1)
        specs.append(Spec(f"{module_name(op.name)}_large_{frames}x{batch}x{classes}_{red}", op.name,
                          given + inputs, {"reduction": red}, summed))
    return specs


@spec_source
def plan_specs() -> list[Spec]:
    """Broadcasts whose computed shape is large while the inputs stay small: a sum back over more than 64
    tiles (one task), one split over several tasks, and a reduction over several tasks."""
    r = rng(9)
    sumback = [(1, 1024), (80, 1), 80, "sum", 0], [(1, 256), (600, 1), 600, "mean", 1]
    specs = [Spec(f"kl_div_backward_plan_sum_back_{x[0]}x{x[1]}_by_{t[0]}x{t[1]}_{red}_lt{lt}", KLB,
                  [r.normal(size=()), r.normal(size=x), np.log(r.uniform(0.01, 1, size=t)) if lt else
                   r.uniform(size=t)], {"reduction": red, "log_target": lt}, summed)
             for x, t, summed, red, lt in sumback]
    x, t = np.log(r.uniform(0.01, 1, size=(300, 1))), r.uniform(size=(1, 700))
    specs.append(Spec("kl_div_plan_broadcast_300x1_by_1x700_sum", KL, [x, t], {"reduction": "sum"}, 300 * 700))
    for x_shape, t_shape in (((0,), (2, 0)), ((3, 0), (4, 3, 0)), ((3, 1), (3, 0))):  # empty sums back
        name = "x".join(map(str, x_shape)) + "_by_" + "x".join(map(str, t_shape))
        specs.append(Spec(f"kl_div_backward_empty_sum_back_{name}", KLB,
                          [np.array(1.0), np.zeros(x_shape), np.ones(t_shape)], {"reduction": "sum"}))
    return specs


@spec_source
def rank_specs() -> list[Spec]:
    """Ranks 4 to 8 (the aclnn limit), with a per-class weight broadcast along the last axis."""
    r = rng(5)
    specs = []
    for rank in range(4, 9):
        shape = (2, 1, 3, 1, 2, 1, 2, 3)[-rank:]
        x, y, c = r.normal(size=shape), r.uniform(size=shape), r.uniform(0.5, 2, size=shape[-1])
        specs += [
            Spec(f"bce_with_logits_rank{rank}", BCEWL, [x, y, None, c], {"reduction": "none"}),
            Spec(f"bce_backward_rank{rank}", BCEB, [r.normal(size=shape), r.uniform(0.05, 0.95, size=shape), y, c],
                 {"reduction": "none"}),
            Spec(f"kl_div_backward_rank{rank}", KLB, [np.array(1.0), x, y[:1]], {"reduction": "batchmean"}),
        ]
    return specs


def node_specs() -> list[Spec]:
    """Every spec of the conformance suite (small tensors: the goldens ship with the package)."""
    return [spec for source in SPEC_SOURCES for spec in source()]


# ---- cases: specs made into models, one per dtype, plus graph cases -------------------------------------

ELEM = DTYPE_NAMES
DTYPES = tuple(ELEM)


def np_dtype(name: str) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(ELEM[name]))


@dataclass
class Case:
    """A graph, its inputs (graph input order) and how to compute its expected output in float64."""

    name: str
    model: ModelProto
    inputs: list[np.ndarray]
    dtype: str  # the dtype whose tolerance applies (the precision the lossops nodes compute at)
    reference: Callable[[list[np.ndarray]], np.ndarray]  # float64 inputs -> float64 expected output (torch)
    summed: int = 0
    oracle_error: Callable[[list[np.ndarray]], float] = lambda inputs: 0.0
    magnitude: Callable[[list[np.ndarray]], np.ndarray | float] = lambda inputs: 0.0

    @functools.cached_property
    def expectation(self) -> tuple[np.ndarray, float, np.ndarray | float]:
        """(expected output, the oracle's own error, term magnitude) in float64: computed once per case, since
        tests hold several backends' outputs to it."""
        inputs64 = widened(self.inputs)
        return self.reference(inputs64), self.oracle_error(inputs64), self.magnitude(inputs64)

    def check(self, got: np.ndarray) -> tuple[bool, float, str]:
        """(ok, error in ulps, message): `got` against the oracle in float64, within the dtype's tolerance."""
        from .tolerance import compare

        expected, oracle_error, magnitude = self.expectation
        return compare(got, expected, self.dtype, self.summed, oracle_error, magnitude=magnitude)


def node_model(op: str, inputs: list[np.ndarray | None], dtype: str, attrs: dict,
               symbolic: bool = False) -> tuple[ModelProto, dict[str, np.ndarray]]:
    """A model with one lossops node (no functions); absent optional inputs are left out of the node."""
    formal = [i.name for i in opset.get(op).inputs]
    names = [name if a is not None else "" for name, a in zip(formal, inputs, strict=False)]
    while names and not names[-1]:
        names.pop()
    feeds = {n: a for n, a in zip(formal, inputs, strict=False) if a is not None}

    def dims(n: str, a: np.ndarray) -> list:
        return [f"{n}_{k}" for k in range(a.ndim)] if symbolic else list(a.shape)

    out_shape = infer(opset.get(op), {n: tuple(dims(n, a)) for n, a in feeds.items()}, opset.get(op).resolve(attrs))
    graph = helper.make_graph(
        [opset.make_node(op, names, ["output"], **attrs)], "case",
        [helper.make_tensor_value_info(n, TensorProto.INT64 if a.dtype.kind == "i" else ELEM[dtype], dims(n, a))
         for n, a in feeds.items()],
        [helper.make_tensor_value_info("output", ELEM[dtype], list(out_shape))],
    )
    model = helper.make_model(graph, opset_imports=opset.opset_imports(), ir_version=opset.IR_VERSION)
    return model, feeds


def widened(inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Inputs as the oracles take them: values in float64, class indices as they are (int64)."""
    return [a if a.dtype.kind == "i" else a.astype(np.float64) for a in inputs]


def _array(a):
    return None if a is None else np.asarray(a)


def spec_case(spec: Spec, dtype: str, symbolic: bool = False) -> Case:
    from .tolerance import oracle_error, term_magnitude

    oracle = ops.module(spec.op).oracle

    with np.errstate(over="ignore"):  # huge values become inf in the narrow types: that is the case then
        rounded = [None if a is None else a if a.dtype.kind == "i" else np.asarray(a).astype(np_dtype(dtype))
                   for a in map(_array, spec.inputs)]
    model, feeds = node_model(spec.op, rounded, dtype, spec.attrs, symbolic)
    present = [k for k, a in enumerate(rounded) if a is not None]
    attrs = opset.get(spec.op).resolve(spec.attrs)

    def full(inputs: list[np.ndarray]) -> list[np.ndarray | None]:
        it = iter(inputs)
        return [next(it) if k in present else None for k in range(len(spec.inputs))]

    def reference(inputs: list[np.ndarray]) -> np.ndarray:
        return oracle(*full(inputs), **attrs)

    suffix = "_symbolic" if symbolic else ""
    name = f"test_{spec.id}_{dtype}{suffix}"
    return Case(name, model, list(feeds.values()), dtype, reference, spec.summed,
                lambda inputs: oracle_error(spec.op, full(inputs), attrs),
                lambda inputs: term_magnitude(spec.op, full(inputs), attrs))


def _graph(name: str, nodes, inputs: dict[str, tuple[int, list]], output: tuple[int, list]) -> ModelProto:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, name, [vi(k, t, s) for k, (t, s) in inputs.items()], [vi("output", *output)])
    return helper.make_model(graph, opset_imports=opset.opset_imports(), ir_version=opset.IR_VERSION)


def graph_cases() -> list[Case]:
    """Small graphs that mix lossops nodes with standard ops, as exporters and training graphs do."""
    r = rng(6)
    cases = []
    for dtype in ("float32", "float64"):
        T, d = ELEM[dtype], np_dtype(dtype)
        feats, w, b = r.normal(size=(5, 4)).astype(d), r.normal(size=(4, 3)).astype(d), r.normal(size=3).astype(d)
        labels, pw = (r.uniform(size=(5, 3)) < 0.5).astype(d), r.uniform(0.5, 3, size=3).astype(d)
        cases.append(Case(
            f"test_graph_linear_logits_to_bce_with_logits_{dtype}",
            _graph("linear_bce", [
                helper.make_node("MatMul", ["features", "weight"], ["mm"]),
                helper.make_node("Add", ["mm", "bias"], ["logits"]),
                opset.make_node(BCEWL, ["logits", "labels", "", "pos_weight"], ["output"], reduction="mean")],
                {"features": (T, [5, 4]), "weight": (T, [4, 3]), "bias": (T, [3]), "labels": (T, [5, 3]),
                 "pos_weight": (T, [3])}, (T, [])),
            [feats, w, b, labels, pw], dtype,
            lambda i: _torch_graph("linear_bce", i), summed=15))
        z, y, g = r.normal(size=(4, 6)).astype(d), r.uniform(size=(4, 6)).astype(d), r.normal(size=(4, 6)).astype(d)
        cases.append(Case(
            f"test_graph_sigmoid_to_bce_backward_{dtype}",
            _graph("sigmoid_bce_backward", [
                helper.make_node("Sigmoid", ["logits"], ["probs"]),
                opset.make_node(BCEB, ["grad", "probs", "labels"], ["output"], reduction="none")],
                {"grad": (T, [4, 6]), "logits": (T, [4, 6]), "labels": (T, [4, 6])}, (T, [4, 6])),
            [g, z, y], dtype, lambda i: _torch_graph("sigmoid_bce_backward", i)))
        t = r.dirichlet(np.ones(6), size=1).astype(d)
        cases.append(Case(
            f"test_graph_log_softmax_to_kl_div_backward_{dtype}",
            _graph("log_softmax_kl_backward", [
                helper.make_node("LogSoftmax", ["scores"], ["log_probs"], axis=-1),
                opset.make_node(KLB, ["grad", "log_probs", "target"], ["output"], reduction="batchmean")],
                {"grad": (T, []), "scores": (T, [4, 6]), "target": (T, [1, 6])}, (T, [4, 6])),
            [np.array(1.0, d), z, t], dtype, lambda i: _torch_graph("log_softmax_kl_backward", i)))
    f32, f16 = TensorProto.FLOAT, TensorProto.FLOAT16
    x, y = (r.normal(scale=4, size=(3, 5)).astype(np.float32), r.uniform(size=(3, 5)).astype(np.float32))
    cases.append(Case(
        "test_graph_float16_bce_with_logits_between_casts",
        _graph("float16_casts", [
            helper.make_node("Cast", ["logits"], ["logits16"], to=f16),
            helper.make_node("Cast", ["labels"], ["labels16"], to=f16),
            opset.make_node(BCEWL, ["logits16", "labels16"], ["loss16"], reduction="none"),
            helper.make_node("Cast", ["loss16"], ["output"], to=f32)],
            {"logits": (f32, [3, 5]), "labels": (f32, [3, 5])}, (f32, [3, 5])),
        [x, y], "float16", lambda i: _torch_graph("float16_casts", i)))
    return cases


def _torch_graph(kind: str, inputs: list[np.ndarray]) -> np.ndarray:
    """The graph cases in PyTorch float64."""
    import torch
    import torch.nn.functional as F

    from .oracle import ORACLES

    t = [torch.from_numpy(np.asarray(a, np.float64)) for a in inputs]
    if kind == "linear_bce":
        feats, w, b, labels, pw = t
        return F.binary_cross_entropy_with_logits(feats @ w + b, labels, pos_weight=pw).numpy()
    if kind == "sigmoid_bce_backward":
        g, z, y = t
        return ORACLES[BCEB](g.numpy(), torch.sigmoid(z).numpy(), y.numpy(), reduction="none")
    if kind == "log_softmax_kl_backward":
        g, z, target = t
        return ORACLES[KLB](g.numpy(), torch.log_softmax(z, -1).numpy(), target.numpy(), reduction="batchmean",
                            log_target=0)
    x16, y16 = (a.to(torch.float16).to(torch.float64) for a in t)  # what the Casts make of the inputs
    return ORACLES[BCEWL](x16.numpy(), y16.numpy(), reduction="none").astype(np.float16).astype(np.float64)


SYMBOLIC_SPECS = ("bce_with_logits_both_none", "bce_with_logits_pos_weight_mean", "bce_backward_target_row_none",
                  "bce_backward_weight_class_mean", "kl_div_backward_target_batch1_none_lt0",
                  "kl_div_backward_input_batch1_sum_lt1", "kl_div_backward_rank3_batchmean_lt0",
                  "kl_div_backward_empty_sum_back_3x0_by_4x3x0")


def all_cases() -> list[Case]:
    """The suite: every node spec in every dtype, symbolic-dim variants, and the graph cases."""
    specs = node_specs()
    cases = [spec_case(s, dtype) for s in specs for dtype in DTYPES]
    cases += [spec_case(s, dtype, symbolic=True) for s in specs if s.id in SYMBOLIC_SPECS for dtype in DTYPES]
    return cases + graph_cases()
