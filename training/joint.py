"""The joint forward/backward graph of a training step, traced by aot_autograd: what
`torch._functorch.aot_autograd.aot_export_module(trace_joint=True)` makes, without three of its limits that
real models meet:

- a parameter shared by two modules (tied weights) is one input, whose gradient sums both uses, as autograd's;
- a parameter that the loss does not reach gets no gradient and is left alone, as torch.optim leaves it
  (aot_export_module stops with an assertion);
- two parameters whose gradients are the same value (an LSTM's two biases) each get theirs
  (aot_export_module's signature keys gradients by node, and stops with an assertion).

A tensor the step captures (a loss module's `weight`, a closure's tensor) is a constant of the graph.

Dims of the data can be symbolic (`dims`): the graph then holds for every size of them, as PyTorch's own code
does, wherever the module's code does not depend on the size it was traced with. Axes that PyTorch finds equal
(a batch's inputs and targets) share one name.
Needs torch.
"""

from __future__ import annotations

import contextlib
import operator
from dataclasses import dataclass

from ..extras import require

torch = require("torch", "training-step export", extra="train")


Dims = list[dict[int, str]]  # per data input, its symbolic axes and their names


@dataclass
class Joint:
    """graph: (parameters, buffers, data) -> (new value of each mutated buffer, loss, gradient of each trained
    parameter); the names, in those orders. `aliases` maps a tied parameter's other names to the one used;
    `dims` the data's symbolic axes, `fixed` the ones asked for that the module's code fixed to their size."""

    graph: object  # torch.fx.GraphModule
    parameters: list[str]
    buffers: list[str]
    mutated: list[str]
    trained: list[str]
    aliases: dict[str, str]
    dims: Dims
    fixed: list[tuple[int, int, int]]  # (data input, axis, size)
    decomposed: bool  # traced with the exporter's decompositions: its graph holds only ops the exporter translates


def trace(module, loss_fn, module_args: tuple, loss_args: tuple, dims: Dims | None = None,
          decompositions: dict | None = None) -> Joint:
    """Trace `loss_fn(module(*module_args), *loss_args)` and its gradients (module docstring), with
    `decompositions` applied as it goes. `dims`, per data input, names the axes to keep symbolic; a name of None
    takes the name of the first axis found equal to it, or `<k>_<axis>`."""
    from torch._functorch.aot_autograd import _aot_export_function
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.func import functional_call
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

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

    data = module_args + loss_args
    dims = dims or [{} for _ in data]
    # a tensor the step captures (not an argument, not the module's) is a constant of the graph, not an error
    fake = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv() if any(dims) else None)

    def fakeify(tensor, axes):
        if not axes:
            return fake.from_tensor(tensor, static_shapes=True)
        sizes = [DimDynamic.DYNAMIC if a in axes else DimDynamic.STATIC for a in range(tensor.dim())]
        return fake.from_tensor(tensor, symbolic_context=StatelessSymbolicContext(dynamic_sizes=sizes))

    fakes = [fakeify(t, d) for t, d in zip(data, dims, strict=True)]
    full = [*state.values(), *fakes]
    modes = {m: m.training for m in module.modules()}
    module.train()  # the step is a training step (BatchNorm's batch statistics, dropout); the caller's mode returns
    try:
        with _equivalent_kernels():
            joint, meta, _, _ = _aot_export_function(step, tuple(full), num_params_buffers=count, no_tangents=True,
                                                     decompositions=decompositions or {}, trace_joint=True,
                                                     dynamic_shapes=fake.shape_env is not None)
    finally:
        for m, training in modes.items():
            m.train(training)
    trained = _flatten(joint, len(full), meta.num_outputs + meta.num_mutated_inp_runtime_indices, state)
    mutated = [names[i] for i in meta.mutated_inp_runtime_indices]
    symbolic, fixed = _resolve(fake.shape_env, fakes, dims)
    return Joint(joint, list(parameters), list(buffers), mutated, trained, aliases, symbolic, fixed,
                 decompositions is not None)


def _flatten(joint, inputs: int, outputs: int, state: dict) -> list[str]:
    """aot_autograd's joint graph takes (`inputs`, tangents) and returns its `outputs` and then one gradient or None
    per input: make it take the inputs and return the outputs and the gradients of the `state` (the first inputs)
    that is trained (a frozen parameter's, a buffer's, the data's left out, and what only they needed). Returns
    the trained names."""
    joint.graph.set_codegen(torch.fx.graph.CodeGen())  # flat inputs and outputs instead of aot's nested lists
    placeholders = [n for n in joint.graph.nodes if n.op == "placeholder"]
    output = next(n for n in joint.graph.nodes if n.op == "output")
    values = list(output.args[0])
    results, trained = values[:outputs], []
    for (name, value), grad in zip(state.items(), values[outputs:], strict=False):
        if value.requires_grad and grad is not None:
            results.append(grad)
            trained.append(name)
    output.args = (tuple(results),)
    joint.graph.eliminate_dead_code()
    for tangent in placeholders[inputs:]:  # no_tangents: the loss's own gradient is 1, the graph does not read it
        if tangent.users:
            raise AssertionError(f"lossops: aot_autograd's joint graph reads its tangent {tangent.name}")
        joint.graph.erase_node(tangent)
    _distinct_outputs(joint, output)
    return trained


