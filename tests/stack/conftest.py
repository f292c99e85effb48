"""The real local stack for the end-to-end tests.

``make test`` starts the stack and sets ``TRACEDAGENT_REQUIRE_STACK=1``: a stack that is
not healthy then FAILS these tests rather than skipping them. Run by hand without the stack,
they are skipped with the command that starts it.
"""

from __future__ import annotations

import os
import uuid

import pytest

from tracedagent import configure

from ._stack import OTLP_GRPC, unhealthy_services


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/stack/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.stack)


@pytest.fixture(scope="session")
def stack_up() -> None:
    down = unhealthy_services()
    if down:
        message = f"the local stack is not healthy ({', '.join(down)}); start it with `make stack-up`"
        if os.environ.get("TRACEDAGENT_REQUIRE_STACK"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def service_name() -> str:
    """Unique per test session, so counts in Jaeger and Prometheus are exactly ours."""
    return f"tracedagent-e2e-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def telemetry(stack_up, service_name):
    handle = configure(service_name=service_name, endpoint=OTLP_GRPC, protocol="grpc",
                       metric_export_interval=1.0, set_global=False)
    yield handle
    handle.shutdown(timeout=5)
