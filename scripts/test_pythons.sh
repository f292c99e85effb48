#!/usr/bin/env bash
# The tests that need no running service, on every other Python the package supports
# (>= 3.10; `make test` covers the default one). Each gets a venv under .venvs/ with pip 25.1 or
# newer (it installs PEP 735 dependency groups), the package and its test group; an interpreter that is missing fails the run rather than
# being skipped, as the README promises these versions. The oldest one gets the lowest
# dependency versions pyproject.toml allows (scripts/lowest.txt), so those bounds are tested too.
set -euo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.10 3.12 3.13)

find_python() {  # python3.X on PATH, else the newest pyenv build of it
  local v=$1 candidate
  if candidate=$(command -v "python$v" 2>/dev/null) && "$candidate" -c 'import venv' 2>/dev/null; then
    echo "$candidate"; return 0
  fi
  for candidate in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$v".* 2>/dev/null | sort -V -r); do
    [ -x "$candidate/bin/python" ] && { echo "$candidate/bin/python"; return 0; }
  done
  return 1
}

for v in "${versions[@]}"; do
  if ! python=$(find_python "$v"); then
    echo "[pythons] no Python $v on this machine (looked for python$v on PATH and in pyenv)" >&2
    exit 1
  fi
  venv=".venvs/py$v"
  echo "[pythons] Python $v: $python"
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  constraints=()
  if [ "$v" = "${versions[0]}" ]; then
    constraints=(-c scripts/lowest.txt)
    echo "[pythons] with the lowest allowed dependencies (scripts/lowest.txt)"
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade 'pip>=25.1'
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e . --group test "${constraints[@]}"
  "$venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 tests examples/support-agent --ignore=tests/stack --ignore=tests/scale \
    --ignore=tests/local   # the real-model tier: once, on the default Python, in `make test`
done
