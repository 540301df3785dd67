"""Warm-up: one case per operator, and zeros for a registered operator's inputs."""

from __future__ import annotations

from dmlserve import kernels
from dmlserve.service.binding import bind
from dmlserve.service.device import Device
from dmlserve.service.registry import resolve_for_registration
from dmlserve.service.warmup import example_inputs, warm_up, warmup_cases


def test_every_operator_is_warmed_up() -> None:
    cases = warmup_cases()
    assert sorted(str(w.operator.type) for w in cases) == sorted(kernels.OPERATOR_TYPES)
    warm_up(Device("numpy"))  # and each one runs


def test_example_inputs_take_batch_one_for_a_variable_batch() -> None:
    op = resolve_for_registration(
        {
            "type": "CONVOLUTION_INTEGER",
            "InputTensor": {"DataType": "UINT8", "Sizes": [-1, 2, 4, 4]},
            "FilterTensor": {"DataType": "INT8", "Sizes": [3, 2, 2, 2]},
        }
    )
    inputs = example_inputs(op)
    assert {n: t.sizes for n, t in inputs.items()} == {
        "InputTensor": (1, 2, 4, 4),
        "FilterTensor": (3, 2, 2, 2),
    }
    assert all(not t.buffer.any() for t in inputs.values())
    bound = bind(op, inputs)  # the registered operator takes them as they are
    assert bound.output_tensor is not None and bound.output_tensor.sizes == (1, 3, 3, 3)
