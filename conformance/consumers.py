"""ONNX consumers that nobody on this project wrote, held to the suite through the portable form (`lossops
lower`: standard ops only; none of them expands model-local functions): OpenVINO, tract and TVM, each an
optional extra; onnx2torch and onnx2pytorch (installed by hand: they need a torchvision built for the installed
torch); onnx2tf (installed by hand, in an environment of its own); onnxruntime-node and onnxruntime-web (npm's
packages, run by Node.js; web as WebAssembly); and tools that rewrite models, then onnxruntime: onnxoptimizer
and onnxsim (optional extras) and onnx's version converter to opsets 13, 17, 18, 22 and 23. Their known limits
are declared here, once, with the reason, and the runner reports the cases they cover as skipped, never as
passed.
"""

from __future__ import annotations

import atexit
import json
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
from onnx import ModelProto

BF16 = np.dtype(ml_dtypes.bfloat16)


@dataclass(frozen=True)
class Limit:
    """Cases a consumer cannot run as lossops writes them, through no fault of the model."""

    applies: Callable[[str, str], bool]  # (case name, dtype whose tolerance applies) -> covered
    reason: str


# tract's LogSoftmax, as onnx.reference's, is log(Softmax(x)): -inf for a logit far below its row's maximum (about
# 104 in float32, 745 in float64), where SoftTargetCrossEntropyLoss's extreme cases are finite
LOG_OF_SOFTMAX = Limit(lambda case, dtype: "soft_target_cross_entropy_extreme" in case,
                       "its LogSoftmax is log(Softmax(x)), -inf where a logit is far below its row's maximum")


@dataclass(frozen=True)
class Consumer:
    module: str  # what must import
    extra: str  # the lossops extra that installs it
    run: Callable[[ModelProto, list[np.ndarray]], np.ndarray]  # portable model, inputs -> output 0
    limits: tuple[Limit, ...]
    missing: Callable[[], str | None] | None = None  # why it cannot run here, where importing `module` cannot say

    def limit(self, case: str, dtype: str) -> str | None:
        return next((lim.reason for lim in self.limits if lim.applies(case, dtype)), None)


def _saved(model: ModelProto, directory: str) -> str:
    path = str(Path(directory) / "model.onnx")
    onnx.save(model, path)
    return path


