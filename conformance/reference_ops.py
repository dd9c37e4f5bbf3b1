"""lossops operators for onnx.reference.ReferenceEvaluator.

Each class evaluates the operator's standard-op decomposition, specialised to the node's attributes and
types (`opset.expand`), with onnx's reference implementation of the standard ops: the decomposition's
semantics in a runtime independent of onnxruntime and of the lossops kernels.
"""

from __future__ import annotations

import numpy as np
from onnx import helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from .. import opset


class _LossopsOp(OpRun):
    op_domain = opset.DOMAIN

    def _run(self, *inputs, **attributes):
        op = opset.get(type(self).__name__)
        attrs = {k: v.decode() if isinstance(v, bytes) else v.item() if hasattr(v, "item") else v
                 for k, v in attributes.items() if k in op.defaults()}
        first = next(a for a in inputs if a is not None)
        elem_type = helper.np_dtype_to_tensor_dtype(first.dtype)
        given = list(inputs) + [None] * (len(op.inputs) - len(inputs))
        names = [i.name if a is not None else "" for i, a in zip(op.inputs, given, strict=True)]
        # copies: onnx 1.23's reference Softmax returns an empty input itself, and LogSoftmax then takes its log in
        # place, which fails on a read-only one (a stored golden's)
        feeds = {n: np.array(a) for n, a in zip(names, given, strict=True) if n}
        node = opset.make_node(op.name, names, ["output"], **attrs)
        graph = helper.make_graph(
            opset.expand(node, elem_type, prefix="_"), op.name,
            [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
             for n, a in feeds.items()],
            [helper.make_tensor_value_info("output", elem_type, None)])
        model = helper.make_model(graph, opset_imports=opset.opset_imports(), ir_version=opset.IR_VERSION)
        return tuple(ReferenceEvaluator(model).run(None, feeds))


REFERENCE_OPS = [type(name, (_LossopsOp,), {}) for name in opset.OPS]
