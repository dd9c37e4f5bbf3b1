"""Golden data in the ONNX node-test directory format, shipped with the package.

Each case is a directory `test_<name>/` with `model.onnx`, `test_data_set_0/input_<i>.pb`,
`test_data_set_0/output_0.pb` (PyTorch float64 rounded to the output's type) and `data.json` (the dtype
whose tolerance applies, rtol/atol for runners that take those, terms summed, the oracle's own error).

    python -m lossops.conformance.golden generate   # rewrite conformance/node-tests (needs torch)
    python -m lossops.conformance.golden check      # regenerate in memory, report drift; exit 1 on drift
    python -m lossops.conformance.golden check --inputs   # the models and inputs only (no torch needed)

The stored inputs are the data: the generators draw them with numpy, whose float64 exp and log take other code
paths on other CPUs (a log-probability can come out a last bit apart), so a case regenerated on another machine
keeps its stored inputs wherever they are within DRIFT_ULPS_64 of the new ones, and its expected output is
computed from them. Generating on any machine therefore rewrites only the cases whose definition changed, and
the check holds inputs and outputs to one tolerance.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, helper, numpy_helper

from .cases import Case, all_cases, widened
from .tolerance import bounds

# Not a Python identifier on purpose: setuptools would take each case folder for a namespace package and warn.
DATA_DIR = Path(__file__).resolve().parent / "node-tests"


@dataclass
class Golden:
    name: str
    model: ModelProto
    inputs: list[np.ndarray]
    expected: np.ndarray
    dtype: str
    summed: int
    slack: float  # absolute: the oracle's own error, plus the rounding of terms that cancel
    rtol: float
    atol: float

    @property
    def output_dtype(self) -> np.dtype:
        return np.dtype(helper.tensor_dtype_to_np_dtype(self.model.graph.output[0].type.tensor_type.elem_type))


def make(case: Case) -> Golden:
    """Compute the expected output of `case` with the oracle (needs torch)."""
    reference = np.asarray(case.reference(widened(case.inputs)), np.float64)
    output_type = case.model.graph.output[0].type.tensor_type.elem_type
    with np.errstate(over="ignore"):
        expected = reference.astype(helper.tensor_dtype_to_np_dtype(output_type))
    inputs64 = widened(case.inputs)
    rtol, atol = bounds(case.dtype, case.summed, expected)
    # the oracle's own error, and (where the formula cancels) the relative bound applied to the terms' size
    # (over finite values: an infinite term belongs to an expected value that is itself infinite or NaN)
    def largest(values) -> float:
        values = np.asarray(values, np.float64)
        return float(np.max(values[np.isfinite(values)], initial=0.0))

    slack = largest(case.oracle_error(inputs64)) + rtol * largest(case.magnitude(inputs64))
    return Golden(case.name, case.model, case.inputs, expected, case.dtype, case.summed, slack, rtol, atol + slack)


def write(golden: Golden, root: Path) -> None:
    directory = root / golden.name
    data = directory / "test_data_set_0"
    data.mkdir(parents=True, exist_ok=True)
    onnx.save(golden.model, directory / "model.onnx")
    for k, (value, array) in enumerate(zip(golden.model.graph.input, golden.inputs, strict=True)):
        (data / f"input_{k}.pb").write_bytes(numpy_helper.from_array(array, value.name).SerializeToString())
    output = numpy_helper.from_array(golden.expected, golden.model.graph.output[0].name)
    (data / "output_0.pb").write_bytes(output.SerializeToString())
    meta = {"dtype": golden.dtype, "summed": golden.summed, "slack": golden.slack,
            "rtol": golden.rtol, "atol": golden.atol,
            "expected_from": "PyTorch 2.13 float64 on the rounded inputs, rounded to the output type"}
    (directory / "data.json").write_text(json.dumps(meta, indent=1) + "\n")


def _tensor(path: Path) -> np.ndarray:
    return numpy_helper.to_array(onnx.load_tensor(str(path)))


def read(directory: Path) -> Golden:
    meta = json.loads((directory / "data.json").read_text())
    data = directory / "test_data_set_0"
    model = onnx.load(directory / "model.onnx")
    inputs = [_tensor(data / f"input_{k}.pb") for k in range(len(model.graph.input))]
    return Golden(directory.name, model, inputs, _tensor(data / "output_0.pb"), meta["dtype"], meta["summed"],
                  meta["slack"], meta["rtol"], meta["atol"])


def load_all(root: Path = DATA_DIR) -> list[Golden]:
    return [read(d) for d in sorted(root.iterdir()) if (d / "model.onnx").exists()]


def export(target: Path, root: Path = DATA_DIR) -> int:
    """Write the suite to `target` in ONNX's convention for function operators (onnx's node tests do the same
    for SoftmaxCrossEntropyLoss): `test_<case>` is the graph with its lossops nodes and their standard-op
    functions attached (a backend that implements the lossops operators runs the nodes, onnxruntime expands
    the functions), `test_<case>_expanded` the same graph lowered to standard ops (`lossops lower`), which
    needs nothing of lossops. Both have the same inputs and expected output. Returns the number of cases."""
    from ..converters import lower
    from ..opset.model import with_functions

    target.mkdir(parents=True, exist_ok=True)
    goldens = load_all(root)
    for g in goldens:
        write(dataclasses.replace(g, model=with_functions(g.model)), target)
        write(dataclasses.replace(g, name=f"{g.name}_expanded", model=lower(g.model)[0]), target)
    return len(goldens)


def generate(root: Path = DATA_DIR) -> int:
    """Write every case's golden: a stored case whose model is the same, whose inputs are within DRIFT_ULPS_64 of
    the new ones and whose expected output from them is too, is left as it is (module docstring); stored cases no
    longer generated are removed. Returns the number of cases."""
    stored = {g.name: g for g in load_all(root)} if root.exists() else {}
    cases = all_cases()
    for case in cases:
        kept = _kept_inputs(case, stored.get(case.name))
        fresh = make(kept)
        if kept is case or not _same(stored[case.name], fresh):
            if (root / case.name).exists():
                shutil.rmtree(root / case.name)
            write(fresh, root)
    for name in set(stored) - {c.name for c in cases}:
        shutil.rmtree(root / name)
    return len(cases)


DRIFT_ULPS_64 = 4


def _same(stored: Golden, fresh: Golden) -> bool:
    """The expected outputs `_close`, and the same tolerance (its absolute parts up to float64 drift)."""
    return (_close(stored.expected, fresh.expected) and (stored.dtype, stored.summed, stored.rtol) ==
            (fresh.dtype, fresh.summed, fresh.rtol)
            and all(np.isclose(a, b, rtol=1e-9, atol=0) for a, b in ((stored.slack, fresh.slack),
                                                                    (stored.atol, fresh.atol))))


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    """Same type and shape, and equal up to one ulp of their type or DRIFT_ULPS_64 float64 ulps (NaN = NaN)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    x, y = a.astype(np.float64), b.astype(np.float64)
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    if same.all():
        return True
    spacing = np.abs(np.spacing(b).astype(np.float64)) if b.dtype.kind == "f" else np.zeros_like(y)
    allowed = np.maximum(spacing, DRIFT_ULPS_64 * np.abs(np.spacing(y)))
    return bool(np.isfinite(x[~same]).all() and np.all(np.abs(x - y)[~same] <= allowed[~same]))


