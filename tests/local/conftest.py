"""The real-model tier: one llama.cpp server (SmolLM2-135M) per test session, on a free loopback
port, stopped at the end. `make test-local` runs this tier alone; `make test` runs it with the rest.

Without the server or the weights installed the tier is skipped with the command that installs
them, except under `make test` (``TRACEDAGENT_REQUIRE_LOCAL_MODEL=1``), where it fails. A server
that is installed but does not start always fails.
"""

from __future__ import annotations

import os

import pytest

from tracedagent._cli import _local_model as local

from ._local import missing_or_fail


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/local/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.local_model)


@pytest.fixture(scope="session")
def local_server():
    missing_or_fail()
    server = local.start()  # LocalServerError (with the server's log) fails every test that needs it
    yield server
    server.stop()
