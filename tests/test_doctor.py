"""`tracedagent doctor` without the stack: free ports, a hanging socket, real OTLP receivers
(``otlp_receivers``) and a stub HTTP server on 127.0.0.1 standing in for the other services.

The command is run as a person runs it (a subprocess); the only in-process tests are the
ones about which endpoints it picks, which must be exactly those ``configure()`` exports to.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from _fake_servers import Reply, RoutedServer, closed_port
from otlp_receivers import GrpcReceiver, HttpReceiver
from tracedagent._cli._main import _doctor
from tracedagent._core import _names as N
from tracedagent._export._configure import configure

ROOT = Path(__file__).resolve().parent.parent
SERVICES = ("collector health", "Jaeger query API", "Prometheus", "Alertmanager")
COMPOSE_NAME = {"collector": "otel-collector", "collector health": "otel-collector", "Jaeger query API": "jaeger",
                "Prometheus": "prometheus", "Alertmanager": "alertmanager"}


def doctor(*args: Any, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """``python -m tracedagent doctor ARGS`` with no OTLP or tracedagent variables but ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACEDAGENT_"))}
    clean.update(COLUMNS="250", **(env or {}))
    return subprocess.run([sys.executable, "-m", "tracedagent", "doctor", *map(str, args)], cwd=ROOT, env=clean,
                          capture_output=True, text=True, timeout=timeout)


def row(output: str, name: str) -> tuple[str, str, str] | None:
    """(URL, status, details) of the table row whose first cell starts with ``name``."""
    match = re.search(rf"^│ {re.escape(name)}[^│]*│ (\S+)\s*│ (reachable|unreachable)\s*│ (.*?)\s*│$", output, re.M)
    return match.groups() if match else None


def hint_after(output: str, name: str) -> str:
    """The details cell of the line after ``name``'s row: where the hint goes."""
    lines = output.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith(f"│ {name}"))
    return lines[index + 1].split("│")[4].strip()


RECEIVERS = {N.PROTOCOL_GRPC: GrpcReceiver, N.PROTOCOL_HTTP: HttpReceiver}
JAEGER_SERVICES = Reply(body=json.dumps({"data": ["shop", "jaeger"], "total": 2, "errors": None}).encode())


@pytest.fixture
def stub() -> Iterator[RoutedServer]:
    server = RoutedServer({"/": Reply(body=b'{"status":"Server available"}'), "/api/services": JAEGER_SERVICES,
                           "/-/ready": Reply(body=b"OK")})
    yield server
    server.close()


