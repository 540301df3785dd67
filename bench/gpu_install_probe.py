"""Checks for `bench/gpu-install-check.sh`: where CuPy's NVRTC and CUDA headers come from, that
every CUDA source compiles and loads through `cupy.RawModule`, and that a running server
answers each operator as the NumPy reference does.

    python bench/gpu_install_probe.py provenance --venv DIR [--nvrtc-anywhere]
    python bench/gpu_install_probe.py compile-all
    python bench/gpu_install_probe.py requests URL [--backend cupy]

Each prints one line per check and exits non-zero if any check failed.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import site
import sys
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import numpy as np

from dmlserve import kernels
from dmlserve.kernels.dtypes import from_numpy

TOOLKIT_PREFIXES = ("/usr/local/cuda", "/opt/nvidia")
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def under(path: str, roots: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real.startswith(os.path.realpath(r) + os.sep) for r in roots)


def site_dirs() -> list[str]:
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return dirs


def loaded_libraries(*names: str) -> list[str]:
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/" in line}
    return sorted(p for p in paths if any(n in os.path.basename(p) for n in names))


def provenance(args: argparse.Namespace) -> None:
    import cupy
    from cuda.pathfinder import load_nvidia_dynamic_lib, locate_nvidia_header_directory
    from cupy._core import core
    from cupy_backends.cuda.libs import nvrtc

    venv = os.path.realpath(args.venv)
    print(f"cupy {cupy.__version__} from {os.path.dirname(cupy.__file__)}")
    headers = locate_nvidia_header_directory("cudart")
    lib = load_nvidia_dynamic_lib("nvrtc")
    print(f"cuda headers {headers}")
    print(f"nvrtc {'.'.join(map(str, nvrtc.getVersion()))} {lib.abs_path} ({lib.found_via})")

    check(headers is not None and headers.found_via == "site-packages", "headers from a wheel")
    header_dir = headers.abs_path if headers else ""
    check(bool(header_dir) and under(header_dir, [venv]), f"headers inside the venv {venv}")
    options = core.assemble_cupy_compiler_options(())
    check(f"-I{header_dir}" in options, "CuPy passes that directory to NVRTC (-I)")
    check(lib.found_via == "site-packages", "NVRTC from a wheel")
    roots, where = (site_dirs(), "a site-packages") if args.nvrtc_anywhere else ([venv], "the venv")
    check(under(lib.abs_path, roots), f"NVRTC under {where}")

    # A real RawModule round trip through <cuda_fp16.h>: compiled by that NVRTC with those
    # headers, loaded by the driver, run on the device.
    source = r"""
    #include <cuda_fp16.h>
    extern "C" __global__ void halve(const float* x, __half* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = __float2half_rn(x[i] * 0.5f);
    }
    """
    want = (np.arange(1024, dtype=np.float32) * 0.5).astype(np.float16)
    try:
        x = cupy.arange(1024, dtype=cupy.float32)
        y = cupy.empty(1024, dtype=cupy.float16)
        kernel = cupy.RawModule(code=source, options=("-std=c++17",)).get_function("halve")
        kernel((4,), (256,), (x, y, np.int32(1024)))
        ok, note = bool((y.get() == want).all()), ""
    except Exception as exc:  # noqa: BLE001 - report it and still list the loaded libraries
        ok, note = False, f": {type(exc).__name__}: {exc}"
    check(ok, f"a <cuda_fp16.h> kernel compiles, loads and computes on the device{note}")

    libs = loaded_libraries("libnvrtc", "libcudart", "libcuda.so")
    for path in libs:
        print(f"loaded {path}")
    check(not any(p.startswith(TOOLKIT_PREFIXES) for p in libs), "no library from a toolkit dir")


def compile_all(_: argparse.Namespace) -> None:
    import cupy

    from dmlserve.kernels.cupy_backend import _loader

    # Each .cu ends with an explicit-instantiation block: every template the launchers use,
    # compiled by NVRTC for this device and loaded by the driver (CUPY_CACHE_DIR is fresh).
    for path in sorted(_loader.CUDA_DIR.glob("*.cu")):
        start = time.perf_counter()
        options = _loader.BASE_OPTIONS + ("-DDMLSERVE_EXPLICIT_INSTANTIATION",)
        try:
            cupy.RawModule(code=_loader._source(path.name), options=options).compile()
            ok, note = True, f"{time.perf_counter() - start:.1f} s"
        except Exception as exc:  # noqa: BLE001 - report every source, not just the first
            ok, note = False, str(exc)[:2000]
        check(ok, f"{path.name} compiles and loads ({note})")


def tensor(arr: np.ndarray) -> dict[str, Any]:
    raw = base64.b64encode(np.ascontiguousarray(arr).tobytes()).decode("ascii")
    return {"DataType": from_numpy(arr.dtype).value, "Sizes": list(arr.shape), "b64": raw}


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        result: dict[str, Any] = json.load(response)
    return result


def cases(rng: np.random.Generator) -> list[tuple[str, dict[str, Any], dict[str, np.ndarray]]]:
    """One request per operator, large enough to launch real grids, fp16 where it applies."""
    image16 = rng.standard_normal((2, 3, 33, 29)).astype(np.float16)
    cols = rng.standard_normal((2, 3 * 6, 8 * 9)).astype(np.float32)
    ints = rng.integers(-1000, 1000, (2, 4, 17, 23), dtype=np.int32)
    x = rng.integers(0, 256, (2, 8, 14, 14), dtype=np.uint8)
    w = rng.integers(-128, 128, (16, 8, 3, 3), dtype=np.int8)
    return [
        (
            "UNFOLD",
            {"type": "UNFOLD", "WindowSizes": [3, 3], "Strides": [2, 1]},
            {"InputTensor": image16},
        ),
        (
            "FOLD",
            {
                "type": "FOLD",
                "WindowSizes": [2, 3],
                "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3, 9, 11]},
            },
            {"InputTensor": cols},
        ),
        (
            "PADDING",
            {
                "type": "PADDING",
                "PaddingMode": "REFLECTION",
                "StartPadding": [0, 0, 2, 3],
                "EndPadding": [0, 1, 1, 2],
            },
            {"InputTensor": ints},
        ),
        (
            "AVERAGE_POOLING",
            {
                "type": "AVERAGE_POOLING",
                "WindowSize": [3, 3],
                "Strides": [2, 2],
                "StartPadding": [1, 1],
                "EndPadding": [1, 1],
            },
            {"InputTensor": image16},
        ),
        (
            "CONVOLUTION_INTEGER",
            {"type": "CONVOLUTION_INTEGER", "StartPadding": [1, 1], "EndPadding": [1, 1]},
            {
                "InputTensor": x,
                "FilterTensor": w,
                "InputZeroPointTensor": np.full((1, 1, 1, 1), 128, np.uint8),
            },
        ),
    ]


def requests(args: argparse.Namespace) -> None:
    compare: dict[str, Callable[[np.ndarray, np.ndarray], bool]] = {
        "exact": lambda got, want: got.tobytes() == want.tobytes(),
        "close": lambda got, want: bool(np.allclose(got, want, rtol=2e-3, atol=2e-3)),
    }
    for name, operator, inputs in cases(np.random.default_rng(12)):
        want = np.asarray(kernels.execute(operator, inputs, backend="numpy")["OutputTensor"])
        body = {
            "operator": operator,
            "inputs": {k: tensor(v) for k, v in inputs.items()},
            "output_encoding": "b64",
        }
        try:
            reply = post(args.url.rstrip("/") + "/v1/execute", body)
        except Exception as exc:  # noqa: BLE001 - one failed operator must not hide the others
            check(False, f"{name}: {exc}")
            continue
        out = reply["outputs"]["OutputTensor"]
        got = np.frombuffer(base64.b64decode(out["b64"]), want.dtype).reshape(out["Sizes"])
        how = "close" if name in ("FOLD", "AVERAGE_POOLING") else "exact"
        check(
            reply.get("backend") == args.backend and compare[how](got, want),
            f"{name} {list(got.shape)} {got.dtype} on {reply.get('backend')}: "
            f"{how} to the NumPy reference",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("provenance")
    p.add_argument("--venv", required=True)
    p.add_argument(
        "--nvrtc-anywhere",
        action="store_true",
        help="accept NVRTC from any site-packages wheel, not only the venv's",
    )
    p.set_defaults(run=provenance)
    sub.add_parser("compile-all").set_defaults(run=compile_all)
    p = sub.add_parser("requests")
    p.add_argument("url")
    p.add_argument("--backend", default="cupy")
    p.set_defaults(run=requests)
    args = parser.parse_args()
    args.run(args)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
