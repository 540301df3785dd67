"""UNFOLD's descriptor rules: the dilated window must fit; up to six spatial dimensions."""

from __future__ import annotations

from dmlserve.kernels import resolve
from tests.kernels.descriptor_helpers import desc, errors_of, locs


def test_unfold_window_must_fit_padded_input() -> None:
    errs = errors_of(
        {"type": "UNFOLD", "WindowSizes": [3, 4], "Dilations": [1, 2]},
        {"InputTensor": desc("FLOAT32", 1, 1, 5, 6)},
    )
    assert locs(errs) == [("WindowSizes", 1)]
    assert "Dilations[1]" in errs[0]["msg"] and "7" in errs[0]["msg"]


def test_six_spatial_dimensions_unfold() -> None:
    op = resolve(
        {"type": "UNFOLD", "WindowSizes": [2] * 6}, {"InputTensor": desc("INT16", 1, 1, *([3] * 6))}
    )
    assert op.output_tensor.sizes == (1, 64, 64)
