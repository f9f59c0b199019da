#!/usr/bin/env bash
# Creates (once, cached outside the repo) a Python virtualenv with a pinned release of the real
# Python Kopf from PyPI, for the state-compatibility tests (tests/kopf_compat_test.ts), and
# prints the venv's path on stdout. Progress and errors go to stderr.
#
# Usage: tools/python-kopf.sh            # prints e.g. ~/.cache/kopf-ts/python-kopf-1.45.2
#        KOPF_PY_VERSION=1.44.6 tools/python-kopf.sh
#
# Needs python3 with the venv module and access to PyPI (only for the first run).
# Exit codes: 0 ready; 2 python3/venv unavailable; 3 installation failed.
set -euo pipefail
KOPF_VERSION="${KOPF_PY_VERSION:-1.45.2}"
CACHE="${KOPF_TS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-ts}"
venv="$CACHE/python-kopf-$KOPF_VERSION"

if [[ -x "$venv/bin/kopf" && -f "$venv/.ready" ]]; then
  echo "$venv"
  exit 0
fi

PYTHON="${PYTHON:-python3}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "error: $PYTHON is not on PATH (needed to run Python Kopf)" >&2
  exit 2
fi
if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "error: $PYTHON has no venv/ensurepip module (e.g. apt-get install python3-venv)" >&2
  exit 2
fi

mkdir -p "$CACHE"
# Venvs are not relocatable, so it is built at its final path; the `.ready` marker is written
# last, so an interrupted install is redone from scratch. A lock serialises concurrent runs.
lock="$CACHE/.python-kopf-$KOPF_VERSION.lock"
exec 9>"$lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi
if [[ -x "$venv/bin/kopf" && -f "$venv/.ready" ]]; then
  echo "$venv"
  exit 0
fi
rm -rf "$venv"
echo "[python-kopf] creating $venv with kopf==$KOPF_VERSION from PyPI" >&2
if ! "$PYTHON" -m venv "$venv" >&2; then
  rm -rf "$venv"
  echo "error: could not create the virtualenv $venv" >&2
  exit 3
fi
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
  "kopf==$KOPF_VERSION" >&2; then
  rm -rf "$venv"
  echo "error: could not install kopf==$KOPF_VERSION from PyPI" >&2
  exit 3
fi
"$venv/bin/kopf" --version >&2
touch "$venv/.ready"
echo "$venv"
