"""The exported step with its dropout kept off, for the check against PyTorch: random draws cannot be compared
draw for draw, so the check runs a twin that differs from the step only in its dropout.

The exporter writes dropout as ONNX `Dropout` (forward, with its keep-mask as a second output) and its
gradient as `grad * Cast(mask) * (1 / (1 - p))`. Setting each Dropout's ratio to 0 and each such scale to 1
gives the step without dropout, from the graph the user gets, without tracing and exporting the module a
second time (most of an export's time). A graph that draws random numbers any other way, or whose dropout
gradient is written otherwise, has no such twin here: the caller traces one instead.
"""

from __future__ import annotations

import itertools

import numpy as np
from onnx import ModelProto, NodeProto, numpy_helper

from ..opset import walk

RANDOM = frozenset({"Dropout", "RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike",
                    "Bernoulli", "Multinomial"})


def without_dropout(model: ModelProto) -> ModelProto | None:
    """A copy of `model` whose every Dropout keeps every element and whose dropout gradients are unscaled; None
    where the graph has no such twin (module docstring)."""
    graph = model.graph
    nested = itertools.islice(walk.model_nodes(model), len(graph.node), None)  # nested graphs' and functions'
    if any(n.op_type in RANDOM - {"Dropout"} for n in graph.node) or any(n.op_type in RANDOM for n in nested):
        return None
    tensors = {t.name: t for t in graph.initializer}  # read only where a ratio or scale is looked up: the
    tensors.update({n.output[0]: n.attribute[0].t for n in graph.node  # parameters are initializers too
                    if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"})

    def constant(name: str) -> np.ndarray | None:
        return numpy_helper.to_array(tensors[name]) if name in tensors else None

    readers: dict[str, list[tuple[int, NodeProto]]] = {}  # value -> (index, node) of each node reading it
    for k, n in enumerate(graph.node):
        for name in n.input:
            readers.setdefault(name, []).append((k, n))
    twin = ModelProto()
    twin.CopyFrom(model)
    new = twin.graph
    replaced: set[str] = set()
    for k, node in enumerate(graph.node):
        if node.op_type != "Dropout":
            continue
        ratio = constant(node.input[1]) if len(node.input) > 1 else None  # none given: 0.5, not the exporter's
        if ratio is None or ratio.size != 1:
            return None
        p = float(ratio.reshape(()))
        if not 0 <= p < 1:
            return None
        replaced.add(node.input[1])
        new.node[k].input[1] = _constant(new, f"twin_ratio_{k}", np.zeros((), ratio.dtype))
        if len(node.output) < 2 or not node.output[1]:
            continue
        for _, cast in readers.get(node.output[1], []):
            if cast.op_type != "Cast":
                return None
            for m, mul in readers.get(cast.output[0], []):
                scale = [i for i in mul.input if i != cast.output[0]]
                value = constant(scale[0]) if mul.op_type == "Mul" and len(scale) == 1 else None
                if value is None or value.size != 1 or not np.isclose(float(value.reshape(())), 1 / (1 - p),
                                                                      rtol=1e-6):
                    return None
                position = list(mul.input).index(scale[0])
                replaced.add(scale[0])
                new.node[m].input[position] = _constant(new, f"twin_scale_{m}", np.ones((), value.dtype))
    _drop_unread(new, replaced, twin)
    return twin


def _drop_unread(graph, names: set[str], model: ModelProto) -> None:
    """Remove the initializers among `names` that nothing reads any more (onnxruntime warns of each)."""
    read = {i for n in walk.model_nodes(model) for i in n.input} | {o.name for o in graph.output}
    kept = [t for t in graph.initializer if t.name not in names or t.name in read]
    if len(kept) < len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(kept)


def _constant(graph, name: str, value: np.ndarray) -> str:
    name = f"lossops_{name}"
    graph.initializer.append(numpy_helper.from_array(value, name))
    return name
