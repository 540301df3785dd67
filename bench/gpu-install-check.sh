#!/usr/bin/env bash
# The `gpu` extra on a host with only the NVIDIA driver: a fresh venv, the extra's NVIDIA
# wheels, no CUDA toolkit anywhere CuPy could find it; then the service and the GPU tests.
#
#   bench/gpu-install-check.sh fetch [--with-nvrtc]   where PyPI answers: fills .whl/
#   OUT=dir bench/gpu-install-check.sh                on the GPU host, as root, offline
#
# fetch downloads the CUDA 13 wheels below (CPython 3.12, manylinux x86_64) and builds the
# dmlserve wheel into .whl/ (ignored by git), next to the service stack a host may lack. The
# CuPy wheel (~66 MiB) is not carried: the host's CuPy is reached with --system-site-packages.
#   default       cuda-toolkit 13.0.2 + its runtime/headers wheel; NVRTC 13.0.88 must already
#                 be on the host as a wheel (PyTorch cu130 installs exactly that one)
#   --with-nvrtc  cuda-toolkit 13.2.2 with its NVRTC and runtime wheels (~47 MiB): the check
#                 then also hides the host's own NVIDIA wheels and uses only the carried ones
#
# The check, in a private mount namespace (tmpfs over /usr/local/cuda*, the toolkit's
# libnvrtc/libcudart hidden, CUDA_PATH/CUDA_HOME unset, no cuda entry on PATH or
# LD_LIBRARY_PATH): where CuPy's NVRTC and headers come from (and that a kernel including
# <cuda_fp16.h> runs), every .cu compiled and loaded through cupy.RawModule, `dmlserve serve
# --backend cupy` answering each operator as the NumPy reference does, and the GPU tests
# (GPU_TESTS=quick, the default: a subset touching every kernel file; GPU_TESTS=full: all).
# Logs land in $OUT; a summary is printed last. Exit status 0 only if every step passed.
set -uo pipefail

RUNTIME_ONLY=(cuda-toolkit==13.0.2 nvidia-cuda-runtime==13.0.96 cuda-pathfinder==1.9.0)
WITH_NVRTC=(cuda-toolkit==13.2.2 nvidia-cuda-runtime==13.2.86 nvidia-cuda-nvrtc==13.2.86
  cuda-pathfinder==1.9.0)
# uvicorn[standard]'s extras, which the shared service-stack download leaves out: with them
# the `server,gpu` extras resolve offline (~1.4 MiB).
RESOLVE_EXTRAS=(watchfiles websockets pyyaml)
QUICK_TESTS="seed_example_on_gpu or padding_dtypes_modes or unfold_dtypes or fold_dtypes \
or test_average_pooling or signedness_and_zero_points or depthwise_zero_points"
PORT=${PORT:-18431}

fetch() {
  local pkgs=("${RUNTIME_ONLY[@]}")
  [ "${1:-}" = --with-nvrtc ] && pkgs=("${WITH_NVRTC[@]}")
  pkgs+=("${RESOLVE_EXTRAS[@]}")
  mkdir -p .whl
  rm -f .whl/nvidia_cuda_* .whl/cuda_toolkit-* .whl/cuda_pathfinder-* .whl/dmlserve-* \
    .whl/watchfiles-* .whl/websockets-* .whl/pyyaml-* .whl/PyYAML-*
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --abi cp312 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_12_x86_64 --platform manylinux2010_x86_64 --platform any \
    -d .whl "${pkgs[@]}" || exit 1
  python3 -m pip wheel -q --no-deps -w .whl . || exit 1
  ls -l .whl | awk 'NR > 1 {printf "%8.2f MiB  %s\n", $5 / 1048576, $9; t += $5}
    END {printf "%8.2f MiB  total in .whl/\n", t / 1048576}'
}

step() {  # step NAME LIMIT CMD...: run, log to $OUT/NAME.log, one summary line
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  if declare -F "$1" >/dev/null; then  # a function of this script runs in this shell
    "$@" >"$OUT/$name.log" 2>&1
  else
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  fi
  rc=$?
  printf '%-14s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" \
    "$(grep -E 'FAIL|passed|failed|deselected|error|Error' "$OUT/$name.log" | tail -1)" | tee -a "$OUT/summary.txt"
  [ "$rc" -eq 0 ] || FAILED=1
  return "$rc"
}

strip_cuda() { tr ':' '\n' <<<"$1" | grep -v -i -e '/cuda' -e 'hpc_sdk' | paste -sd: -; }

