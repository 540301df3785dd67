#!/usr/bin/env bash
# Regenerate the image's pinned, hashed requirement locks from pyproject.toml.
#
# The locks target the images' interpreter (CPython 3.12, manylinux x86_64), not this
# machine's, and are constrained to the versions installed in the development venv, so an
# image runs the same library versions the test suite ran against.
#
# Needs uv (pip install uv) and network access to PyPI. Usage: deploy/update-locks.sh [venv]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}
uv=${UV:-uv}
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
# The project itself and local checkouts are not constraints.
"$venv/bin/python" -m pip freeze --exclude-editable | grep -vE '^(dmlserve)==| @ ' >"$constraints"

compile() {  # compile <output> [extra...]
  local out=$1
  shift
  "$uv" pip compile pyproject.toml "$@" \
    --python-version 3.12 --python-platform x86_64-manylinux_2_28 \
    --constraint "$constraints" --generate-hashes --no-header --no-annotate \
    --index-url https://pypi.org/simple -o "$out"
}
compile deploy/requirements-lock.txt --extra server
compile deploy/requirements-gpu-lock.txt --extra server --extra gpu

# Build tooling for the wheel stage and the images' own pip (versions chosen in the .in file).
"$uv" pip compile deploy/requirements-build.in --python-version 3.12 \
  --python-platform x86_64-manylinux_2_28 --generate-hashes --no-header --no-annotate \
  --index-url https://pypi.org/simple -o deploy/requirements-build.txt