class Hanging:
    """A port that accepts connections and never answers (a hung service, or a firewall),
    and counts how many of them were open at once."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self.most_open = 0
        """The most connections the clients held open at the same time."""
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.accepted.append(self.listener.accept()[0])
            except OSError:
                return
            self.most_open = max(self.most_open, sum(map(_still_open, self.accepted)))

    def close(self) -> None:
        self.listener.close()
        for connection in self.accepted:
            connection.close()


def _still_open(connection: socket.socket) -> bool:
    """Whether the client end is still open (it closes when its check gives up)."""
    try:
        return connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


@pytest.fixture
def hanging() -> Iterator[Hanging]:
    server = Hanging()
    yield server
    server.close()


def everything_at(url: str, *, otlp: str | None = None, health: str | None = None) -> list[str]:
    return ["--otlp", otlp or url, "--collector-health", health or f"{url}/", "--jaeger", url,
            "--prometheus", url, "--alertmanager", url]


# --- nothing there -----------------------------------------------------------------------

def test_everything_down_exits_1_and_says_how_to_start_each_service():
    down = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    result = doctor(*everything_at(down))
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    for name in ("collector OTLP gRPC (traces, metrics)", *SERVICES):
        found = row(result.stdout, name)
        assert found, (name, result.stdout)
        assert found[1] == "unreachable" and found[2] == "connection refused", found
        compose = COMPOSE_NAME.get(name, "otel-collector")
        assert hint_after(result.stdout, name) == \
            f"start it: `make stack-up` (no Docker) or `docker compose up -d {compose}`"
    assert "5 of 5 endpoints unreachable" in result.stdout
    assert "`make stack-up` (no Docker) or `docker compose up -d`" in result.stdout
    assert elapsed < 10, f"doctor took {elapsed:.1f} s with every port refusing"


def test_hung_services_cost_one_timeout_in_all_not_one_each(hanging):
    result = doctor(*everything_at(hanging.url), "--protocol", N.PROTOCOL_HTTP, "--timeout", 1)
    assert result.returncode == 1
    names = ["collector OTLP/HTTP (traces)", "collector OTLP/HTTP (metrics)", *SERVICES]
    for name in names:
        assert row(result.stdout, name)[1:] == ("unreachable", "no answer within 1 s"), result.stdout
    # One after the other, each check would give up (and close) before the next connected:
    # all six waiting on the hung port at the same time is what makes the whole one timeout.
    assert hanging.most_open == len(names), f"at most {hanging.most_open} of {len(names)} checks waited at once"


# --- some or all there -------------------------------------------------------------------

def test_a_stub_answering_some_endpoints_shows_those_reachable(stub):
    down = f"http://127.0.0.1:{closed_port()}"
    result = doctor("--otlp", down, "--collector-health", f"{stub.url}/", "--jaeger", stub.url,
                    "--prometheus", stub.url, "--alertmanager", down)
    assert result.returncode == 1, result.stdout
    assert row(result.stdout, "collector health")[:2] == (f"{stub.url}/", "reachable")
    assert row(result.stdout, "Jaeger query API")[:2] == (f"{stub.url}/api/services", "reachable")
    assert "2 services with traces" in row(result.stdout, "Jaeger query API")[2]
    assert row(result.stdout, "Prometheus")[:2] == (f"{stub.url}/-/ready", "reachable")
    assert row(result.stdout, "Alertmanager")[1] == "unreachable"
    assert row(result.stdout, "collector OTLP gRPC")[1] == "unreachable"
    assert "2 of 5 endpoints unreachable" in result.stdout
    assert {r.path for r in stub.requests} == {"/", "/api/services", "/-/ready"}


def test_everything_reachable_exits_0_over_grpc(stub):
    with GrpcReceiver() as receiver:
        result = doctor(*everything_at(stub.url, otlp=receiver.endpoint))
        assert {r.path for r in receiver.requests} == {"/v1/traces", "/v1/metrics"}, "asked the trace and metrics services"
        assert all(not r.message.ListFields() for r in receiver.requests), "the export requests are empty"
    assert result.returncode == 0, result.stdout + result.stderr
    assert row(result.stdout, "collector OTLP gRPC (traces, metrics)")[:2] == (receiver.endpoint, "reachable")
    assert "All 5 endpoints are reachable" in result.stdout


def test_everything_reachable_exits_0_over_http(stub):
    with HttpReceiver() as receiver:
        result = doctor(*everything_at(stub.url, otlp=receiver.endpoint), "--protocol", N.PROTOCOL_HTTP)
        assert sorted(r.path for r in receiver.requests) == ["/v1/metrics", "/v1/traces"]
    assert result.returncode == 0, result.stdout + result.stderr
    assert row(result.stdout, "collector OTLP/HTTP (traces)")[:2] == (f"{receiver.endpoint}/v1/traces", "reachable")
    assert row(result.stdout, "collector OTLP/HTTP (metrics)")[:2] == (f"{receiver.endpoint}/v1/metrics", "reachable")
    assert "All 6 endpoints are reachable" in result.stdout


def test_a_wrong_protocol_is_named_as_such(stub):
    with HttpReceiver() as http_receiver, GrpcReceiver() as grpc_receiver:
        grpc_at_http = doctor(*everything_at(stub.url, otlp=http_receiver.endpoint))
        http_at_grpc = doctor(*everything_at(stub.url, otlp=grpc_receiver.endpoint), "--protocol", N.PROTOCOL_HTTP)
    assert grpc_at_http.returncode == http_at_grpc.returncode == 1
    assert row(grpc_at_http.stdout, "collector OTLP gRPC")[1:] == ("unreachable", "answers HTTP/1.x, not gRPC")
    assert "use --protocol http/protobuf" in hint_after(grpc_at_http.stdout, "collector OTLP gRPC")
    assert row(http_at_grpc.stdout, "collector OTLP/HTTP (traces)")[1:] == \
        ("unreachable", "closed the connection without an HTTP answer")
    assert "use --protocol grpc" in hint_after(http_at_grpc.stdout, "collector OTLP/HTTP (traces)")


@pytest.mark.parametrize("protocol", [N.PROTOCOL_GRPC, N.PROTOCOL_HTTP])
def test_an_endpoint_taking_traces_only_is_explained_as_jaegers(stub, protocol):
    """Jaeger's own OTLP port takes traces and refuses metrics as unimplemented (gRPC
    UNIMPLEMENTED, HTTP 404): the doctor says which signal goes through, and why not the other."""
    with RECEIVERS[protocol](traces_only=True) as receiver:
        result = doctor(*everything_at(stub.url, otlp=receiver.endpoint), "--protocol", protocol)
        asked = sorted(r.path for r in receiver.requests)
    assert result.returncode == 1, result.stdout
    status = {N.PROTOCOL_GRPC: "gRPC UNIMPLEMENTED", N.PROTOCOL_HTTP: "HTTP 404"}[protocol]
    if protocol == N.PROTOCOL_GRPC:
        name = "collector OTLP gRPC (traces, metrics)"
        assert asked == ["/v1/traces"], "traces were taken; the refused metrics call is not recorded"
    else:
        name = "collector OTLP/HTTP (metrics)"
        assert row(result.stdout, "collector OTLP/HTTP (traces)")[1] == "reachable"
        assert asked == ["/v1/traces", "/v1/traces"], "the traces row, and the metrics row's question about traces"
    assert row(result.stdout, name)[1:] == ("unreachable", f"accepts traces, but refuses metrics as unimplemented "
                                                           f"({status})")
    assert hint_after(result.stdout, name).startswith("Jaeger's OTLP port? it takes traces only")


def test_a_missing_metrics_receiver_is_not_called_jaeger_when_traces_are_refused_too(stub):
    with HttpReceiver() as receiver:
        result = doctor(*everything_at(stub.url, otlp=f"{receiver.endpoint}/elsewhere"), "--protocol", N.PROTOCOL_HTTP)
    assert row(result.stdout, "collector OTLP/HTTP (metrics)")[1:] == \
        ("unreachable", "HTTP 404: no OTLP receiver at this path")
    assert "Jaeger's OTLP port" not in result.stdout


def test_something_else_on_a_port_is_not_taken_for_the_service(stub):
    stub.routes["/api/services"] = Reply(body=b"<html>Grafana</html>")
    result = doctor(*everything_at(stub.url, otlp=f"http://127.0.0.1:{closed_port()}"), "--prometheus",
                    f"{stub.url}/prometheus")
    assert row(result.stdout, "Jaeger query API")[1:] == ("unreachable", "HTTP 200, but not Jaeger's JSON")
    assert row(result.stdout, "Prometheus")[1:] == ("unreachable", "HTTP 404")
    assert "not as Prometheus would" in hint_after(result.stdout, "Prometheus")


def test_urls_come_from_the_tracedagent_variables(stub):
    env = {N.ENV_COLLECTOR_HEALTH_URL: f"{stub.url}/", N.ENV_JAEGER_URL: stub.url, N.ENV_PROMETHEUS_URL: stub.url,
           N.ENV_ALERTMANAGER_URL: stub.url}
    result = doctor("--otlp", f"http://127.0.0.1:{closed_port()}", env=env)
    for name in SERVICES:
        assert row(result.stdout, name)[1] == "reachable", (name, result.stdout)


# --- secrets -------------------------------------------------------------------------------

def test_headers_and_url_credentials_are_sent_but_never_shown(stub):
    token, password = "s3cret-t0ken-value", "pa55-w0rd-value"
    with HttpReceiver() as receiver:
        result = doctor(*everything_at(stub.url, otlp=receiver.endpoint), "--protocol", N.PROTOCOL_HTTP,
                        "--jaeger", stub.url.replace("http://", f"http://reader:{password}@"),
                        env={N.ENV_OTLP_HEADERS: f"authorization=Bearer {token}"})
        assert all(h.get("authorization") == f"Bearer {token}" for h in receiver.headers()), "configure's headers go along"
    assert result.returncode == 0, result.stdout
    jaeger_headers = next(r.headers for r in stub.requests if r.path == "/api/services")
    assert jaeger_headers["authorization"].startswith("Basic ")
    assert token not in result.stdout + result.stderr and password not in result.stdout + result.stderr
    assert row(result.stdout, "Jaeger query API")[0] == f"{stub.url}/api/services"


def test_whatever_a_check_reports_has_the_secrets_blanked():
    secret = "hunter2-hunter2"
    check = _doctor.Check(name="x", url=f"http://user:{secret}@127.0.0.1:1/", service="jaeger",
                          secrets=frozenset({secret}),
                          probe=lambda timeout: _doctor.Outcome(reachable=False, detail=f"bad password {secret}",
                                                                hint=f"not {secret}"))
    (outcome,) = _doctor.run([check], timeout=1)
    assert outcome.detail == "bad password ***" and outcome.hint == "not ***"
    assert secret not in check.shown_url and repr(check).count(secret) == 1  # the URL field; secrets has repr=False


# --- which OTLP endpoints: the ones configure() exports to ------------------------------------

OTLP_VARIABLES = [N.ENV_OTLP_ENDPOINT, N.ENV_OTLP_TRACES_ENDPOINT, N.ENV_OTLP_METRICS_ENDPOINT, N.ENV_OTLP_PROTOCOL,
                  N.ENV_OTLP_TRACES_PROTOCOL, N.ENV_OTLP_METRICS_PROTOCOL, N.ENV_METRICS_EXPORTER, N.ENV_TRACES_EXPORTER]


def otlp_rows(**arguments: Any) -> list[tuple[str, str]]:
    checks = _doctor.plan(otlp=arguments.get("endpoint"), protocol=arguments.get("protocol"),
                          collector_health="http://h", jaeger="http://j", prometheus="http://p", alertmanager="http://a")
    return [(c.name, c.url) for c in checks if " OTLP" in c.name]


def exports_to(**arguments: Any) -> str:
    telemetry = configure(set_global=False, metrics=False, **arguments)
    try:
        return telemetry.endpoint
    finally:
        telemetry.shutdown(timeout=1)


@pytest.mark.parametrize("variables, arguments, expected", [
    ({}, {}, [("collector OTLP gRPC (traces, metrics)", N.DEFAULT_GRPC_ENDPOINT),
              ("collector OTLP/HTTP (traces)", f"{N.DEFAULT_HTTP_ENDPOINT}/v1/traces"),
              ("collector OTLP/HTTP (metrics)", f"{N.DEFAULT_HTTP_ENDPOINT}/v1/metrics")]),
    ({N.ENV_OTLP_PROTOCOL: N.PROTOCOL_HTTP}, {},
     [("collector OTLP/HTTP (traces)", f"{N.DEFAULT_HTTP_ENDPOINT}/v1/traces"),
      ("collector OTLP/HTTP (metrics)", f"{N.DEFAULT_HTTP_ENDPOINT}/v1/metrics")]),
    ({N.ENV_OTLP_ENDPOINT: "http://collector.internal:4317"}, {},
     [("collector OTLP gRPC (traces, metrics)", "http://collector.internal:4317")]),
    ({N.ENV_OTLP_ENDPOINT: "http://collector.internal:4317", N.ENV_METRICS_EXPORTER: "none"}, {},
     [("collector OTLP gRPC (traces)", "http://collector.internal:4317")]),
    ({N.ENV_OTLP_TRACES_ENDPOINT: "https://traces.example/v1/traces", N.ENV_OTLP_PROTOCOL: N.PROTOCOL_HTTP}, {},
     [("collector OTLP/HTTP (traces)", "https://traces.example/v1/traces"),
      ("collector OTLP/HTTP (metrics)", f"{N.DEFAULT_HTTP_ENDPOINT}/v1/metrics")]),
    ({N.ENV_OTLP_ENDPOINT: "http://ignored:4317"}, {"endpoint": "http://10.0.0.5:4318", "protocol": N.PROTOCOL_HTTP},
     [("collector OTLP/HTTP (traces)", "http://10.0.0.5:4318/v1/traces"),
      ("collector OTLP/HTTP (metrics)", "http://10.0.0.5:4318/v1/metrics")]),
])
def test_doctor_checks_where_configure_exports(monkeypatch, variables, arguments, expected):
    for name in OTLP_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert otlp_rows(**arguments) == expected
    assert exports_to(**arguments) in [url for _, url in expected], "configure sends its spans to a checked URL"


def test_doctor_skips_the_receiver_of_a_signal_that_is_off(monkeypatch):
    for name in OTLP_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(N.ENV_OTLP_ENDPOINT, "http://collector.internal:4317")
    monkeypatch.setenv(N.ENV_TRACES_EXPORTER, "none")
    assert otlp_rows() == [("collector OTLP gRPC (metrics)", "http://collector.internal:4317")]
    monkeypatch.setenv(N.ENV_METRICS_EXPORTER, "none")
    assert otlp_rows() == []


def test_a_credential_in_a_query_is_not_shown(monkeypatch):
    secret = "QUERYSECRET12345"
    for name in OTLP_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(N.ENV_OTLP_TRACES_ENDPOINT, f"http://collector.example:4318/v1/traces?api_key={secret}&x=1")
    checks = _doctor.plan(otlp=None, protocol=N.PROTOCOL_HTTP, collector_health="http://h",
                          jaeger="http://j", prometheus="http://p", alertmanager="http://a")
    shown = [check.shown_url for check in checks]
    assert "http://collector.example:4318/v1/traces?api_key=***&x=1" in shown
    assert all(secret not in url for url in shown), shown
    assert all(secret in check.secrets for check in checks if secret in check.url), "blanked from what they report"


def test_a_secret_is_blanked_before_an_answer_is_cut_to_length():
    """A probe quotes at most 200 characters of an error; cut first, a secret straddling the cut
    would not be recognised by the doctor's redaction, and its first part shown."""
    from tracedagent._export._probe import http_failure

    secret = "hunter2-hunter2-hunter2-hunter2-hunter2"
    check = _doctor.Check(name="x", url=f"http://user:{secret}@127.0.0.1:1/", service="jaeger",
                          secrets=frozenset({secret}),
                          probe=lambda timeout: _doctor._outcome(http_failure(
                              RuntimeError("x" * 180 + secret), timeout, frozenset({secret}))))
    (outcome,) = _doctor.run([check], timeout=1)
    assert secret[:6] not in outcome.detail and outcome.detail.endswith("***"), outcome.detail


