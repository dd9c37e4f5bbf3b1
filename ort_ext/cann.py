"""The Ascend path: what ONNX Runtime's CANN execution provider can claim, the Ascend products' limits, and
whether a CANN session can run here. No Ascend hardware was available when this was written: everything
here is checked against the provider's published rules and the real onnxruntime-cann wheel, not an NPU."""

from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass
from pathlib import Path

import onnx
import onnxruntime
from onnx import ModelProto, TensorProto

from .. import opset
from ..opset.spec import ASCEND_BFLOAT16, ASCEND_MAX_RANK, ASCEND_PARTS
from ..opset.validation import node_label

SUPPORT = json.loads((Path(__file__).parent / "cann_support.json").read_text())
PROVIDER = "CANNExecutionProvider"
# lossops' defaults, the user's provider options win: keep CPU fallback per node, keep the dtype (CANN may
# otherwise force float16), and do not write .om files into the working directory.
DEFAULT_OPTIONS = {"enable_cann_subgraph": "1", "precision_mode": "must_keep_origin_dtype", "dump_om_model": "0"}

MODES = ("graph", "single-op")  # the provider's graph mode (enable_cann_graph, its default) and single-op mode


@dataclass
class Placement:
    node: str
    claimed: bool
    reason: str


def placement(model: ModelProto, mode: str = "graph") -> list[Placement]:
    """Node by node: would the CANN provider claim it (graph mode: cann_graph.cc's rules, and the op at the
    model's opset in the table of CANN's ONNX parser; single-op mode: the wheel's kernel table, by op, opset
    version and element type)."""
    if mode not in MODES:
        raise ValueError(f"mode is {mode!r}; expected one of {', '.join(MODES)}")
    version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    initializers = {i.name for i in model.graph.initializer}
    types = {}
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
        types = {v.name: v.type.tensor_type.elem_type for v in (*inferred.graph.input, *inferred.graph.value_info)}
    except Exception:
        pass
    types.update({i.name: i.data_type for i in model.graph.initializer})
    result = []
    for k, node in enumerate(model.graph.node):
        label = node_label(node, k)
        if node.domain not in ("", "ai.onnx"):
            result.append(Placement(label, False, f"custom domain '{node.domain}' is never claimed; lower it first "
                                                  "(lossops lower --for cann)"))
            continue
        inputs = [i for i in node.input if i]
        if mode == "graph":
            parsed = SUPPORT["onnx_parser"]["ops"].get(node.op_type, [])
            if node.op_type not in SUPPORT["graph_mode"]["ops"]:
                result.append(Placement(label, False, f"{node.op_type} is not on graph mode's list"))
            elif version not in parsed:
                listed = f"it lists opsets {parsed[0]}-{parsed[-1]}" if parsed else "it does not list the op"
                result.append(Placement(label, False, f"CANN's ONNX parser has no {node.op_type} at opset {version} "
                                                      f"({listed}); lower for cann to restamp the opset"))
            elif version < SUPPORT["graph_mode"]["min_opset"]:
                result.append(Placement(label, False, f"model opset {version} < {SUPPORT['graph_mode']['min_opset']}"))
            elif inputs and all(i in initializers for i in inputs):
                result.append(Placement(label, False, "all its inputs are initializers"))
            else:
                result.append(Placement(label, True, "graph mode"))
            continue
        kernels = SUPPORT["single_op_mode"]["kernels"].get(node.op_type)
        if not kernels:
            result.append(Placement(label, False, f"no single-op kernel for {node.op_type}: falls back to CPU"))
            continue
        elem = types.get(inputs[0]) if inputs else None
        type_name = _TYPE_NAMES.get(elem)
        fits = [kn for kn in kernels if kn[0] <= version and (kn[1] is None or version <= kn[1])]
        if not fits:
            result.append(Placement(label, False, f"no {node.op_type} kernel for opset {version}: falls back to CPU"))
        elif type_name and all(kn[2] not in (None, type_name) for kn in fits):
            result.append(Placement(label, False, f"{node.op_type} has no {type_name} kernel "
                                                  f"(only {sorted({kn[2] for kn in fits})}): falls back to CPU"))
        else:
            result.append(Placement(label, True, "single-op kernel"))
    return result


