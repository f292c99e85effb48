"""Where the tools that live beside the repository are: ``../shared`` (OpenTelemetry's semantic
conventions, Weaver, the Jaeger UI build), or ``TRACEDAGENT_SHARED``.

CI clones the repository with a copy of ``shared/`` beside it, and ``.ci/run`` sets
``TRACEDAGENT_REQUIRE_SHARED=1``: a missing folder or tool then FAILS the tests that need it.
A user without it gets those tests skipped, with the reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV_SHARED = "TRACEDAGENT_SHARED"
ENV_REQUIRE_SHARED = "TRACEDAGENT_REQUIRE_SHARED"


def shared_dir() -> Path:
    """``TRACEDAGENT_SHARED``, else ``../shared`` beside the repository (not checked)."""
    return Path(os.environ.get(ENV_SHARED) or ROOT.parent / "shared").resolve()


def require(path: Path, what: str) -> Path:
    """``path`` (inside the shared folder), or skip - or fail, in CI - saying what is missing."""
    if path.exists():
        return path
    message = (f"{what} is missing: no {path} (the tools beside the repository: put them in ../shared "
               f"or name the folder with {ENV_SHARED})")
    if os.environ.get(ENV_REQUIRE_SHARED):
        pytest.fail(message)
    pytest.skip(message)


def weaver() -> Path:
    return require(shared_dir() / "weaver" / "weaver", "OpenTelemetry Weaver")


def semconv_model() -> Path:
    return require(shared_dir() / "semconv" / "model", "OpenTelemetry's semantic-convention registry v1.41.1")


def jaeger_ui_build() -> Path:
    return require(shared_dir() / "jaeger-ui" / "build" / "index.html", "the Jaeger UI 2.20 build").parent