def _resolve(shape_env, fakes: list, dims: Dims) -> tuple[Dims, list[tuple[int, int, int]]]:
    """The axes that stayed symbolic, named (axes PyTorch found equal share the first one's name), and the ones
    the trace fixed to their size."""
    symbolic: Dims = [{} for _ in fakes]
    fixed, names = [], {}
    for k, (tensor, axes) in enumerate(zip(fakes, dims, strict=True)):
        for axis, name in axes.items():
            size = tensor.shape[axis]
            expr = shape_env.simplify(size.node.expr) if isinstance(size, torch.SymInt) else size
            if not isinstance(size, torch.SymInt) or expr.is_number:
                fixed.append((k, axis, int(expr)))
                continue
            symbolic[k][axis] = names.setdefault(str(expr), name or f"{k}_{axis}")
    return symbolic, fixed


def _equivalent_kernels():
    """Among PyTorch's equivalent implementations, the ones whose backward has an ONNX translation: attention
    written out (the fused CPU kernels' backward has none), recurrent layers as their cells (not oneDNN's), and
    lossops' exportable forms of some functions (torch_forms.py)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    stack = contextlib.ExitStack()
    from .torch_forms import ExportForms

    stack.enter_context(ExportForms())
    stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
    stack.enter_context(torch.backends.mkldnn.flags(enabled=False))
    stack.enter_context(_exporting())
    return stack


@contextlib.contextmanager
def _exporting():
    """`torch.compiler.is_exporting()` (and `is_compiling()`) true while the step is traced, as torch.export
    sets them: library code that asks (transformers' attention masks) takes its traceable path instead of a
    Python decision on a tensor's value."""
    compiling, exporting = torch.compiler._is_compiling_flag, torch.compiler._is_exporting_flag
    torch.compiler._is_compiling_flag = torch.compiler._is_exporting_flag = True
    try:
        yield
    finally:
        torch.compiler._is_compiling_flag, torch.compiler._is_exporting_flag = compiling, exporting


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


class _Decomposed(torch.export.ExportedProgram):
    """A program traced with the exporter's decompositions: decomposing it again (one more trace) would give it
    back unchanged."""

    def run_decompositions(self, decomp_table=None, decompose_custom_triton_ops=False):
        return self


def exported_program(joint, decomposed: bool = False) -> torch.export.ExportedProgram:
    """`joint` (Joint.graph, untouched) as the ExportedProgram that torch.export would capture from it: its graph is
    already ATen, functional and traced with the step's symbolic sizes, so capturing it again (one more trace, with
    every symbolic size reasoned about anew) only costs time. Every input is a user input, in order; a tensor the
    step captured becomes a lifted constant, as torch.export lifts it. `decomposed`: the graph was traced with
    the exporter's decompositions (Joint.decomposed), which the program then does not run again."""
    import torch.utils._pytree as pytree
    from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
    from torch.export.graph_signature import (
        ExportGraphSignature,
        InputKind,
        InputSpec,
        OutputKind,
        OutputSpec,
        TensorArgument,
    )

    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(joint.graph, {}))
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    (output,) = [n for n in graph.nodes if n.op == "output"]
    fake_mode = placeholders[0].meta["val"].fake_mode
    constants, lifted, by_target = {}, [], {}
    for node in [n for n in graph.nodes if n.op == "get_attr"]:
        value = getattr(joint, node.target)
        if not isinstance(value, torch.Tensor):
            continue
        if node.target not in by_target:  # one input per constant, however many nodes read it
            with graph.inserting_before(placeholders[0]):
                constant = by_target[node.target] = graph.placeholder(f"lifted_{node.target}")
            constant.meta["val"] = fake_mode.from_tensor(value, static_shapes=True)
            constants[constant.name] = value
            lifted.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(constant.name), constant.name))
        node.replace_all_uses_with(by_target[node.target])
        graph.erase_node(node)
    for node in graph.nodes:  # the trace may leave the value of an element of a tuple result on the tuple only
        if node.target is operator.getitem and "val" not in node.meta:
            node.meta["val"] = node.args[0].meta["val"][node.args[1]]
        if node.op == "call_function":  # a node outside every module (the backward's): the exporter warns for each
            node.meta.setdefault("nn_module_stack", {})
    outputs = list(output.args[0])
    signature = ExportGraphSignature(
        input_specs=lifted + [InputSpec(InputKind.USER_INPUT, TensorArgument(p.name), None) for p in placeholders],
        output_specs=[OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(o.name), None) for o in outputs])
    shape_env = fake_mode.shape_env
    symbols = {s for p in placeholders for d in p.meta["val"].shape if isinstance(d, torch.SymInt)
               for s in d.node.expr.free_symbols}
    ranges = {s: shape_env.var_to_range[s] for s in symbols} if shape_env else {}
    calls = ModuleCallSignature(inputs=[], outputs=[], in_spec=pytree.tree_flatten((tuple(placeholders), {}))[1],
                                out_spec=pytree.tree_flatten(tuple(outputs))[1])
    module = torch.fx.GraphModule(joint, graph)
    kind = _Decomposed if decomposed else torch.export.ExportedProgram
    return kind(module, module.graph, signature, {}, ranges, [ModuleCallEntry("", calls)], constants=constants)
