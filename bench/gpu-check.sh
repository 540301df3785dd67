#!/usr/bin/env bash
# Everything that needs a CUDA device, in one go, from the repository root of a GPU host:
# the GPU tests, compute-sanitizer (memcheck, racecheck), the HTTP suites on the CuPy backend,
# the kernel benchmarks against PyTorch, Nsight Compute counters of the memory-bound kernels, the
# service benchmark with the CuPy backend, and the transports (CUDA shared memory, gRPC).
#   OUT=some/dir bench/gpu-check.sh [STAGE...]   (default: tests bench)
#   stages: tests = kernel-tests memcheck racecheck service-tests transport-tests;
#           bench = memory-bench conv-bench service-bench transport-bench perf-analyzer
#           (kernel-bench = the first two);
#           ncu and soak (not in the defaults; soak: bench/soak.py on the CuPy backend).
#   perf-analyzer runs Triton's perf_analyzer against the service on the CuPy backend; with
#   no network, put its wheel in .whl/ first (see tests/tools/perf-analyzer).
#   Independent stages may run at once in separate invocations with separate OUT folders
#   (the sanitizers beside kernel-tests, say); the benchmarks and ncu want the GPU alone.
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
  printf '%-16s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" \
    "$(grep -E 'passed|failed|ERROR SUMMARY|RACECHECK SUMMARY|error' "$out/$name.log" | tail -1)" |
    tee -a "$summary"
  [ "$rc" -eq 0 ] || failed=1
}

{
  date -u '+%Y-%m-%d %H:%M UTC'
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
  python3 -c 'import cupy, numpy, sys; print("python", sys.version.split()[0], "cupy", cupy.__version__, "numpy", numpy.__version__)'
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' 2>/dev/null
} | tee "$out/device.txt"

stages=" ${*:-tests bench} "
stages=${stages/ tests / kernel-tests memcheck racecheck service-tests transport-tests }
stages=${stages/ bench / memory-bench conv-bench service-bench transport-bench perf-analyzer }
stages=${stages/ kernel-bench / memory-bench conv-bench }
pytest=(python3 -m pytest -q -p no:cacheprovider -o addopts=-ra)
# xdist spreads the plain test runs (and their first-use kernel compiles) over the host's
# cores; not under compute-sanitizer, where its workers did not come up within minutes.
parallel=("${pytest[@]}")
python3 -c 'import xdist' 2>/dev/null && parallel+=(-n 8)
has() { [[ $stages == *" $1 "* ]]; }
if has kernel-tests; then
  step kernel-tests "${KERNEL_TESTS_LIMIT:-300}" "${parallel[@]}" -m gpu tests/kernels
fi
# Sanitizers: the CuPy pool off so every array is its own allocation (an overrun inside a
# pooled block would go unseen). memcheck: every memory-bound kernel path on every layout;
# racecheck: the kernels with shared memory.
if has memcheck; then
  memcheck_k="test_launchers or (test_padding and test_strided_inputs and (float16 or int8))"
  memcheck_k+=" or (test_padding and test_strided_inputs and float32 and (chunks or tiles))"
  memcheck_k+=" or (test_unfold and test_strided_inputs and float32)"
  memcheck_k+=" or (test_fold and test_strided_inputs and float32) or (test_unrolled_2d_windows and float32)"
  memcheck_k+=" or ((test_unfold or test_fold) and test_squares) or (test_window2d_bands and float32)"
  memcheck_k+=" or (test_average_pooling and (float32 and (bands or strip or rows) or packed))"
  memcheck_k+=" or (signedness_and_zero_points and auto) or (depthwise_zero_points and channel)"
  memcheck_k+=" or (signedness_and_zero_points and mma_sync and channel)"
  memcheck_k+=" or (test_every_tile and 4-160) or (channels_last_input and 48-3-3)"
  memcheck_k+=" or test_direct_launch"
  memcheck_k+=" or (test_convolution_integer_depthwise and (test_views or test_groups_views or test_one_dimensional or 61-k or channel-uint8-int8 or dp4a_rows))"
  memcheck_k+=" or (test_convolution_integer_pointwise and not int32_wraps)"
  memcheck_k+=" or (test_convolution_integer_grouped and not outside)"
  memcheck_k+=" or (test_convolution_integer_shift and not sums_past) or test_both_preps"
  step memcheck "${MEMCHECK_LIMIT:-300}" env DMLSERVE_TEST_CUPY_POOL=off compute-sanitizer --tool memcheck \
    --error-exitcode 9 "${pytest[@]}" -m gpu tests/kernels/cupy -k "$memcheck_k"
