"""The scale stack (scripts/scale.sh) for the scale tests.

``make test-scale`` starts it and sets ``TRACEDAGENT_REQUIRE_SCALE=1``: a stack that is not
healthy then FAILS these tests rather than skipping them. They are not part of ``make test``.
"""

from __future__ import annotations

import os
import uuid

import pytest

from tracedagent import configure

from ._scale import OTLP_GRPC, unhealthy


@pytest.fixture(scope="session")
def scale_up() -> None:
    down = unhealthy()
    if down:
        message = f"the scale stack is not healthy ({', '.join(down)}); start it with `make stack-scale-up`"
        if os.environ.get("TRACEDAGENT_REQUIRE_SCALE"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def service_name() -> str:
    """Unique per test session, so counts in the gateway's metrics are exactly ours."""
    return f"tracedagent-scale-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def telemetry(scale_up, service_name):
    """Exports to the gateway."""
    handle = configure(service_name=service_name, endpoint=OTLP_GRPC,
                       protocol="grpc", metric_export_interval=1.0, set_global=False)
    yield handle
    handle.shutdown(timeout=10)


@pytest.fixture(autouse=True)
def healthy_after(scale_up):
    """Every test leaves the whole stack running, whatever it stopped or killed."""
    yield
    if unhealthy():
        from ._scale import scale
        scale("up")
