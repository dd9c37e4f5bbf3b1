"""The joint forward/backward graph of a training step, traced by aot_autograd: what
`torch._functorch.aot_autograd.aot_export_module(trace_joint=True)` makes, without three of its limits that
real models meet:

- a parameter shared by two modules (tied weights) is one input, whose gradient sums both uses, as autograd's;
- a parameter that the loss does not reach gets no gradient and is left alone, as torch.optim leaves it
  (aot_export_module stops with an assertion);
- two parameters whose gradients are the same value (an LSTM's two biases) each get theirs
  (aot_export_module's signature keys gradients by node, and stops with an assertion).

A tensor the step captures (a loss module's `weight`, a closure's tensor) is a constant of the graph.
Needs torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..extras import require

torch = require("torch", "training-step export", extra="train")


@dataclass
class Joint:
    """graph: (parameters, buffers, data) -> (new value of each mutated buffer, loss, gradient of each trained
    parameter); the names, in those orders. `aliases` maps a tied parameter's other names to the one used."""

    graph: object  # torch.fx.GraphModule
    parameters: list[str]
    buffers: list[str]
    mutated: list[str]
    trained: list[str]
    aliases: dict[str, str]


def trace(module, loss_fn, module_args: tuple, loss_args: tuple) -> Joint:
    """Trace `loss_fn(module(*module_args), *loss_args)` and its gradients (module docstring)."""
    from torch._functorch.aot_autograd import _aot_export_function
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.func import functional_call
    from torch.fx.experimental.proxy_tensor import make_fx

    parameters = dict(module.named_parameters())  # tied parameters once, under their first name
    aliases = {name: next(n for n, p in parameters.items() if p is tensor)
               for name, tensor in module.named_parameters(remove_duplicate=False) if name not in parameters}
    buffers = dict(module.named_buffers())
    state = {**parameters, **buffers}
    names, count = list(state), len(state)

    def step(*flat):
        values = dict(zip(names, flat[:count], strict=True))
        data = flat[count:]
        out = functional_call(module, values, tuple(data[:len(module_args)]), tie_weights=True, strict=False)
        return (loss_fn(out, *data[len(module_args):]),)

    # a tensor the step captures (not an argument, not the module's) is a constant of the graph, not an error
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    full = [*state.values(), *(fake.from_tensor(a) for a in module_args + loss_args)]
    trained: list[str] = []
    graph = meta = None

    def flat_joint(*args):
        outputs, gradients = graph(args, [None] * (meta.num_outputs + meta.num_mutated_inp_runtime_indices))
        kept = []
        for name, value, grad in zip(names, args, gradients[:count], strict=False):
            if isinstance(value, torch.Tensor) and value.requires_grad and grad is not None:
                kept.append(grad)
                if name not in trained:
                    trained.append(name)
        return *outputs, *kept

    modes = {m: m.training for m in module.modules()}
    module.train()  # the step is a training step (BatchNorm's batch statistics, dropout); the caller's mode returns
    try:
        with _equivalent_kernels():
            graph, meta, _, _ = _aot_export_function(step, tuple(full), num_params_buffers=count, no_tangents=True,
                                                     decompositions={}, trace_joint=True)
            joint = make_fx(flat_joint, record_module_stack=True)(*full)
    finally:
        for m, training in modes.items():
            m.train(training)
    _distinct_outputs(joint, next(n for n in joint.graph.nodes if n.op == "output"))
    mutated = [names[i] for i in meta.mutated_inp_runtime_indices]
    return Joint(joint, list(parameters), list(buffers), mutated, trained, aliases)


def _equivalent_kernels():
    """Among PyTorch's equivalent implementations, the ones whose backward has an ONNX translation: attention
    written out (the fused CPU kernels' backward has none), recurrent layers as their cells (not oneDNN's), and
    lossops' exportable forms of some functions (torch_forms.py)."""
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel

    stack = contextlib.ExitStack()
    from .torch_forms import ExportForms

    stack.enter_context(ExportForms())
    stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
    stack.enter_context(torch.backends.mkldnn.flags(enabled=False))
    return stack


def _distinct_outputs(joint, output) -> None:
    """Give every output its own node (two gradients may be one value): exporters name outputs by node."""
    seen = set()
    values = []
    for value in output.args[0]:
        if value in seen or value.op == "placeholder":
            with joint.graph.inserting_before(output):
                copy = joint.graph.call_function(torch.ops.aten.clone.default, (value,))
            copy.meta["val"] = value.meta.get("val")
            value = copy
        seen.add(value)
        values.append(value)
    output.args = (tuple(values),)
    joint.recompile()
