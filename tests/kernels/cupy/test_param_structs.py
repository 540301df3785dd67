"""Every C parameter struct of the CUDA kernels matches the NumPy dtype its launcher sends.

The launchers read their structs from the `.cu` files through `param_struct`; this test
compiles each `.cu` file with nvcc together with a `static_assert` per struct size and per
field offset and size, so a declaration read wrong (a type, an alignment, a count) fails
here, on any machine with the CUDA compiler (no GPU needed).
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


def test_a_declaration_the_reader_does_not_know_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "inner.cuh").write_text("struct Inner {\n    unsigned a;\n    float b;\n};\n")
    (tmp_path / "outer.cu").write_text(
        '#include "inner.cuh"\n'
        "struct Good {\n    long long x[3];  // strides\n    Inner inner[2];\n    int n;\n};\n"
        "struct Bad {\n    unsigned a, b;\n};\n"
    )
    monkeypatch.setattr(_common, "CUDA_DIR", tmp_path)
    monkeypatch.setattr(_common, "STRUCTS", [])
    _common._struct_body.cache_clear()
    try:
        good = _common.param_struct("outer.cu", "dml::Good")
        inner = np.dtype([("a", "<u4"), ("b", "<f4")], align=True)
        assert good == np.dtype(
            [("x", "<i8", (3,)), ("inner", inner, (2,)), ("n", "<i4")], align=True
        )
        with pytest.raises(ValueError, match="unsigned a, b"):
            _common.param_struct("outer.cu", "dml::Bad")
        with pytest.raises(LookupError, match="Missing"):
            _common.param_struct("outer.cu", "dml::Missing")
    finally:
        _common._struct_body.cache_clear()