@pytest.mark.parametrize("insecure, reachable", [(None, False), ("true", True)])
def test_a_grpc_endpoint_without_scheme_is_checked_with_tls_unless_insecure(stub, insecure, reachable):
    """The SDK exporter dials ``host:4317`` with TLS unless OTEL_EXPORTER_OTLP_INSECURE is true: a
    plaintext receiver does not take those exports, and the doctor must not call it reachable."""
    with GrpcReceiver() as receiver:
        address = receiver.endpoint.removeprefix("http://")
        result = doctor(*everything_at(stub.url, otlp=address), "--protocol", N.PROTOCOL_GRPC,
                        env={"OTEL_EXPORTER_OTLP_INSECURE": insecure} if insecure else {})
    url, status, _ = row(result.stdout, "collector OTLP gRPC")
    assert (url, status) == (f"{'http' if reachable else 'https'}://{address}",
                             "reachable" if reachable else "unreachable"), result.stdout
    if not reachable:
        assert "OTEL_EXPORTER_OTLP_INSECURE=true" in result.stdout


# --- Temporal: checked only when named ------------------------------------------------------

def test_temporal_is_checked_only_when_an_address_is_named(monkeypatch):
    monkeypatch.delenv(N.ENV_TEMPORAL_ADDRESS, raising=False)
    names = [c.name for c in _doctor.plan(otlp=None, protocol=None, collector_health="http://h", jaeger="http://j",
                                          prometheus="http://p", alertmanager="http://a")]
    assert "Temporal frontend" not in names
    checks = _doctor.plan(otlp=None, protocol=None, collector_health="http://h", jaeger="http://j",
                          prometheus="http://p", alertmanager="http://a", temporal="127.0.0.1:7233")
    assert [c.name for c in checks][-1] == "Temporal frontend" and checks[-1].service == "temporal"