def _kept_inputs(case: Case, stored: Golden | None) -> Case:
    """`case` with the stored golden's inputs where the model is the same and they are close to the case's own."""
    if (stored is None or stored.model.SerializeToString() != case.model.SerializeToString()
            or len(stored.inputs) != len(case.inputs)
            or not all(_close(a, b) for a, b in zip(stored.inputs, case.inputs, strict=True))):
        return case
    return dataclasses.replace(case, inputs=stored.inputs)


def drift(root: Path = DATA_DIR, outputs: bool = True) -> list[str]:
    """Differences between the stored goldens and what the generator makes now (empty: none); without `outputs`,
    of the models and inputs only (no oracle: PyTorch is not needed).

    Models must be identical. Inputs, and the expected outputs computed from the stored inputs, may differ by one
    ulp of their type or by DRIFT_ULPS_64 float64 ulps, whichever is larger: numpy's and PyTorch's float64 exp
    and log take other code paths on other CPUs (measured: a product with exp(t) came out 2 float64 ulps apart
    between two x86-64 machines), and rounding to a narrower type may then fall the other way."""
    problems = []
    stored = {g.name: g for g in load_all(root)} if root.exists() else {}
    fresh = {c.name: c for c in all_cases()}
    problems += [f"{n}: stored but no longer generated" for n in sorted(set(stored) - set(fresh))]
    problems += [f"{n}: generated but not stored" for n in sorted(set(fresh) - set(stored))]
    for name in sorted(set(stored) & set(fresh)):
        old = stored[name]
        if old.model.SerializeToString() != fresh[name].model.SerializeToString():
            problems.append(f"{name}: model differs")
            continue
        case = _kept_inputs(fresh[name], old)
        if case is fresh[name]:  # the stored inputs are not kept: not close to the generator's
            problems.append(f"{name}: inputs differ by more than {DRIFT_ULPS_64} float64 ulps")
        elif not outputs:
            continue
        elif not _close(old.expected, (remade := make(case)).expected):
            problems.append(f"{name}: expected output differs by more than one ulp")
        elif not _same(old, remade):
            problems.append(f"{name}: tolerance differs")
    return problems


def main(argv: list[str]) -> int:
    if argv[:1] == ["generate"]:
        print(f"wrote {generate()} cases to {DATA_DIR}")
        return 0
    if argv[:1] == ["check"] and argv[1:] in ([], ["--inputs"]):
        problems = drift(outputs=argv[1:] != ["--inputs"])
        for p in problems:
            print(p)
        what = "the goldens' models and inputs" if argv[1:] else "the goldens"
        print(f"{what} match the generator" if not problems else f"{len(problems)} golden(s) drifted")
        return 1 if problems else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
