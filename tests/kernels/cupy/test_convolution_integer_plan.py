"""CONVOLUTION_INTEGER's GPU launch decisions that need no GPU to check."""

from __future__ import annotations

from dmlserve.kernels.cupy_backend._convolution_integer_gemm import padded_input_fits

MIB = 1 << 20


def test_the_padded_input_copy_is_bounded() -> None:
    image = 32 * 128 * 28 * 28
    assert padded_input_fits(image, 32 * 128 * 30 * 30)  # 3x3, pad 1: the frame is small
    assert padded_input_fits(16, MIB)  # a tiny image: up to the slack
    assert not padded_input_fits(16 * 4, 60001 * 60001 * 16)  # a huge start pad
    assert not padded_input_fits(image, 3 * image)  # more than twice the image
