#!/usr/bin/env bash
# Build an image target with Podman, run it as its non-root user under the manifests'
# hardening, wait until its own HEALTHCHECK passes, serve a real request, check the answer and
# the installed package, and stop it gracefully. Exits non-zero on any failure, after printing
# the container's logs.
#
# Usage: deploy/smoke-image.sh cpu
#
# The base image: $SMOKE_PYTHON_IMAGE if set; else the Dockerfile's PYTHON_IMAGE where the
# registry answers; else a local Debian bookworm base (Debian's python3 3.11 + venv) made
# with debootstrap and imported once, then reused from Podman's store (its tag carries a
# hash of the recipe below, so a changed recipe builds a new one).
#
# Needs: root; podman and runc (apt-get install podman runc; crun fails on some hosts'
# cgroups and rlimits, so runc is used); debootstrap and Debian's archive where the base is
# made locally; PyPI reachable (the build installs the hashed locks); python3 on the host.
# The gpu target cannot be smoke-tested here: it needs NVIDIA's CUDA base and a GPU runtime.
set -euo pipefail
cd "$(dirname "$0")/.."

target=${1:-}
if [[ $target != cpu ]]; then
  echo "usage: deploy/smoke-image.sh cpu   (the gpu target needs a GPU container runtime)" >&2
  exit 2
fi

# crun fails on these hosts' cgroups and rlimits; explicit ulimits keep the runtime from
# copying the host's (possibly unsettable) ones.
limits=(--ulimit nofile=1024:1024 --ulimit nproc=1000:1000)
podman=(podman --runtime "${SMOKE_RUNTIME:-runc}")
image=${SMOKE_IMAGE:-localhost/dmlserve:smoke-$target}
name=dmlserve-smoke-$$
deadline_s=${SMOKE_READY_TIMEOUT_S:-120}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
base_repo=localhost/dmlserve-base
# python:3.12-slim's runtime packages (ca-certificates, netbase, tzdata), plus Debian's
# python3 and its venv module, which the official image builds from source instead.
base_packages=python3,python3-venv,ca-certificates,netbase,tzdata
# The pip that Debian's venv module bootstraps (23.0) reads its own CA bundle, not the
# system's; this points it, and every later pip, at the system's, as Debian's python3-pip is.
base_pip_conf=$'[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n'

