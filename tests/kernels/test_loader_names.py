"""The names the CUDA loader asks NVRTC for: ``dml::name<args...>`` for a template kernel,
``dml::name`` for a plain one (no GPU needed: the spelling alone)."""

from __future__ import annotations

import numpy as np

from dmlserve.kernels.cupy_backend._loader import CUDA_DIR, name_expression


def test_template_kernel_names() -> None:
    spelled = name_expression("conv_int_prep_x", 16)
    assert spelled == "dml::conv_int_prep_x<16>"
    assert name_expression("k", np.dtype(np.int8), True, "long long") == (
        "dml::k<signed char, true, long long>"
    )


def test_plain_kernel_name_is_declared_so() -> None:
    """A kernel launched without template arguments is looked up without brackets, and its
    source declares it as a plain function of that name."""
    assert name_expression("spin") == "dml::spin"
    source = (CUDA_DIR / "timing.cu").read_text()
    assert "namespace dml {" in source and "__global__ void spin(" in source
    assert "template" not in source.split("__global__ void spin(")[0].rsplit(";", 1)[-1]