hide_toolkit() {  # inside the namespace: nothing of a system CUDA toolkit stays reachable
  local d f
  for d in /usr/local/cuda /usr/local/cuda-* /opt/nvidia/hpc_sdk; do
    [ -d "$d" ] && mount -t tmpfs -o ro,size=4k tmpfs "$(realpath "$d")" && echo "tmpfs over $d"
  done
  # A toolkit elsewhere on the loader path (distribution packages): the files themselves.
  for f in $(ldconfig -p | grep -E 'lib(nvrtc|nvrtc-builtins|cudart)\.so' | awk '{print $NF}'); do
    [[ $f == */site-packages/* || $f == */dist-packages/* ]] && continue
    [ -e "$f" ] && mount --bind /dev/null "$(realpath "$f")" && echo "hidden $f"
  done
  if [ "$MODE" = with-nvrtc ]; then  # only the carried wheels: hide the host's NVIDIA wheels
    for d in $("$VENV/bin/python" -c 'import site; print(*site.getsitepackages(), site.getusersitepackages())'); do
      [[ $(realpath -m "$d") == "$(realpath "$VENV")"/* ]] && continue
      [ -d "$d/nvidia" ] && mount -t tmpfs -o ro,size=4k tmpfs "$d/nvidia" && echo "tmpfs over $d/nvidia"
    done
  fi
  unset CUDA_PATH CUDA_HOME CUDA_ROOT CUDA_TOOLKIT_ROOT_DIR CUDAToolkit_ROOT NVCC CPATH \
    C_INCLUDE_PATH CPLUS_INCLUDE_PATH LIBRARY_PATH CONDA_PREFIX
  PATH=$(strip_cuda "$PATH")
  LD_LIBRARY_PATH=$(strip_cuda "${LD_LIBRARY_PATH:-}")
  export PATH LD_LIBRARY_PATH
  echo "PATH=$PATH"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  for d in /usr/local/cuda*/; do
    [ -z "$(find "$d" -mindepth 1 -maxdepth 1 -print -quit 2>/dev/null)" ] ||
      { echo "FAIL $d is not empty"; return 1; }
  done
}

serve_and_request() {
  local py=$VENV/bin/python url=http://127.0.0.1:$PORT ready=0 pid rc t0=$SECONDS
  "$VENV/bin/dmlserve" serve --backend cupy --port "$PORT" >"$OUT/server.log" 2>&1 &
  pid=$!
  # Start-up compiles every operator before readiness; give it up to 5 minutes.
  for _ in $(seq 300); do
    "$py" -c "import urllib.request as u; u.urlopen('$url/v2/health/ready', timeout=2)" \
      2>/dev/null && { ready=1; break; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  if [ "$ready" = 1 ]; then
    echo "ready after $((SECONDS - t0)) s"
    "$py" bench/gpu_install_probe.py requests "$url"
    rc=$?
  else
    echo "FAIL server never became ready"; tail -20 "$OUT/server.log"; rc=1
  fi
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  return "$rc"
}

inside() {  # runs in the private mount namespace
  FAILED=0
  step hide 30 hide_toolkit || { cat "$OUT/hide.log"; exit 1; }
  local py=$VENV/bin/python tests=(-m gpu tests/kernels -x) where=()
  [ "${GPU_TESTS:-quick}" = full ] || tests+=(-k "$QUICK_TESTS")
  [ "$MODE" = with-nvrtc ] || where=(--nvrtc-anywhere)
  # One CUPY_CACHE_DIR, empty at the start: every kernel is compiled here, with the toolkit hidden.
  export CUPY_CACHE_DIR=$WORK/cupy-cache PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
  step provenance 120 "$py" bench/gpu_install_probe.py provenance --venv "$VENV" "${where[@]}"
  step compile-all 300 "$py" bench/gpu_install_probe.py compile-all
  step serve 420 serve_and_request
  step header-tests 120 "$py" -m pytest -q -p no:cacheprovider -o addopts=-ra \
    tests/kernels/test_nvrtc_headers.py
  step gpu-tests 480 "$py" -m pytest -q -p no:cacheprovider -o addopts=-ra "${tests[@]}"
  if grep -q 'GPU tests deselected' "$OUT/gpu-tests.log"; then
    echo "FAIL no CUDA device answered the tests" | tee -a "$OUT/summary.txt"
    FAILED=1
  fi
  exit "$FAILED"
}

check() {
  [ "$(id -u)" = 0 ] || { echo "run as root (mount namespace)" >&2; exit 2; }
  OUT=$(realpath -m "${OUT:-gpu-install-check}")
  mkdir -p "$OUT"
  : >"$OUT/summary.txt"
  WORK=$(mktemp -d /tmp/dmlserve-gpu-install.XXXXXX)
  VENV=$WORK/venv
  MODE=runtime-only
  compgen -G '.whl/nvidia_cuda_nvrtc-*.whl' >/dev/null && MODE=with-nvrtc
  export OUT WORK VENV MODE GPU_TESTS PORT
  unset PYTHONPATH PYTHONHOME PYTHONUSERBASE PIP_TARGET PIP_PREFIX
  FAILED=0
  {
    date -u '+%Y-%m-%d %H:%M UTC'
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    echo "mode $MODE; python $(python3 -V 2>&1); CUDA_PATH=${CUDA_PATH:-unset}"
    ls -d /usr/local/cuda* 2>/dev/null | sed 's/^/system toolkit: /'
    python3 - <<'EOF'
import importlib.metadata as md
for d in sorted(md.distributions(), key=lambda d: d.metadata["Name"].lower()):
    n = d.metadata["Name"]
    if n.lower().startswith(("cupy", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "cuda-")):
        print(f"host: {n} {d.version} in {d.locate_file('')}")
EOF
    ls -l .whl | awk 'NR > 1 {printf "carried %8.2f MiB  %s\n", $5 / 1048576, $9; t += $5}
      END {printf "carried %8.2f MiB  in all\n", t / 1048576}'
  } 2>&1 | tee "$OUT/host.txt"

  # --system-site-packages reaches the host's CuPy (its wheel is not carried); the venv's own
  # site-packages come first, for imports and for cuda-pathfinder's wheel search alike.
  # The host's pip installs into the venv (Ubuntu's python3 may lack ensurepip).
  step venv 60 python3 -m venv --system-site-packages --without-pip "$VENV" || exit 1
  # Where the host's python3 is itself a virtual environment, its packages (CuPy among them)
  # are not the system site: that environment's site-packages is appended after the venv's own.
  local host_site venv_site
  host_site=$(python3 -c 'import sys, sysconfig
print(sysconfig.get_paths()["purelib"] if sys.prefix != sys.base_prefix else "")')
  if [ -n "$host_site" ]; then
    venv_site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$host_site" >"$venv_site/host-site.pth"
    echo "host site-packages appended: $host_site" | tee -a "$OUT/host.txt"
  fi
  local pip=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input)
  # The carried NVIDIA wheels go into the venv even where the host has the same versions.
  step nvidia-wheels 120 "${pip[@]}" install --no-index --no-deps --ignore-installed \
    .whl/nvidia_cuda_*.whl .whl/cuda_toolkit-*.whl .whl/cuda_pathfinder-*.whl || exit 1
  # The extra resolves offline: CuPy from the host, the rest from .whl/.
  local wheel
  wheel=$(find .whl -name 'dmlserve-*.whl' | sort | tail -1)
  if ! step resolve 180 "${pip[@]}" install --no-index --find-links .whl "${wheel}[server,gpu]"; then
    # Still check the rest: everything carried, without resolution (reported failed above).
    "${pip[@]}" install --no-index --no-deps .whl/*.whl >>"$OUT/resolve.log" 2>&1
  fi
  "$VENV/bin/python" -c 'import dmlserve; print("dmlserve from", dmlserve.__file__)' \
    | tee -a "$OUT/host.txt"

  local ns=(unshare --mount --propagation private)
  "${ns[@]}" true 2>/dev/null || ns=(unshare --user --map-root-user --mount --propagation private)
  "${ns[@]}" true 2>/dev/null || { echo "FAIL no mount namespace here" | tee -a "$OUT/summary.txt"; exit 1; }
  "${ns[@]}" "$BASH" "$0" _inside || FAILED=1

  echo
  echo "== gpu-install-check ($MODE) $(date -u '+%Y-%m-%d %H:%M UTC'), logs in $OUT"
  grep -E '^(host|dmlserve from)|^carried.*(nvidia|cuda|dmlserve|in all)' "$OUT/host.txt"
  cat "$OUT/hide.log" "$OUT/provenance.log" "$OUT/compile-all.log" "$OUT/serve.log" 2>/dev/null \
    | grep -E '^(tmpfs|hidden|cupy|cuda headers|nvrtc|loaded|ok|FAIL|ready)'
  cat "$OUT/summary.txt"
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"  # KEEP_WORK=1 keeps the venv for a closer look
  exit "$FAILED"
}

case "${1:-check}" in
  fetch) shift; cd "$(git rev-parse --show-toplevel)" && fetch "$@" ;;
  _inside) inside ;;
  check) cd "$(dirname "$0")/.." && check ;;
  *) sed -n '2,22p' "$0"; exit 2 ;;
esac