t0=$SECONDS
phase() { printf '\n-- %s (%ds)\n' "$*" $((SECONDS - t0)); }
die() { echo "smoke-image: FAIL: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null || die "$1 not found (apt-get install $2)"; }
need podman podman
need runc runc
need python3 python3

started=0
cleanup() {
  local rc=$?
  if ((started)); then
    if ((rc != 0)); then
      echo "---- container logs ($name) ----" >&2
      "${podman[@]}" logs "$name" >&2 || true
      echo "---- container state ----" >&2
      "${podman[@]}" inspect --format '{{json .State}}' "$name" >&2 || true
    fi
    "${podman[@]}" rm -f -t 0 "$name" >/dev/null 2>&1 || true
  fi
  ((rc == 0)) || echo "smoke-image: FAILED after $((SECONDS - t0)) s" >&2
}
trap cleanup EXIT

local_base() {
  local recipe tag rootfs
  recipe="debootstrap minbase bookworm $base_packages; /etc/pip.conf: $base_pip_conf"
  tag=$base_repo:bookworm-$(printf '%s' "$recipe" | sha256sum | cut -c1-12)
  if ! "${podman[@]}" image exists "$tag"; then
    need debootstrap debootstrap
    phase "making the local base $tag (debootstrap: $base_packages)" >&2
    rootfs=$(mktemp -d)
    debootstrap --variant=minbase --include="$base_packages" bookworm "$rootfs" "$mirror" \
      >"$rootfs.log" 2>&1 || { tail -20 "$rootfs.log" >&2; rm -rf "$rootfs"; die "debootstrap"; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs.log"
    printf '%s' "$base_pip_conf" >"$rootfs/etc/pip.conf"
    tar -C "$rootfs" --exclude=./dev/* --exclude=./proc/* --exclude=./sys/* -c . |
      "${podman[@]}" import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["bash"]' - "$tag" >/dev/null
    rm -rf "$rootfs"
  fi
  echo "$tag"
}

phase "base image"
published=$(sed -n 's/^ARG PYTHON_IMAGE=//p' Dockerfile)
if [[ -n ${SMOKE_PYTHON_IMAGE:-} ]]; then
  base=$SMOKE_PYTHON_IMAGE
else
  # An unqualified name would need a registries.conf search list; Docker Hub is the default.
  if [[ $published == */* && ${published%%/*} == *[.:]* ]]; then
    qualified=$published
  elif [[ $published == */* ]]; then
    qualified=docker.io/$published
  else
    qualified=docker.io/library/$published
  fi
  if "${podman[@]}" image exists "$qualified" || "${podman[@]}" pull -q "$qualified" >/dev/null 2>&1
  then
    base=$qualified
  else
    echo "registry unreachable for $qualified: using a local Debian bookworm base"
    base=$(local_base)
  fi
fi
"${podman[@]}" run --rm "${limits[@]}" --network none "$base" python3 --version |
  sed "s|^|base $base: |"

phase "build --target $target"
# pip in the build trusts the host's CA bundle (for a TLS-inspecting proxy on the way to
# PyPI): it is bind-mounted over the base's own bundle for the RUN steps only, a file both
# bases have, so nothing of the host is left in the image's layers.
build_mounts=()
host_ca=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
if [[ -f $host_ca ]]; then
  build_mounts=(-v "$(realpath "$host_ca"):/etc/ssl/certs/ca-certificates.crt:ro")
fi
# Docker format: the OCI image format has no HEALTHCHECK, which this test runs.
build_log=$(mktemp)
previous=$("${podman[@]}" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
if ! "${podman[@]}" build --format docker --target "$target" --build-arg PYTHON_IMAGE="$base" \
  "${limits[@]}" --network host "${build_mounts[@]}" -t "$image" . >"$build_log" 2>&1; then
  tail -40 "$build_log" >&2
  die "podman build (log: $build_log)"
fi
steps=$(grep ' STEP ' "$build_log" | grep -vc ': FROM ' || true)
cached=$(grep -c '^--> Using cache' "$build_log" || true)  # grep -c exits 1 on a count of 0
size_mib=$(("$("${podman[@]}" image inspect --format '{{.Size}}' "$image")" >> 20))
echo "$steps steps, $cached from cache; $image: $size_mib MiB"
rm -f "$build_log"
# Reruns after a change would otherwise pile up the replaced image's layers, and old bases.
current=$("${podman[@]}" image inspect --format '{{.Id}}' "$image")
if [[ -n $previous && $previous != "$current" ]]; then
  "${podman[@]}" rmi "$previous" >/dev/null 2>&1 || true
fi
for old in $("${podman[@]}" images --format '{{.Repository}}:{{.Tag}}' "$base_repo"); do
  [[ $old == "$base" ]] || "${podman[@]}" rmi "$old" >/dev/null 2>&1 || true
done

phase "run as the image's user, read-only root, no capabilities"
port=$(python3 -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
started=1
# The image's health check command is run below, on demand: Podman's own timer needs systemd.
"${podman[@]}" run -d --name "$name" "${limits[@]}" --network host --no-healthcheck \
  --read-only --tmpfs /tmp --cap-drop ALL --security-opt no-new-privileges \
  -e DMLSERVE_HOST=127.0.0.1 -e DMLSERVE_PORT="$port" "$image" >/dev/null
# The server process itself (PID 1): real, effective, saved and filesystem UIDs.
uids=$("${podman[@]}" exec "$name" python -c \
  'print(*[ln.split()[1:] for ln in open("/proc/1/status") if ln.startswith("Uid:")][0])')
[[ $uids == "10001 10001 10001 10001" ]] || die "the server runs as UIDs $uids, not 10001"
echo "server UIDs $uids, port $port"

phase "waiting for the HEALTHCHECK (/v2/health/ready), at most ${deadline_s}s"
check=$("${podman[@]}" image inspect --format '{{json .HealthCheck.Test}}' "$image")
[[ $check == *health/ready* ]] || die "the image has no HEALTHCHECK on /v2/health/ready: $check"
# ["CMD", argv...] or ["CMD-SHELL", command], as Docker stores it.
mapfile -d '' check_argv < <(python3 -c '
import json, sys
test = json.loads(sys.argv[1])
argv = test[1:] if test[0] == "CMD" else ["/bin/sh", "-c", test[1]]
sys.stdout.write("\0".join(argv) + "\0")' "$check")
waited_from=$SECONDS
ready_by=$((SECONDS + deadline_s))
until "${podman[@]}" exec "$name" "${check_argv[@]}" >/dev/null 2>&1; do
  [[ $("${podman[@]}" inspect --format '{{.State.Running}}' "$name") == true ]] ||
    die "the container exited before it was ready"
  ((SECONDS < ready_by)) || die "not healthy within ${deadline_s}s"
  sleep 1
done
echo "healthy after $((SECONDS - waited_from)) s"

phase "installed package: regular files from the wheel, not links or the source tree"
"${podman[@]}" exec -i "$name" python - <<'EOF'
import pathlib
import sys

import dmlserve

root = pathlib.Path(dmlserve.__file__).parent
assert str(root).startswith(sys.prefix + "/lib/"), f"dmlserve imported from {root}"
links = [str(p) for p in root.rglob("*") if p.is_symlink()]
assert not links, f"symbolic links in the installed package: {links}"
for sub in ("kernels", "service", "clients"):
    assert (root / sub / "__init__.py").is_file(), f"dmlserve.{sub} missing"
cuda = sorted(p.name for p in (root / "kernels" / "cuda").glob("*.cu*"))
assert cuda, "no CUDA sources in dmlserve/kernels/cuda"
print(f"{root}: {sum(1 for p in root.rglob('*.py'))} modules, CUDA sources {cuda}")
EOF

phase "POST /v1/execute: PADDING, REFLECTION"
python3 - "$port" <<'EOF'
import json
import sys
import urllib.request

body = {
    "operator": {
        "type": "PADDING",
        "PaddingMode": "REFLECTION",
        "StartPadding": [0, 0, 1, 2],
        "EndPadding": [0, 0, 1, 2],
    },
    "inputs": {
        "InputTensor": {"DataType": "INT32", "Sizes": [1, 1, 2, 3], "data": [1, 2, 3, 4, 5, 6]}
    },
}
# Rows [1 2 3], [4 5 6] reflected about their edges (the edge not repeated): one row above
# and below, two columns left and right.
row1, row2 = [3, 2, 1, 2, 3, 2, 1], [6, 5, 4, 5, 6, 5, 4]
expected = {"DataType": "INT32", "Sizes": [1, 1, 4, 7], "data": row2 + row1 + row2 + row1}
request = urllib.request.Request(
    f"http://127.0.0.1:{sys.argv[1]}/v1/execute",
    data=json.dumps(body).encode(),
    headers={"Content-Type": "application/json"},
)
with urllib.request.urlopen(request, timeout=30) as response:
    answer = json.load(response)
out = answer["outputs"]["OutputTensor"]
got = {k: out.get(k) for k in expected}
assert got == expected, f"PADDING answered {answer}, expected {expected}"
assert answer["backend"] == "numpy", answer
print(f"200 {got['Sizes']} {got['data']} backend={answer['backend']}")
EOF

phase "stop (SIGTERM, graceful shutdown)"
"${podman[@]}" stop -t 30 "$name" >/dev/null
code=$("${podman[@]}" inspect --format '{{.State.ExitCode}}' "$name")
[[ $code == 0 ]] || die "the server exited with status $code on SIGTERM"
"${podman[@]}" logs "$name" 2>&1 | tail -3
echo "exit status 0"

phase "smoke-image $target: passed"
