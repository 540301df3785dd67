#!/usr/bin/env bash
# Regenerate the image's pinned, hashed requirement locks from pyproject.toml.
#
# The locks target the images' interpreter (CPython 3.12, manylinux x86_64), not this
# machine's, and are constrained to the versions installed in the development venv, so an
# image runs the same library versions the test suite ran against. The cpu image's locks must
# also hold for CPython 3.11, the interpreter of the Debian bookworm base that
# deploy/smoke-image.sh builds on where no registry answers: this script fails if they would
# resolve differently there (the hashes cover every wheel of each pinned release).
#
# Needs uv (pip install uv) and network access to PyPI. Usage: deploy/update-locks.sh [venv]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}
uv=${UV:-uv}
constraints=$(mktemp)
py311=
trap 'rm -f "$constraints" "$py311"' EXIT
# The project itself and local checkouts are not constraints.
"$venv/bin/python" -m pip freeze --exclude-editable | grep -vE '^(dmlserve)==| @ ' >"$constraints"

compile() {  # compile <python-version> <output> <input> [option...]
  local python=$1 out=$2 in=$3
  shift 3
  "$uv" pip compile --quiet "$in" "$@" \
    --python-version "$python" --python-platform x86_64-manylinux_2_28 \
    --generate-hashes --no-header --no-annotate --index-url https://pypi.org/simple -o "$out"
}
compile 3.12 deploy/requirements-lock.txt pyproject.toml --extra server --constraint "$constraints"
compile 3.12 deploy/requirements-gpu-lock.txt pyproject.toml --extra server --extra gpu \
  --constraint "$constraints"
# Build tooling for the wheel stage and the images' own pip (versions chosen in the .in file).
compile 3.12 deploy/requirements-build.txt deploy/requirements-build.in

py311=$(mktemp)
compile 3.11 "$py311" pyproject.toml --extra server --constraint "$constraints"
diff -u deploy/requirements-lock.txt "$py311" ||
  { echo "requirements-lock.txt resolves differently for Python 3.11" >&2; exit 1; }
compile 3.11 "$py311" deploy/requirements-build.in
diff -u deploy/requirements-build.txt "$py311" ||
  { echo "requirements-build.txt resolves differently for Python 3.11" >&2; exit 1; }