fi
if has racecheck; then
  racecheck_k="(test_padding and test_dtypes_and_modes and (float16 or int8) and tiles)"
  racecheck_k+=" or (test_padding and test_dtypes_and_modes and float32 and tiles)"
  racecheck_k+=" or (test_average_pooling and float32 and contiguous and (tiled or strip))"
  racecheck_k+=" or ((test_unfold or test_fold) and test_dtypes and (patches or slabs) and (float32 or int8))"
  racecheck_k+=" or (test_unfold and (test_window2d_bands or (test_dtypes and window2d)) and (float32 or uint8))"
  racecheck_k+=" or (signedness_and_zero_points and channel and auto) or (depthwise_geometry and 1-1)"
  racecheck_k+=" or (test_every_tile and 4-160) or (channels_last_input and 64-1-3)"
  racecheck_k+=" or (test_convolution_integer_depthwise and (wide_rows or offset3 or channel-uint8-int8 or dp4a_rows or (geometry and 8-k0)))"
  racecheck_k+=" or (test_convolution_integer_pointwise and (signedness or shapes or tiles))"
  racecheck_k+=" or (test_convolution_integer_grouped and (signedness or group_shapes or word))"
  racecheck_k+=" or (test_convolution_integer_shift and (signedness or persistent or gathered or (test_split_k and shape2 and not persistent) or (tiles_and_geometry and (shape0 or shape2))))"
  racecheck_k+=" or test_both_preps or (every_plan and uint8-int8) or timed_on_the_gpu"
  racecheck_k+=" or (test_convolution_integer_shift and (unaligned or test_views))"
  step racecheck "${RACECHECK_LIMIT:-200}" env DMLSERVE_TEST_CUPY_POOL=off compute-sanitizer --tool racecheck \
    --error-exitcode 9 "${pytest[@]}" -m gpu tests/kernels/cupy -k "$racecheck_k"
fi
if has service-tests; then
  # The OpenAPI fuzz and the browser test exercise the HTTP layer alone (no backend in them),
  # and the GPU host has neither schemathesis nor Chromium.
  http_only=(--ignore=tests/service/test_schemathesis.py --ignore=tests/service/test_docs_chromium.py)
  step service-gpu-tests 300 "${parallel[@]}" -m gpu tests/service tests/clients "${http_only[@]}" \
    --ignore=tests/service/test_cuda_shm.py --ignore=tests/service/test_perf_analyzer_transports.py
  step http-suites-cupy "${HTTP_SUITES_LIMIT:-300}" env DMLSERVE_TEST_BACKEND=cupy "${parallel[@]}" \
    tests/service tests/clients "${http_only[@]}"
fi
# CUDA shared memory through tritonclient (HTTP and gRPC) and perf_analyzer --shared-memory cuda,
# against a live server on the CuPy backend.
if has transport-tests; then
  step transport-tests 400 "${pytest[@]}" -m gpu tests/service/test_cuda_shm.py \
    tests/service/test_perf_analyzer_transports.py
fi
if has memory-bench; then
  step bench-kernels 240 python3 bench/bench_kernels.py --json "$out/bench-kernels.json"
fi
if has conv-bench; then
  step bench-conv 150 python3 bench/bench_convolution_integer.py --json "$out/bench-conv.json"
fi
if has ncu; then
  # Counters of the launchers' own kernels, each case's kernel run twice (bench --profile
  # --chosen), summarised one line per case (bench/ncu_summary.py).
  metrics=smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
  step ncu 300 ncu --clock-control none --csv --page details \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --metrics "$metrics" -k 'regex:pad_|fold_|pool_' python3 bench/bench_kernels.py --profile --chosen
  python3 bench/ncu_summary.py "$out/ncu.log" >"$out/ncu-summary.md"
fi
if has service-bench; then
  # inline and batched at 16/64 connections, two rounds each server, then large and rss.
  step bench-service 480 python3 bench/service_load.py --backend cupy --wrk never --clients python \
    --output "$out/service-gpu.md"
fi
if has transport-bench; then
  step bench-transport 400 python3 bench/transport.py --backend cupy --output "$out/transport-gpu.md"
fi
if has perf-analyzer; then
  step perf-analyzer 400 python3 bench/perf_analyzer.py --backend cupy \
    --output "$out/perf-analyzer-gpu.md"
fi
if has soak; then
  step soak 600 python3 bench/soak.py --backend cupy --output "$out/soak-gpu.md"
fi

echo
cat "$summary"
exit "$failed"
