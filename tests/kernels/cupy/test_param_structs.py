"""Every C parameter struct of the CUDA kernels matches the NumPy dtype its launcher sends.

The launchers declare their structs through `param_struct`; this test compiles each `.cu`
file with nvcc together with a `static_assert` per struct size and per field offset and size,
so a field added on one side only fails here, on any machine with the CUDA compiler (no GPU
needed).
"""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from dmlserve.kernels.cupy_backend import _common
from dmlserve.kernels.cupy_backend._loader import CUDA_DIR

from ._support import launcher

LAUNCHERS = ["padding", "unfold", "fold", "average_pooling"]


def _asserts(name: str, dtype: np.dtype) -> list[str]:
    lines = [f'static_assert(sizeof({name}) == {dtype.itemsize}, "{name}: size");']
    for field, (ftype, offset, *_) in dtype.fields.items():  # type: ignore[union-attr]
        lines.append(
            f"static_assert(offsetof({name}, {field}) == {offset}, "
            f'"{name}.{field}: offset {offset} expected");'
        )
        lines.append(
            f"static_assert(sizeof((({name}*)nullptr)->{field}) == {ftype.itemsize}, "
            f'"{name}.{field}: size {ftype.itemsize} expected");'
        )
    return lines


def test_every_launcher_declares_its_struct() -> None:
    for name in LAUNCHERS:
        launcher(name)
    sources = {s.source for s in _common.STRUCTS}
    assert {"padding.cu", "unfold.cu", "fold.cu", "average_pooling.cu"} <= sources


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs the CUDA compiler (nvcc)")
def test_c_structs_match_numpy_dtypes(tmp_path: Path) -> None:
    for name in LAUNCHERS:
        launcher(name)
    by_source: dict[str, list[str]] = defaultdict(list)
    for struct in _common.STRUCTS:
        by_source[struct.source] += _asserts(struct.name, struct.dtype)
    procs = []
    for source, lines in by_source.items():
        check = tmp_path / f"check_{Path(source).stem}.cu"
        check.write_text(f'#include <cstddef>\n#include "{source}"\n' + "\n".join(lines) + "\n")
        cmd = ["nvcc", "-std=c++17", f"-I{CUDA_DIR}", "-arch=sm_90", "-c", str(check)]
        cmd += ["-o", str(check.with_suffix(".o"))]
        procs.append((source, subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)))
    failures = []
    for source, proc in procs:
        _, err = proc.communicate()
        if proc.returncode:
            failures.append(f"{source}:\n{err}")
    assert not failures, "\n".join(failures)