def _openvino(model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
    import openvino as ov

    core = ov.Core()
    with tempfile.TemporaryDirectory() as directory:
        read = core.read_model(_saved(model, directory))
    # the CPU plugin may otherwise compute float32 in bfloat16 where the CPU has it: compute as the graph says
    compiled = core.compile_model(read, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    kept = set().union(*(i.get_names() for i in compiled.inputs))  # it drops graph inputs that no node reads
    for value, array in zip(model.graph.input, inputs, strict=True):
        if value.name not in kept:
            continue
        if array.dtype == BF16:
            tensor = ov.Tensor(ov.Type.bf16, ov.Shape(list(array.shape)))
            tensor.data.view(np.uint16)[...] = array.view(np.uint16)
        else:
            tensor = ov.Tensor(np.array(array))  # a copy: OpenVINO wants writable memory
        request.set_tensor(value.name, tensor)
    request.infer()
    out = request.get_output_tensor(0)
    data = np.array(out.data)
    if out.element_type == ov.Type.bf16:  # its numpy view of bfloat16 is float16-typed raw bits
        data = data.view(np.uint16).view(BF16)
    return data.reshape(tuple(out.shape))


def _tract(model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
    import tract

    with tempfile.TemporaryDirectory() as directory:
        runnable = tract.onnx().load(_saved(model, directory)).into_model().into_runnable()
    return runnable.run([np.array(a) for a in inputs])[0].to_numpy()


def _tvm(model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    module = from_onnx(model, keep_params_in_input=False)
    machine = relax.VirtualMachine(tvm.compile(module, target="llvm"), tvm.cpu())
    # np.array, not np.ascontiguousarray, which makes a rank-0 input rank 1
    out = machine["main"](*(tvm.runtime.tensor(np.array(a, order="C")) for a in inputs))
    return (out[0] if isinstance(out, tvm.ir.Array) else out).numpy()


def _torch_converted(convert: Callable[[ModelProto], object]) -> Callable[[ModelProto, list[np.ndarray]], np.ndarray]:
    """A converter from ONNX to a PyTorch module (onnx2torch, onnx2pytorch), the module then run eagerly."""

    def run(model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
        import torch

        def tensor(a: np.ndarray) -> torch.Tensor:  # torch reads no ml_dtypes arrays: bfloat16 goes as its bits
            return torch.from_numpy(np.array(a.view(np.int16))).view(torch.bfloat16) if a.dtype == BF16 \
                else torch.from_numpy(np.array(a))

        module = convert(model)
        with torch.no_grad():
            out = module(*(tensor(a) for a in inputs))
        out = out[0] if isinstance(out, list | tuple) else out
        return out.view(torch.int16).numpy().view(BF16) if out.dtype == torch.bfloat16 else out.numpy()

    return run


def _torch_converter_missing(module: str) -> Callable[[], str | None]:
    """Why converter `module` cannot run here: it imports torchvision, and PyPI's torchvision is built for PyPI's
    CUDA torch, so beside the CPU torch (`lossops[torch]`) it does not import."""

    def missing() -> str | None:
        import importlib.util

        if importlib.util.find_spec(module) is None:
            return (f"{module} is not installed: pip install {module}, with torch and torchvision from one index "
                    "(PyTorch's CPU index for the CPU build)")
        try:
            import torchvision  # noqa: F401
        except Exception as e:  # RuntimeError when its operators do not match the installed torch
            return f"{module} imports torchvision, which does not import here ({type(e).__name__}: {e})"
        return None

    return missing


def _onnx2torch(model: ModelProto) -> object:
    from onnx2torch import convert

    return convert(model)


def _onnx2pytorch(model: ModelProto) -> object:
    from onnx2pytorch import ConvertModel

    return ConvertModel(model)


def _onnx2tf(model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
    """onnx2tf's conversion to a Keras model, the Keras model then run. Not through onnxsim, which onnx2tf runs
    first by default: the model as lossops writes it (onnxsim's rewrite makes onnx2tf drop the Casts to
    float16, so float16 graphs return float32)."""
    import onnx2tf

    with tempfile.TemporaryDirectory() as directory:
        converted = onnx2tf.convert(
            onnx_graph=model, output_folder_path=directory, non_verbose=True, disable_model_save=True,
            not_use_onnxsim=True, keep_shape_absolutely_input_names=[v.name for v in model.graph.input])
    out = converted([np.array(a) for a in inputs])  # inputs as they are: no NCHW -> NHWC (keep_shape_absolutely)
    return np.array(out[0] if isinstance(out, list | tuple) else out)


def _onnx2tf_missing() -> str | None:
    import importlib.util

    if importlib.util.find_spec("onnx2tf") is None:
        return ("onnx2tf is not installed: it pins TensorFlow, numpy, onnx and onnxruntime, so give it an environment "
                "of its own (pip install onnx2tf tensorflow-cpu tf-keras onnx-graphsurgeon sng4onnx, then lossops)")
    return None


_NODE_TYPES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64", np.dtype(np.float16): "float16",
               np.dtype(np.int64): "int64"}  # a class loss's target


class _NodeRunner:
    """An npm package of onnxruntime (onnxruntime-node, or onnxruntime-web's WebAssembly build), through one
    Node.js process running ort_node_runner.js for the whole conformance run (a request per case on its stdin;
    ended when the interpreter exits). Node finds the package as it finds any: install it with
    `npm install <package> --ignore-scripts` where Node looks, or name its node_modules in NODE_PATH."""

    SCRIPT = Path(__file__).with_name("ort_node_runner.js")

    def __init__(self, package: str):
        self.package = package
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def missing(self) -> str | None:
        if shutil.which("node") is None:
            return f"Node.js is not installed ({self.package} runs in it)"
        found = subprocess.run(["node", "-e", f"require.resolve('{self.package}')"], capture_output=True)
        if found.returncode:
            return (f"{self.package} is not installed where Node looks: npm install {self.package} --ignore-scripts"
                    " (or set NODE_PATH to its node_modules)")
        return None

    def _started(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(["node", str(self.SCRIPT), self.package], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, text=True)
            atexit.register(self._process.kill)
        return self._process

    def __call__(self, model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
        with self._lock, tempfile.TemporaryDirectory() as directory:
            request = {"model": _saved(model, directory), "output": str(Path(directory) / "output"), "inputs": []}
            for k, (value, array) in enumerate(zip(model.graph.input, inputs, strict=True)):
                path = Path(directory) / f"input_{k}"
                path.write_bytes(np.ascontiguousarray(array).tobytes())
                request["inputs"].append({"name": value.name, "type": _NODE_TYPES[array.dtype],
                                          "dims": list(array.shape), "file": str(path)})
            process = self._started()
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            reply = json.loads(process.stdout.readline() or '{"error": "onnxruntime-node exited"}')
            if "error" in reply:
                raise RuntimeError(f"{self.package}: {reply['error']}")
            dtype = next(d for d, name in _NODE_TYPES.items() if name == reply["type"])
            return np.frombuffer(Path(request["output"]).read_bytes(), dtype).reshape(reply["dims"])


_ORT_NODE, _ORT_WEB = _NodeRunner("onnxruntime-node"), _NodeRunner("onnxruntime-web")


def _then_onnxruntime(transform: Callable[[ModelProto], ModelProto]) -> Callable[[ModelProto, list[np.ndarray]],
                                                                                  np.ndarray]:
    """A tool that rewrites ONNX models (onnx's version converter, onnxoptimizer, onnxsim), then onnxruntime: what
    a user who passes the portable form through the tool gets."""

    def run(model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
        import onnxruntime

        from ..opset.versions import IR_VERSION
        from ..ort_ext.session import run_with_bfloat16

        rewritten = transform(model)
        rewritten.ir_version = min(rewritten.ir_version, IR_VERSION)
        session = onnxruntime.InferenceSession(rewritten.SerializeToString(), providers=["CPUExecutionProvider"])
        feeds = {v.name: a for v, a in zip(rewritten.graph.input, inputs, strict=True)}
        return run_with_bfloat16(session, None, feeds)[0]

    return run


def _version_converted(version: int) -> Callable[[ModelProto], ModelProto]:
    def convert(model: ModelProto) -> ModelProto:
        from onnx import version_converter

        return version_converter.convert_version(model, version)

    return convert


def _optimized(model: ModelProto) -> ModelProto:
    import onnxoptimizer

    return onnxoptimizer.optimize(model)


def _simplified(model: ModelProto) -> ModelProto:
    import onnxsim

    simplified, _ = onnxsim.simplify(model)
    return simplified


def _named(*fragments: str) -> Callable[[str, str], bool]:
    return lambda case, dtype: any(f in case for f in fragments)


def _dtype(name: str) -> Callable[[str, str], bool]:
    return lambda case, dtype: dtype == name


CONSUMERS: dict[str, Consumer] = {
    "openvino": Consumer("openvino", "openvino", _openvino, (
        Limit(_dtype("float64"), "OpenVINO's CPU plugin computes float64 in float32"),
        Limit(_named("between_casts"), "OpenVINO folds a Cast to float16 followed by a Cast back to float32, so "
                                       "the float16 rounding the graph asks for does not happen"),
        Limit(_named("multilabel_margin_loss_nan_scores", "multilabel_margin_loss_backward_nan_scores"),
              "OpenVINO's CPU plugin's Greater is true for NaN > 0, so a NaN margin counts (measured on a "
              "one-node model)"),
        Limit(_named("ctc_loss_"), "OpenVINO's CPU plugin gives CTC's recursions -inf losses and wrong infinities "
                                   "in the gradient, then corrupts its heap or faults (the process aborted: "
                                   "corrupted size vs. prev_size; a segmentation fault), as Scans and as steps"),
    )),
    "tract": Consumer("tract", "tract", _tract, (
        Limit(_dtype("bfloat16"), "tract takes no bfloat16 inputs"),
        Limit(_named("ctc_loss_concatenated", "ctc_loss_backward_concatenated"),
              "tract evaluates no Range whose length is computed from data (CTC's states for concatenated targets: "
              "their longest length)"),
        Limit(_named("sigmoid_to_bce_backward_float64"), "tract has no float64 Sigmoid (the graph's own node)"),
        Limit(lambda case, dtype: case.endswith("_symbolic") and "empty_sum_back" in case,
              "tract aborts the process (a Rust panic, divide by zero) on a ReduceSum over an axis of extent 0, which "
              "the sum back over a symbolic dim computes where that dim is 0 at run time"),
        LOG_OF_SOFTMAX,
    )),
    "tvm": Consumer("tvm", "tvm", _tvm, (
        Limit(lambda case, dtype: re.search(r"ctc_loss(_backward)?_(concatenated|no_sequence)_|ctc_loss_backward_no_"
                                            r"frame_", case) is not None,
              "TVM compiles no tensor whose shape is computed from data (CTC's states for concatenated targets) "
              "and none of CTC's recursions over no sequence, nor its gradient over no frame"),
        Limit(lambda case, dtype: case.endswith("_symbolic"),
              "TVM's ONNX importer does no arithmetic on a Shape's output (the run-time checks of symbolic dims use "
              "it) and compiles no elementwise op between symbolic dims it cannot prove equal or 1 (even a lone Add "
              "of inputs shaped ('n',) and ('k',)): give the model's inputs static shapes first"),
    )),
    "onnx2torch": Consumer("onnx2torch", "", _torch_converted(_onnx2torch), (
        Limit(_dtype("bfloat16"), "onnx2torch converts no Cast to bfloat16"),
        Limit(lambda case, dtype: case.endswith("_symbolic") and any(
            f in case for f in ("weight_class", "sum_back_3x0_by_4x3x0", "input_batch1_sum", "rank3_batchmean")),
              "onnx2torch's ConstantOfShape takes no shape computed at run time (torch.Size of a tensor), which "
              "the checks of exact shapes and the sum back over symbolic dims use"),
    ), _torch_converter_missing("onnx2torch")),
    "onnx2pytorch": Consumer("onnx2pytorch", "", _torch_converted(_onnx2pytorch), (),
                             _torch_converter_missing("onnx2pytorch")),
    "onnx2tf": Consumer("onnx2tf", "", _onnx2tf, (
        Limit(_dtype("bfloat16"), "onnx2tf converts no bfloat16 (its Cast has no bfloat16 type)"),
        Limit(_named("kl_div_backward_rank3_sum", "kl_div_backward_rank3_mean", "kl_div_backward_rank3_batchmean",
                     "kl_div_backward_rank4_", "kl_div_backward_rank6_", "kl_div_backward_rank8_"),
              "onnx2tf moves the channel axis of rank >= 3 tensors last, and then broadcasts an operand of lower rank "
              "(KL's target, expanded to the input's shape) against the wrong axes"),
        Limit(lambda case, dtype: case.endswith("_symbolic") and any(f in case for f in (
            "target_row_none", "weight_class_mean", "both_none", "pos_weight_mean", "sum_back_3x0_by_4x3x0",
            "input_batch1_sum", "rank3_batchmean", "target_batch1_none")),
              "onnx2tf computes a Shape as int32 and concatenates it with int64 (the run-time checks of symbolic "
              "dims): TensorFlow's ConcatV2 takes one type"),
        Limit(_named("between_casts"), "onnx2tf drops a Cast from float32 to float16 (it keeps TensorFlow Lite "
                                       "free of Flex ops), so the float16 rounding the graph asks for does not happen"),
        Limit(_named("sigmoid_to_bce_backward_float64"),
              "TensorFlow's float64 Sigmoid (the graph's own node) rounds up to 2 ulps away from onnxruntime's, and "
              "the BCE gradient after it (a division by p (1 - p)) magnifies that to 62 ulps"),
    ), _onnx2tf_missing),
    "onnxruntime-node": Consumer("json", "", _ORT_NODE, (
        Limit(_dtype("bfloat16"), "onnxruntime-node takes no bfloat16 tensors"),
    ), _ORT_NODE.missing),
    "onnxruntime-web": Consumer("json", "", _ORT_WEB, (
        Limit(_dtype("bfloat16"), "onnxruntime-web takes no bfloat16 tensors"),
    ), _ORT_WEB.missing),
    "onnxoptimizer": Consumer("onnxoptimizer", "onnxoptimizer", _then_onnxruntime(_optimized), ()),
    "onnxsim": Consumer("onnxsim", "onnxsim", _then_onnxruntime(_simplified), (
        Limit(_named("ctc_loss_no_sequence", "ctc_loss_backward_no_sequence"),
              "onnxsim's graph of CTC over no sequence declares shapes that onnxruntime then refuses (Add: "
              "Incompatible dimensions)"),
    )),
    **{f"opset{v}": Consumer("onnx", "", _then_onnxruntime(_version_converted(v)), ()) for v in (13, 17, 18, 22, 23)},
}


def unavailable(name: str) -> str | None:
    """Why consumer `name` cannot run here (its extra is not installed), or None."""
    if CONSUMERS[name].missing is not None:
        return CONSUMERS[name].missing()
    try:
        __import__(CONSUMERS[name].module)
    except ImportError:
        return f"{CONSUMERS[name].module} is not installed: pip install 'lossops[{CONSUMERS[name].extra}]'"
    return None


def _form(name: str) -> Callable[[ModelProto], ModelProto]:
    from .. import opset
    from ..converters import lower

    return {"portable": lambda m: lower(m)[0], "cann": lambda m: lower(m, for_provider="cann")[0],
            "functions": opset.with_functions}[name]


def runner(name: str, form: str = "portable") -> Callable[[ModelProto, list[np.ndarray]], np.ndarray]:
    """The conformance backend for consumer `name`: the model in `form` ("portable": `lower`'s output, the one for
    consumers, which `lossops conformance` runs; "cann": `lower --for cann`'s; "functions": the lossops nodes with
    their functions), then run."""
    make = _form(form)

    def run(model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
        return CONSUMERS[name].run(make(model), inputs)

    return run
