"""Talking to the real local stack (``make stack-up``): health, HTTP queries, restarts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable, TypeVar

import pytest

from tracedagent._core import _names as N

ROOT = Path(__file__).resolve().parents[2]
OTLP_GRPC = os.environ.get("TRACEDAGENT_TEST_OTLP", "http://127.0.0.1:4317")
OTLP_HTTP = os.environ.get("TRACEDAGENT_TEST_OTLP_HTTP", "http://127.0.0.1:4318")
JAEGER = os.environ.get("TRACEDAGENT_TEST_JAEGER", "http://127.0.0.1:16686")
PROMETHEUS = os.environ.get("TRACEDAGENT_TEST_PROMETHEUS", "http://127.0.0.1:9090")
ALERTMANAGER = os.environ.get("TRACEDAGENT_TEST_ALERTMANAGER", "http://127.0.0.1:9093")
HEALTH = {
    "otelcol": "http://127.0.0.1:13133/",
    "jaeger": "http://127.0.0.1:13134/",
    "prometheus": f"{PROMETHEUS}/-/ready",
    "alertmanager": f"{ALERTMANAGER}/-/ready",
}
T = TypeVar("T")


def get_json(url: str, params: dict[str, Any] | None = None, timeout: float = 5) -> Any:
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def healthy(service: str) -> bool:
    try:
        with urllib.request.urlopen(HEALTH[service], timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def unhealthy_services() -> list[str]:
    return [name for name in HEALTH if not healthy(name)]


def eventually(what: str, check: Callable[[], T | None], timeout: float = 60, every: float = 0.5) -> T:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (OSError, urllib.error.URLError, KeyError, ValueError) as exc:
            last_error = exc
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}"
                         + (f" (last error: {last_error!r})" if last_error else ""))


def jaeger_traces(service: str, tags: dict[str, str] | None = None, limit: int = 100) -> list[dict]:
    params = {"service": service, "limit": limit, "lookback": "1h"}
    if tags:
        params["tags"] = json.dumps(tags)
    return get_json(f"{JAEGER}/api/traces", params)["data"] or []


def jaeger_trace(trace_id: str, jaeger: str = JAEGER) -> dict | None:
    """The trace from Jaeger's API (the main stack's, unless another is named), or None."""
    try:
        data = get_json(f"{jaeger}/api/traces/{trace_id}")["data"]
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise
    return data[0] if data else None


def prom_query(expr: str) -> list[dict]:
    return get_json(f"{PROMETHEUS}/api/v1/query", {"query": expr})["data"]["result"]


def tracedagent(*args: Any, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m tracedagent ARGS`` with no OTLP variables but those in ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    clean.update(COLUMNS="250", **{N.ENV_JAEGER_URL: JAEGER}, **(env or {}))
    return subprocess.run([sys.executable, "-m", "tracedagent", *map(str, args)], cwd=ROOT, env=clean,
                          capture_output=True, text=True, timeout=120)


def stack(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "scripts" / "stack.sh"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def kill(service: str) -> None:
    """SIGKILL one service of the stack, as a crash would (no graceful shutdown).

    Only the checkout that ran ``make stack-up`` holds the pid files, and only it may restart
    the stack (with its own data directory); from another worktree sharing that stack the
    test is skipped rather than failing on a missing file - except under ``make test`` (and
    so CI), which starts the stack from its own checkout: there a missing pid file fails.
    """
    pid_file = ROOT / ".stack" / "run" / f"{service}.pid"
    if not pid_file.exists():
        if os.environ.get("TRACEDAGENT_REQUIRE_STACK"):
            raise AssertionError(f"{pid_file} is missing: was the stack started by `make stack-up` here?")
        pytest.skip(f"the running stack was not started from this checkout ({pid_file} is missing); killing and "
                    f"restarting {service} is left to the checkout that ran `make stack-up`")
    pid = int(pid_file.read_text().split()[0])  # line 1: the pid; line 2: the binary started
    os.kill(pid, signal.SIGKILL)
    eventually(f"{service} to die", lambda: not healthy(service), timeout=15)


def restart(service: str) -> None:
    """Start whatever of the stack is not running, and wait until the service is healthy."""
    result = stack("up")
    assert result.returncode == 0, result.stderr[-2000:]
    eventually(f"{service} to be healthy", lambda: healthy(service), timeout=60)