def test_a_temporal_address_from_the_variable_that_nothing_answers_is_unreachable_with_how_to_start_it():
    port = closed_port()
    result = doctor("--otlp", f"http://127.0.0.1:{closed_port()}", "--timeout", "0.5",
                    env={N.ENV_TEMPORAL_ADDRESS: f"127.0.0.1:{port}"})
    assert result.returncode == 1
    row = next(line for line in result.stdout.splitlines() if "Temporal frontend" in line)
    assert f"127.0.0.1:{port}" in row and "unreachable" in row and "gRPC UNAVAILABLE" in row
    assert "make stack-up" in result.stdout


def test_a_grpc_server_that_is_not_temporal_is_named_for_what_it_is():
    """The collector's OTLP gRPC receiver answers gRPC but has no health service."""
    with GrpcReceiver() as receiver:
        result = doctor("--otlp", receiver.endpoint, "--timeout", "2", "--temporal", receiver.endpoint.split("//")[-1])
    row = next(line for line in result.stdout.splitlines() if "Temporal frontend" in line)
    assert "unreachable" in row and "no health check" in row


def test_a_pip_install_is_told_tracedagent_stack_and_a_clone_make_stack_up(monkeypatch, tmp_path):
    """A pip user has no Makefile and no collector/README.md: the hints name `tracedagent stack`
    (tests/test_release.py runs the doctor of a real wheel's files too)."""
    from tracedagent._export import _endpoints

    assert _endpoints.in_a_clone()  # these tests run in a clone
    assert "make stack-up" in _endpoints.start_service("jaeger")
    assert "make stack-up" in _endpoints.start_the_stack() and "collector/README.md" in _endpoints.start_the_stack()
    monkeypatch.setattr(_endpoints, "_REPOSITORY", tmp_path / "site-packages")
    assert not _endpoints.in_a_clone()
    for hint in (_endpoints.start_service("jaeger"), _endpoints.start_the_stack()):
        assert "make" not in hint and "collector/README.md" not in hint and "tracedagent stack" in hint, hint
    assert "docker compose up -d jaeger" in _endpoints.start_service("jaeger")
    assert "tracedagent stack tracedagent-stack && cd tracedagent-stack && docker compose up -d" in \
        _endpoints.start_the_stack()


def test_with_temporal_named_the_doctor_shows_the_queries_that_find_runs_and_the_ui():
    lines = _doctor.temporal_queries("127.0.0.1:7233")
    text = "\n".join(lines)
    assert "temporal workflow list --address 127.0.0.1:7233 --query 'TracedAgentWaiting=true'" in text
    for name in N.TEMPORAL_SEARCH_ATTRIBUTES:
        assert f"--query \"{name}=" in text or f"--query '{name}=" in text, name
    assert "http://127.0.0.1:8233" in text
    result = doctor("--otlp", f"http://127.0.0.1:{closed_port()}", "--timeout", "0.5", "--temporal",
                    f"127.0.0.1:{closed_port()}")
    assert "TracedAgentWaiting=true" in result.stdout
    without = doctor("--otlp", f"http://127.0.0.1:{closed_port()}", "--timeout", "0.5")
    assert "TracedAgentWaiting" not in without.stdout
