#!/usr/bin/env bash
# Everything that needs a CUDA device, in one go, from the repository root of a GPU host:
# the GPU tests, the HTTP suites on the CuPy backend, compute-sanitizer (memcheck, racecheck),
# the kernel benchmarks against PyTorch and the service benchmark with the CuPy backend.
#   OUT=some/dir bench/gpu-check.sh [STAGE...]   (default: tests bench)
#   stages: tests = kernel-tests service-tests; bench = kernel-bench service-bench.
#   Logs, JSON and markdown land in $OUT; a summary table is printed last.
set -uo pipefail
out=${OUT:-gpu-check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/dmlserve-cupy-cache}
failed=0
summary="$out/summary.txt"
: >"$summary"

step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS rc
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$?
  printf '%-22s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" \
    "$(grep -E 'passed|failed|ERROR SUMMARY|error' "$out/$name.log" | tail -1)" | tee -a "$summary"
  [ "$rc" -eq 0 ] || failed=1
}

{
  date -u '+%Y-%m-%d %H:%M UTC'
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
  python3 -c 'import cupy, numpy, sys; print("python", sys.version.split()[0], "cupy", cupy.__version__, "numpy", numpy.__version__)'
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' 2>/dev/null
} | tee "$out/device.txt"

stages=" ${*:-tests bench} "
pytest=(python3 -m pytest -q -p no:cacheprovider -o addopts=-ra)
has() { [[ $stages == *" $1 "* ]]; }
if has tests || has kernel-tests; then
step kernel-tests 270 "${pytest[@]}" -m gpu tests/kernels
memcheck_k="seed_example_on_gpu and FLOAT32 or padding_strided and float32 or fold_strided and float32 or unfold_strided and float32 or (average_pooling and contiguous) or signedness_and_zero_points and auto or depthwise_zero_points and channel"
racecheck_k="(average_pooling and float32 and contiguous and not direct) or (signedness_and_zero_points and channel and auto) or (depthwise_geometry and 1-1)"
step memcheck 200 env DMLSERVE_TEST_CUPY_POOL=off compute-sanitizer --tool memcheck --error-exitcode 9 "${pytest[@]}" -m gpu tests/kernels -k "$memcheck_k"
step racecheck 100 env DMLSERVE_TEST_CUPY_POOL=off compute-sanitizer --tool racecheck --error-exitcode 9 "${pytest[@]}" -m gpu tests/kernels -k "$racecheck_k"
fi
if has tests || has service-tests; then
step service-gpu-tests 120 "${pytest[@]}" -m gpu tests/service tests/clients
step http-suites-cupy 200 env DMLSERVE_TEST_BACKEND=cupy "${pytest[@]}" tests/service tests/clients -k "not chromium"
fi
if has bench || has kernel-bench; then
step bench-kernels 200 python3 bench/bench_kernels.py --json "$out/bench-kernels.json"
step bench-conv 150 python3 bench/bench_convolution_integer.py --json "$out/bench-conv.json"
fi
if has bench || has service-bench; then
step bench-service 200 python3 bench/service_load.py --backend cupy --wrk never --output "$out/service-gpu.md"
fi

echo
cat "$summary"
exit "$failed"
