"""The operator table: every declaration complete and consistent, driven by `OPERATORS` and
checked against `tests.operator_info` (oracles that share no code with the operators)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from dmlserve import kernels
from dmlserve.kernels import OPERATORS, BackendUnavailableError, TensorDesc, parse_operator
from dmlserve.kernels.operators import spec_of
from tests.operator_info import OPERATOR_INFO, Sample, all_samples, assert_matches, sample_id

SAMPLES = all_samples()
SPECS = list(OPERATORS.values())


def _descs(inputs: dict[str, np.ndarray]) -> dict[str, TensorDesc]:
    return {name: TensorDesc.of_array(a) for name, a in inputs.items()}


def test_every_operator_has_test_samples() -> None:
    assert set(OPERATORS) == set(OPERATOR_INFO)
    covered = {op_type for op_type, _ in SAMPLES}
    assert covered == set(OPERATORS)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
def test_declaration_names_agree(spec: Any) -> None:
    assert OPERATORS[spec.type] is spec
    assert spec.name == spec.type.lower()  # FOLD -> fold: the backends' and the SDK's name
    parsed = parse_operator({"type": f"DML_OPERATOR_{spec.type}", **_required(spec)})
    assert type(parsed) is spec.model and parsed.type == spec.type


def _required(spec: Any) -> dict[str, Any]:
    """The smallest descriptor body the model accepts (its required per-axis arrays)."""
    required = [n for n, f in spec.model.model_fields.items() if f.is_required()]
    return {kernels.descriptors.wire_name(n): [1] for n in required}


@pytest.mark.parametrize(("op_type", "sample"), SAMPLES, ids=sample_id)
def test_samples_parse_to_their_model(op_type: str, sample: Sample) -> None:
    op = parse_operator(sample.descriptor)
    assert type(op) is OPERATORS[op_type].model
    assert spec_of(op) is OPERATORS[op_type]


@pytest.mark.parametrize(("op_type", "sample"), SAMPLES, ids=sample_id)
def test_execute_runs_the_declared_reference(op_type: str, sample: Sample) -> None:
    out = kernels.execute(sample.descriptor, sample.inputs, backend="numpy")["OutputTensor"]
    assert_matches(out, sample)


@pytest.mark.parametrize(("op_type", "sample"), SAMPLES, ids=sample_id)
def test_sdk_helper_describes_the_same_operation(op_type: str, sample: Sample) -> None:
    spec = OPERATORS[op_type]
    op, inputs = spec.helper(*sample.args, **sample.kwargs)
    assert type(op) is spec.model
    assert set(inputs) <= {*spec.model.input_names, *spec.model.optional_input_names}
    assert_matches(kernels.execute(op, inputs, backend="numpy")["OutputTensor"], sample)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
def test_warm_up_example_resolves_and_runs(spec: Any) -> None:
    example = spec.warmup
    inputs = example.zeros()
    resolved = kernels.resolve(example.descriptor, _descs(inputs))
    assert type(resolved) is spec.model
    out = spec.run(resolved, inputs)
    assert out.shape == resolved.output_tensor.sizes
    assert not out.any()


# Cost estimates, counted by hand: input elements one output element reads.
TAPS = {
    "FOLD": ({"type": "FOLD", "WindowSizes": [2, 3], "OutputTensor": {
        "DataType": "INT8", "Sizes": [1, 1, 4, 4]}}, {"InputTensor": (1, 6, 6)}, 6),
    "UNFOLD": ({"type": "UNFOLD", "WindowSizes": [4]}, {"InputTensor": (1, 2, 9)}, 4),
    "PADDING": ({"type": "PADDING", "StartPadding": [3], "EndPadding": [2]},
                {"InputTensor": (5,)}, 1),
    "AVERAGE_POOLING": ({"type": "AVERAGE_POOLING", "WindowSize": [2, 2, 2]},
                        {"InputTensor": (1, 1, 3, 3, 3)}, 8),
    "CONVOLUTION_INTEGER": ({"type": "CONVOLUTION_INTEGER", "GroupCount": 2},
                            {"InputTensor": (1, 4, 5, 5), "FilterTensor": (6, 2, 3, 3)}, 18),
}  # fmt: skip


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
def test_cost_estimate_counts_window_taps(spec: Any) -> None:
    descriptor, shapes, taps = TAPS[spec.type]
    dtype = "FLOAT32" if spec.type == "AVERAGE_POOLING" else "INT8"
    descs = {n: TensorDesc(data_type=dtype, sizes=s) for n, s in shapes.items()}
    assert spec.taps(kernels.resolve(descriptor, descs)) == taps


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
def test_implementations_take_the_reference_parameters(spec: Any) -> None:
    # The NumPy backend runs the fast CPU path; the reference is only the oracle.
    assert spec.implementation("numpy") is not spec.reference
    reference = list(inspect.signature(spec.reference).parameters.values())
    assert set(spec.launchers) >= {"numpy", "cupy"}
    for backend in spec.launchers:
        launcher = spec.implementation(backend)
        params = list(inspect.signature(launcher).parameters.values())
        assert [p.name for p in params[: len(reference)]] == [p.name for p in reference]
        assert all(p.default is not p.empty for p in params[len(reference) :]), backend


def test_an_unknown_backend_is_refused() -> None:
    with pytest.raises(BackendUnavailableError):
        OPERATORS["FOLD"].implementation("tpu")


def test_launchers_are_imported_on_first_use() -> None:
    code = (
        "import dmlserve.kernels, sys; "
        "assert 'dmlserve.kernels.cupy_backend' not in sys.modules, 'imported eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