_TYPE_NAMES = {TensorProto.FLOAT: "float", TensorProto.FLOAT16: "MLFloat16", TensorProto.DOUBLE: "double",
               TensorProto.INT32: "int32_t", TensorProto.INT64: "int64_t", TensorProto.BFLOAT16: "BFloat16",
               TensorProto.BOOL: "bool", TensorProto.INT8: "int8_t"}


def soc_problems(model: ModelProto, soc: str) -> list[tuple[str, str]]:
    """The aclnn limits of one Ascend part, for each lossops node: (node, problem)."""
    if soc not in ASCEND_PARTS:
        raise ValueError(f"soc is {soc!r}; expected one of {', '.join(ASCEND_PARTS)}")
    inferred = onnx.shape_inference.infer_shapes(model)
    values = {v.name: v.type.tensor_type for v in (*inferred.graph.input, *inferred.graph.value_info)}
    problems = []
    for k, node in enumerate(model.graph.node):
        if node.domain != opset.DOMAIN:
            continue
        label = node_label(node, k)
        aclnn = opset.get(node.op_type).aclnn if node.op_type in opset.OPS else None
        listed = aclnn.products.get(soc) if aclnn else None
        if aclnn is None:
            problems.append((label, f"{node.op_type} has no aclnn counterpart (a lossops training companion)"))
        elif listed is False:
            problems.append((label, f"{node.op_type} is not supported on {soc} (aclnn page)"))
        elif listed is None:
            problems.append((label, f"{node.op_type} is not listed for {soc} on its aclnn page: unknown"))
        principal = node.input[opset.get(node.op_type).principal] if node.op_type in opset.OPS else ""
        shape = values[principal].shape if principal in values and values[principal].HasField("shape") else None
        if aclnn and aclnn.ranks and shape is not None and len(shape.dim) not in aclnn.ranks:
            problems.append((label, f"input '{principal}' has rank {len(shape.dim)}; {aclnn.api} takes rank "
                                    f"{' or '.join(map(str, aclnn.ranks))}"))
        if aclnn and aclnn.only:
            attrs, scalars = opset.get(node.op_type).resolve(opset.node_attributes(node)), dict(aclnn.scalars)
            problems.extend((label, f"{scalars[name]} is {attrs[scalars[name]]:g}; {aclnn.api} supports {name} "
                                    f"{value:g} only (aclnn page)")
                            for name, value in aclnn.only if attrs[scalars[name]] != value)
        for name in (i for i in node.input if i in values):
            t = values[name]
            if t.elem_type == TensorProto.BFLOAT16 and soc not in ASCEND_BFLOAT16:
                problems.append((label, f"input '{name}' is bfloat16, which {soc} does not support (A2/A3/950 only)"))
            if t.HasField("shape") and len(t.shape.dim) > ASCEND_MAX_RANK:
                problems.append((label, f"input '{name}' has rank {len(t.shape.dim)}; aclnn takes at most "
                                        f"{ASCEND_MAX_RANK}"))
    return problems


@dataclass
class Toolkit:
    env: dict[str, str | None]
    loadable: bool
    error: str


def toolkit() -> Toolkit:
    """The CANN toolkit as set_env.sh announces it, and whether libascendcl.so loads."""
    env = {k: os.environ.get(k) for k in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH")}
    try:
        ctypes.CDLL("libascendcl.so")
        return Toolkit(env, True, "")
    except OSError as e:
        return Toolkit(env, False, str(e))


class CannUnavailable(RuntimeError):
    """A CANN session was asked for and cannot run here; the message says why."""


def why_unavailable() -> str | None:
    """None when a CANN session can be created here, else the reason."""
    if PROVIDER not in onnxruntime.get_available_providers():
        return (f"this onnxruntime build ({onnxruntime.__version__}) has no {PROVIDER}: install onnxruntime-cann "
                "in an environment without onnxruntime")
    kit = toolkit()
    if not kit.loadable:
        announced = ", ".join(f"{k}={v}" for k, v in kit.env.items() if v) or "no ASCEND_* variables set"
        return (f"the CANN toolkit is not usable: libascendcl.so does not load ({kit.error}; {announced}); "
                "install CANN and source set_env.sh")
    return None


def provider_options(user: dict | None) -> dict:
    return {**DEFAULT_OPTIONS, **(user or {})}
