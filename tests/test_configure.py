"""``configure()``: what reaches a real OTLP receiver, what the environment decides, and what
happens when no collector is listening.

OpenTelemetry's global providers can be set once per process, so every test of the global
path runs its script in a subprocess; the others use ``set_global=False``. The receivers
(``otlp_receivers.py``) are real servers on 127.0.0.1: a stdlib HTTP one and a gRPC one.
No test here times anything: ``benchmarks/exit_time.py`` measures exit times.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as PlainHttpSpanExporter
from opentelemetry.metrics import NoOpMeterProvider

from _fake_servers import Reply, closed_port, serve
from otlp_receivers import GrpcReceiver, HttpReceiver
from sample_tools import add
from tracedagent import Agent, configure
from tracedagent._core import _names as N
from tracedagent.testing import FakeModel, Recorder, tool_call

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = [N.PROTOCOL_GRPC, N.PROTOCOL_HTTP]
RECEIVERS = {N.PROTOCOL_GRPC: GrpcReceiver, N.PROTOCOL_HTTP: HttpReceiver}
SECRET = "s3cr3t-api-key-7f1c"
CANNOT_REACH = "cannot reach the collector"


def make_agent(**providers: object) -> Agent:
    """A two-step run: one tool call, then the answer (fixed call id, so runs compare equal)."""
    model = FakeModel([tool_call("add", {"a": 2, "b": 3}, id="call_1"), "The sum is 5."])
    return Agent(model, [add], **providers)


def summary(run: object) -> list:
    """Everything a caller sees of a run, except the trace id (which only exists with an SDK)."""
    return [run.output, run.stop.value, run.step_count, run.trajectory(), run.input_tokens,  # type: ignore[attr-defined]
            run.output_tokens, run.cost, json.loads(json.dumps(run.messages, default=str))]  # type: ignore[attr-defined]


def expected_span_names() -> list[str]:
    recorder = Recorder()
    make_agent(**recorder.providers).run("add 2 and 3")
    return sorted(span.name for span in recorder.spans())


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever OTEL_* variables the machine has must not decide these tests."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


def run_script(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that imports this worktree's tracedagent."""
    return subprocess.run(**script(code, **env), capture_output=True, timeout=120)


def script(code: str, **env: str) -> dict:
    """``subprocess`` arguments running ``code`` after a prelude that defines ``make_agent`` and ``summary``."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACEDAGENT_"))}
    environment.update(env, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    prelude = textwrap.dedent("""
        import json, sys
        from sample_tools import add
        from tracedagent import Agent, configure
        from tracedagent.testing import FakeModel, tool_call

        def make_agent(**providers):
            return Agent(FakeModel([tool_call("add", {"a": 2, "b": 3}, id="call_1"), "The sum is 5."]), [add],
                         **providers)

        def summary(run):
            return [run.output, run.stop.value, run.step_count, run.trajectory(), run.input_tokens,
                    run.output_tokens, run.cost, json.loads(json.dumps(run.messages, default=str))]
    """)
    return {"args": [sys.executable, "-c", prelude + textwrap.dedent(code)], "cwd": ROOT, "env": environment,
            "text": True}


# --- what arrives at a real receiver ------------------------------------------------------

@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_spans_metrics_resource_and_headers_arrive(protocol: str) -> None:
    with RECEIVERS[protocol]() as receiver:
        telemetry = configure(protocol=protocol, endpoint=receiver.endpoint, service_name="billing-agent",
                              resource_attributes={"deployment.environment.name": "test"},
                              headers={"X-Api-Key": SECRET}, set_global=False)
        run = make_agent(**telemetry.providers).run("add 2 and 3")
        assert telemetry.shutdown() is True

    spans = receiver.spans()
    assert sorted(s.name for s in spans) == expected_span_names()
    run_span = next(s for s in spans if s.name == "invoke_agent agent")
    assert run_span.attributes[N.STOP_REASON] == "answered"
    assert run_span.span_id.hex() and run.trace_id  # a recording SDK was behind the run
    for span in spans:
        assert span.resource["service.name"] == "billing-agent"
        assert span.resource["deployment.environment.name"] == "test"
    assert all(h["x-api-key"] == SECRET for h in receiver.headers()), "gRPC needs the key lower-cased"
    assert {N.METRIC_RUNS, N.METRIC_TOOL_CALLS, N.METRIC_TOKEN_USAGE} <= receiver.metric_names()
    assert all(r["service.name"] == "billing-agent" for r in receiver.metric_resources())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_standard_variables_decide_when_no_argument_does(protocol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with RECEIVERS[protocol]() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"x-api-key={SECRET},x-team=obs")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=ci,team=obs")
        telemetry = configure(set_global=False)
        make_agent(**telemetry.providers).run("add 2 and 3")
        telemetry.shutdown()

    assert telemetry.protocol == protocol
    assert telemetry.service_name == "from-env"
    spans = receiver.spans()
    assert sorted(s.name for s in spans) == expected_span_names()
    assert spans[0].resource["service.name"] == "from-env"
    assert spans[0].resource["team"] == "obs"
    assert receiver.headers()[0]["x-api-key"] == SECRET
    assert receiver.headers()[0]["x-team"] == "obs"
    assert N.METRIC_RUNS in receiver.metric_names()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_arguments_override_the_variables(protocol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    other = N.PROTOCOL_HTTP if protocol == N.PROTOCOL_GRPC else N.PROTOCOL_GRPC
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", other)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=from-env,x-team=obs")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=ci")
    with RECEIVERS[protocol]() as receiver:
        telemetry = configure(protocol=protocol, endpoint=receiver.endpoint, service_name="from-argument",
                              headers={"X-Api-Key": "from-argument"},
                              resource_attributes={"deployment.environment.name": "test"}, set_global=False)
        make_agent(**telemetry.providers).run("add 2 and 3")
        telemetry.shutdown()

    spans = receiver.spans()
    assert spans, "the argument's endpoint and protocol were not used"
    assert spans[0].resource["service.name"] == "from-argument"
    assert spans[0].resource["deployment.environment.name"] == "test"
    headers = receiver.headers()[0]
    assert headers["x-api-key"] == "from-argument"
    assert headers["x-team"] == "obs", "argument headers are merged over the variable's, not instead of them"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_signal_specific_endpoints_are_left_to_the_sdk(protocol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with RECEIVERS[protocol]() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
        signal_url = {N.PROTOCOL_GRPC: receiver.endpoint, N.PROTOCOL_HTTP: f"{receiver.endpoint}/v1/traces"}[protocol]
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", signal_url)
        telemetry = configure(metrics=False, set_global=False)
        make_agent(**telemetry.providers).run("add 2 and 3")
        telemetry.shutdown()

    assert telemetry.endpoint == signal_url
    assert sorted(s.name for s in receiver.spans()) == expected_span_names()


@pytest.mark.parametrize("argument, variable, expected", [
    ("2.4.1", None, "2.4.1"),
    (None, "2.4.0-rc1", "2.4.0-rc1"),
    ("2.4.1", "2.4.0-rc1", "2.4.1"),
    (None, None, None),
])
def test_service_version_from_the_argument_over_the_variable(argument: str | None, variable: str | None,
                                                              expected: str | None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    if variable is not None:
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"service.version={variable},team=obs")
    with HttpReceiver() as receiver:
        telemetry = configure(protocol="http/protobuf", endpoint=receiver.endpoint, service_version=argument,
                              set_global=False)
        make_agent(**telemetry.providers).run("add 2 and 3")
        assert telemetry.shutdown()
    resources = [span.resource for span in receiver.spans()] + receiver.metric_resources()
    assert resources and all(r.get("service.version") == expected for r in resources)
    assert all(r["service.name"] == "tracedagent" for r in resources)


def test_defaults_are_the_local_collector_and_the_tracedagent_service() -> None:
    telemetry = configure(set_global=False)
    try:
        assert (telemetry.protocol, telemetry.endpoint) == ("grpc", "http://127.0.0.1:4317")
        assert telemetry.service_name == "tracedagent"
        assert telemetry.tracer_provider.resource.attributes["service.name"] == "tracedagent"  # type: ignore[attr-defined]
    finally:
        telemetry.shutdown(timeout=0.5)
    http = configure(protocol="http/protobuf", set_global=False)
    http.shutdown(timeout=0.5)
    assert http.endpoint == "http://127.0.0.1:4318/v1/traces"


def test_signal_specific_protocol_variable_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    telemetry = configure(metrics=False, set_global=False)
    telemetry.shutdown(timeout=0.5)
    assert (telemetry.protocol, telemetry.endpoint) == ("http/protobuf", "http://127.0.0.1:4318/v1/traces")


def test_unknown_protocol_argument_is_refused() -> None:
    with pytest.raises(ValueError, match="http/json"):
        configure(protocol="http/json", set_global=False)


@pytest.mark.parametrize("endpoint", ["http://[::1", f"http://user:{SECRET}@127.0.0.1:99999"])
def test_an_endpoint_that_is_not_a_url_is_refused_naming_its_source_not_its_value(
        endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"^endpoint is not a usable URL") as argument:
        configure(endpoint=endpoint, set_global=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    with pytest.raises(ValueError, match=r"^OTEL_EXPORTER_OTLP_ENDPOINT is not a usable URL") as variable:
        configure(set_global=False)
    assert SECRET not in str(argument.value) + str(variable.value)


def test_unknown_protocol_variable_falls_back_with_a_warning(monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    telemetry = configure(metrics=False, set_global=False)
    telemetry.shutdown(timeout=0.5)
    assert telemetry.protocol == "grpc"
    assert any("http/json" in r.getMessage() for r in caplog.records if r.name == "tracedagent")


def test_traces_can_be_turned_off_by_the_standard_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    with HttpReceiver() as receiver:
        telemetry = configure(protocol="http/protobuf", endpoint=receiver.endpoint, set_global=False)
        run = make_agent(**telemetry.providers).run("add 2 and 3")
        assert telemetry.shutdown()
    assert run.ok and run.trace_id, "the run and its trace id do not depend on exporting"
    assert (telemetry.endpoint, telemetry.protocol, telemetry.spans_exported) == (None, None, 0)
    assert receiver.spans() == [] and N.METRIC_RUNS in receiver.metric_names()


@pytest.mark.parametrize("how", ["argument", "variable"])
def test_metrics_can_be_turned_off(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "variable":
        monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    with HttpReceiver() as receiver:
        telemetry = configure(protocol="http/protobuf", endpoint=receiver.endpoint, set_global=False,
                              **({"metrics": False} if how == "argument" else {}))
        make_agent(**telemetry.providers).run("add 2 and 3")
        telemetry.shutdown()
    assert isinstance(telemetry.meter_provider, NoOpMeterProvider)
    assert receiver.spans() and not receiver.metric_names()


def test_context_manager_shuts_down_and_flushes() -> None:
    with HttpReceiver() as receiver:
        with configure(protocol="http/protobuf", endpoint=receiver.endpoint, set_global=False) as telemetry:
            make_agent(**telemetry.providers).run("add 2 and 3")
            assert receiver.spans() == [], "spans are batched, not sent one by one"
        assert sorted(s.name for s in receiver.spans()) == expected_span_names()
        assert telemetry.shutdown() is True  # a second shutdown is a no-op


def test_force_flush_delivers_while_the_pipeline_stays_up() -> None:
    with GrpcReceiver() as receiver:
        telemetry = configure(endpoint=receiver.endpoint, set_global=False)
        make_agent(**telemetry.providers).run("add 2 and 3")
        assert telemetry.force_flush() is True
        first = len(receiver.spans())
        make_agent(**telemetry.providers).run("add 2 and 3")
        telemetry.shutdown()
    assert first == len(expected_span_names())
    assert len(receiver.spans()) == 2 * first


# --- no collector ----------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_collector_down_changes_no_result_and_warns_once(protocol: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tracedagent")
    baseline = [summary(make_agent().run("add 2 and 3")) for _ in range(20)]  # no SDK at all

    port = closed_port()
    telemetry = configure(protocol=protocol, endpoint=f"http://127.0.0.1:{port}", export_timeout=0.5,
                          headers={"authorization": f"Bearer {SECRET}"}, set_global=False)
    agent_runs = []
    for _ in range(20):
        agent_runs.append(summary(make_agent(**telemetry.providers).run("add 2 and 3")))
        telemetry.force_flush()  # one failed export per run: twenty batches
    assert agent_runs == baseline

    ours = [r for r in caplog.records if r.name == "tracedagent"]
    assert [r.levelno for r in ours] == [logging.WARNING]
    assert CANNOT_REACH in ours[0].getMessage() and f"127.0.0.1:{port}" in ours[0].getMessage()
    assert [r for r in caplog.records if r.name.startswith("opentelemetry") and r.levelno >= logging.WARNING] == []

    # The collector comes up on that port: exports resume, and that is said once.
    with RECEIVERS[protocol](port) as receiver:
        make_agent(**telemetry.providers).run("add 2 and 3")
        telemetry.force_flush()
        make_agent(**telemetry.providers).run("add 2 and 3")
        telemetry.shutdown()
    assert len(receiver.spans()) == 2 * len(expected_span_names())
    infos = [r.getMessage() for r in caplog.records if r.name == "tracedagent" and r.levelno == logging.INFO]
    assert len(infos) == 1 and "reconnected" in infos[0]
    assert all(SECRET not in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_hung_collector_cannot_hold_shutdown(protocol: str, caplog: pytest.LogCaptureFixture) -> None:
    """A collector that accepts connections but never answers: shutdown gives up, says so once."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)  # never accepted
        telemetry = configure(protocol=protocol, endpoint=f"http://127.0.0.1:{listener.getsockname()[1]}",
                              export_timeout=30, set_global=False)
        run = make_agent(**telemetry.providers).run("add 2 and 3")
        assert telemetry.shutdown(timeout=0.5) is False
    assert run.ok
    ours = [r.getMessage() for r in caplog.records if r.name == "tracedagent"]
    assert len(ours) == 1 and CANNOT_REACH in ours[0] and "no answer within 0.5 s" in ours[0]


def warnings_of_one_run(caplog: pytest.LogCaptureFixture, **arguments: object) -> list[str]:
    """What tracedagent logs for one run exported by ``configure(**arguments)``, flushed and shut down."""
    telemetry = configure(set_global=False, **arguments)  # type: ignore[arg-type]
    make_agent(**telemetry.providers).run("add 2 and 3")
    telemetry.force_flush()
    telemetry.shutdown(timeout=0.5)
    return [r.getMessage() for r in caplog.records if r.name == "tracedagent"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_endpoint_taking_traces_only_gets_one_warning_about_metrics_alone(protocol: str,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    """Jaeger's own OTLP port takes traces and answers metrics exports with UNIMPLEMENTED (gRPC)
    or 404 (HTTP): every span arrives, and the warning says so of metrics, not of the collector."""
    caplog.set_level(logging.INFO, logger="tracedagent")
    with RECEIVERS[protocol](traces_only=True) as receiver:
        telemetry = configure(protocol=protocol, endpoint=receiver.endpoint, set_global=False)
        for _ in range(3):
            make_agent(**telemetry.providers).run("add 2 and 3")
            telemetry.force_flush()
        assert telemetry.shutdown()
    assert len(receiver.spans()) == telemetry.spans_exported == 3 * len(expected_span_names())
    assert receiver.metric_names() == set()
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "tracedagent"]
    what_happened = warning.split(";")[0]
    assert f"metrics export to {receiver.endpoint} refused as unimplemented" in what_happened
    assert "traces" not in what_happened and CANNOT_REACH not in warning
    assert "metrics are being dropped" in warning and "Jaeger" in warning


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("collector, happened", [("closed", "unreachable: connection refused"),
                                                 ("hung", "timed out: no answer within")])
def test_an_outage_warning_names_the_signal_and_what_happened(protocol: str, collector: str, happened: str,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")  # metrics alone: the warning must not say traces
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        if collector == "hung":
            listener.listen(8)  # accepts connections, never answers
        port = listener.getsockname()[1]
        (warning,) = warnings_of_one_run(caplog, protocol=protocol, endpoint=f"http://127.0.0.1:{port}",
                                         export_timeout=0.5)
    assert f"{CANNOT_REACH} at http://127.0.0.1:{port} (metrics export {happened}" in warning


@pytest.mark.parametrize("status, happened", [(401, "unauthorized (HTTP 401: credentials refused)"),
                                              (500, "failed (HTTP 500)")])
def test_a_refused_export_warning_names_the_signal_and_the_status(status: int, happened: str,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    with serve(*[Reply(status=status)] * 4) as server:
        (warning,) = warnings_of_one_run(caplog, protocol=N.PROTOCOL_HTTP, endpoint=server.url, metrics=False)
    assert f"traces export to {server.url} {happened}; traces are being dropped" in warning
    assert CANNOT_REACH not in warning


def test_a_wrong_protocol_is_named_in_the_warning(caplog: pytest.LogCaptureFixture) -> None:
    with HttpReceiver() as receiver:
        (warning,) = warnings_of_one_run(caplog, protocol=N.PROTOCOL_GRPC, endpoint=receiver.endpoint, metrics=False)
    assert f"traces export to {receiver.endpoint} not understood (answers HTTP/1.x, not gRPC)" in warning
    assert N.ENV_OTLP_PROTOCOL in warning


def test_the_outage_warning_names_what_a_pip_user_has_to_start_the_stack(caplog: pytest.LogCaptureFixture) -> None:
    """An application installed with pip has no Makefile: the warning names Docker Compose and the doctor."""
    (warning,) = warnings_of_one_run(caplog, endpoint=f"http://127.0.0.1:{closed_port()}", export_timeout=0.5)
    assert "`docker compose up -d`" in warning and "`tracedagent doctor`" in warning
    assert "make" not in warning


def test_only_our_exporters_are_quieted(caplog: pytest.LogCaptureFixture) -> None:
    """An application's own OTLP exporter, failing in the same process, still logs as the SDK does."""
    telemetry = configure(protocol="http/protobuf", endpoint=f"http://127.0.0.1:{closed_port()}",
                          export_timeout=0.5, set_global=False)
    try:
        plain = PlainHttpSpanExporter(endpoint=f"http://127.0.0.1:{closed_port()}/v1/traces", timeout=0.5)
        plain.export([])  # an empty batch is still a request
        assert any(r.name.startswith("opentelemetry.exporter") and r.levelno >= logging.WARNING
                   for r in caplog.records)
    finally:
        telemetry.shutdown(timeout=0.5)


def test_headers_never_appear_in_logs_or_repr(monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"x-env-key={SECRET}")
    port = closed_port()
    telemetry = configure(endpoint=f"http://user:{SECRET}@127.0.0.1:{port}", headers={"x-arg-key": SECRET},
                          export_timeout=0.5, set_global=False)
    make_agent(**telemetry.providers).run("add 2 and 3")
    telemetry.force_flush()
    telemetry.shutdown(timeout=0.5)
    assert any(CANNOT_REACH in r.getMessage() for r in caplog.records)
    assert all(SECRET not in r.getMessage() for r in caplog.records)
    assert SECRET not in repr(telemetry)


def test_a_grpc_endpoint_with_credentials_exports_without_them_and_says_so(
        caplog: pytest.LogCaptureFixture) -> None:
    """A gRPC call has no place for ``user:password@``: the SDK would dial it as part of the host
    name and export nothing. It is left out, with one warning that never quotes it."""
    with GrpcReceiver() as receiver:
        endpoint = receiver.endpoint.replace("http://", f"http://user:{SECRET}@")
        telemetry = configure(endpoint=endpoint, set_global=False)
        make_agent(**telemetry.providers).run("add 2 and 3")
        assert telemetry.shutdown()
    assert sorted(s.name for s in receiver.spans()) == expected_span_names()
    assert telemetry.endpoint == receiver.endpoint
    ours = [r.getMessage() for r in caplog.records if r.name == "tracedagent"]
    assert len(ours) == 1 and "user:password@" in ours[0] and "headers" in ours[0], ours
    assert SECRET not in repr(telemetry) + "".join(ours)


@pytest.mark.parametrize("endpoint, variables, tls", [
    ("127.0.0.1:{port}", {}, True),                                              # no scheme: TLS, as the spec says
    ("127.0.0.1:{port}", {"OTEL_EXPORTER_OTLP_INSECURE": "true"}, False),
    ("127.0.0.1:{port}", {"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "TRUE", "OTEL_EXPORTER_OTLP_INSECURE": "false"}, False),
    ("http://127.0.0.1:{port}", {"OTEL_EXPORTER_OTLP_INSECURE": "false"}, False),  # a scheme wins over the variable
])
def test_a_grpc_endpoint_is_shown_and_dialled_with_tls_or_without_as_the_specification_says(
        endpoint: str, variables: dict[str, str], tls: bool, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The SDK dials an endpoint without a scheme with TLS unless INSECURE is true, and (unlike the
    specification) applies INSECURE=false to ``http://`` too: tracedagent decides as the
    specification does, tells the exporter, and shows the scheme that is used."""
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with GrpcReceiver() as receiver:  # plaintext
        port = receiver.endpoint.rsplit(":", 1)[1]
        telemetry = configure(endpoint=endpoint.format(port=port), metrics=False, export_timeout=1, set_global=False)
        make_agent(**telemetry.providers).run("add 2 and 3")
        telemetry.force_flush()
        telemetry.shutdown(timeout=1)
    assert telemetry.endpoint == f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    if tls:
        assert receiver.spans() == []
        (warning,) = [r.getMessage() for r in caplog.records if r.name == "tracedagent"]
        assert "failed its TLS handshake" in warning and "OTEL_EXPORTER_OTLP_INSECURE=true" in warning
    else:
        assert sorted(s.name for s in receiver.spans()) == expected_span_names()


@pytest.mark.parametrize("variable, value, export_timeout, warned", [
    ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "abc", None, True),
    ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "abc", 1.0, False),     # the argument wins: the variable is not used
    ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "", None, False),       # empty means unset
    ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "5s", None, True),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "-1", None, True),
    ("OTEL_EXPORTER_OTLP_COMPRESSION", "brotli", None, True),
    ("OTEL_EXPORTER_OTLP_COMPRESSION", "none", None, False),      # the specification's; the SDK's gRPC exporter raises
    ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "", None, False),
])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_unusable_timeout_or_compression_variable_is_one_warning_not_an_exception(
        protocol: str, variable: str, value: str, export_timeout: float | None, warned: bool,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The gRPC exporters call ``float()`` on the timeout variables even when given a timeout, and
    raise on a compression they do not know: configure() must not fail the application."""
    monkeypatch.setenv(variable, value)
    with RECEIVERS[protocol]() as receiver:
        telemetry = configure(protocol=protocol, endpoint=receiver.endpoint, export_timeout=export_timeout,
                              set_global=False)
        make_agent(**telemetry.providers).run("add 2 and 3")
        assert telemetry.shutdown()
    assert sorted(s.name for s in receiver.spans()) == expected_span_names()
    assert os.environ[variable] == value, "the variable is as it was"
    ours = [r.getMessage() for r in caplog.records if r.name == "tracedagent"]
    if warned:  # once, though both signals read it
        assert len(ours) == 1 and ours[0].startswith(f"tracedagent: {variable}={value!r} is not "), ours
    else:
        assert ours == []


@contextlib.contextmanager
def refusing_batches(reason: str) -> Iterator[str]:
    """An OTLP/HTTP endpoint that takes an empty export (what the warning's probe sends) and
    answers any other with HTTP 400 and ``reason`` as the status line's reason, which the SDK
    quotes in its error; its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's naming
            empty = not self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200, "OK") if empty else self.send_response(400, reason)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_secret_cut_by_the_quote_limit_is_still_blanked(caplog: pytest.LogCaptureFixture) -> None:
    """The SDK's error text is quoted to 300 characters; blanked only after the cut, the part of a
    secret before it would no longer match, and be shown."""
    password = "Pw0rd-of-forty-characters-1234567890abcd"
    with refusing_batches(password * 10) as url:  # one occurrence straddles the cut wherever it is
        endpoint = url.replace("http://", f"http://alice:{password}@")
        (warning,) = warnings_of_one_run(caplog, protocol=N.PROTOCOL_HTTP, endpoint=endpoint, metrics=False)
    assert "failed (Failed to export" in warning and "***" in warning, warning
    assert password[:6] not in warning, warning


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"])
def test_a_credential_in_the_endpoints_query_is_not_shown(variable: str, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    port = closed_port()
    url = f"http://127.0.0.1:{port}/v1/traces" if variable.endswith("TRACES_ENDPOINT") else f"http://127.0.0.1:{port}"
    monkeypatch.setenv(variable, f"{url}?api_key={SECRET}&region=eu")
    telemetry = configure(protocol=N.PROTOCOL_HTTP, metrics=False, export_timeout=0.5, set_global=False)
    make_agent(**telemetry.providers).run("add 2 and 3")
    telemetry.shutdown(timeout=0.5)
    assert SECRET not in repr(telemetry) + telemetry.endpoint
    assert "api_key=***&region=eu" in telemetry.endpoint
    assert all(SECRET not in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("base", ["http://collector:4318?api_key=k-123&region=eu", "http://collector:4318/?api_key=k-123&region=eu"])
def test_the_signal_path_goes_into_an_http_endpoints_path_not_its_query(base: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from tracedagent._export._endpoints import export_target

    assert export_target("traces", endpoint=base, protocol=N.PROTOCOL_HTTP).url == \
        "http://collector:4318/v1/traces?api_key=k-123&region=eu"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", base)
    assert export_target("metrics", protocol=N.PROTOCOL_HTTP).url == \
        "http://collector:4318/v1/metrics?api_key=k-123&region=eu"


# --- the global path: one subprocess each -------------------------------------------------------

@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_process_with_collector_down_exits_cleanly_with_one_warning(protocol: str) -> None:
    work = """
        runs = [summary(make_agent().run("add 2 and 3")) for _ in range(20)]
        print(json.dumps(runs))
    """
    baseline = run_script(work)
    configured = run_script(f"""
        telemetry = configure(protocol={protocol!r}, endpoint="http://127.0.0.1:{closed_port()}",
                              headers={{"authorization": "Bearer {SECRET}"}}, export_timeout=0.5)
        runs = []
        for _ in range(20):
            runs.append(summary(make_agent().run("add 2 and 3")))
            telemetry.force_flush()
        print(json.dumps(runs))
        # no shutdown: the atexit hook flushes, bounded
    """)
    assert baseline.returncode == 0, baseline.stderr
    assert configured.returncode == 0, configured.stderr
    assert json.loads(configured.stdout) == json.loads(baseline.stdout)
    lines = configured.stderr.splitlines()
    assert len([line for line in lines if CANNOT_REACH in line]) == 1, configured.stderr
    assert len(lines) == 1, f"nothing but the one warning on stderr:\n{configured.stderr}"
    assert SECRET not in configured.stderr


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_global_configure_is_idempotent_and_flushes_at_exit(protocol: str) -> None:
    with RECEIVERS[protocol]() as receiver:
        result = run_script(f"""
            from opentelemetry import metrics, trace
            first = configure(protocol={protocol!r}, endpoint={receiver.endpoint!r})
            second = configure(protocol={protocol!r}, endpoint={receiver.endpoint!r})
            third = configure(protocol={protocol!r}, endpoint={receiver.endpoint!r}, service_name="other")
            assert first is second is third
            assert trace.get_tracer_provider() is first.tracer_provider
            assert metrics.get_meter_provider() is first.meter_provider
            make_agent().run("add 2 and 3")  # the global providers, as an application would use them
            # no shutdown: the atexit hook flushes
        """)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("configure() was already called") == 1, result.stderr
    assert "service_name" in result.stderr
    assert "was shut down" not in result.stderr
    spans = receiver.spans()
    assert len({s.span_id for s in spans}) == len(spans), "a second configure() added a second exporter"
    assert sorted(s.name for s in spans) == expected_span_names()
    assert N.METRIC_RUNS in receiver.metric_names()


def test_every_pipeline_of_a_process_shares_one_exit_bound() -> None:
    """Four ``set_global=False`` pipelines and a hung collector: each flushing at exit within a
    bound of its own, one after another, the exit would wait four bounds. The deadline each
    shutdown is given must fall within one bound of the first starting, or, for one that
    starts after that (Python 3.12 refuses new threads at exit, so they run one after
    another), it is given no time at all (no wall-clock timing)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)  # accepts connections, never answers
        result = run_script(f"""
            import os, time
            from tracedagent._export import _configure
            shutdown = _configure.Telemetry.shutdown

            def recorded(self, timeout=2.0):
                os.write(1, f"{{time.monotonic()}} {{timeout}}\\n".encode())  # one write: they run at once
                return shutdown(self, timeout)

            _configure.Telemetry.shutdown = recorded
            for _ in range(4):
                telemetry = configure(endpoint="http://127.0.0.1:{listener.getsockname()[1]}", set_global=False)
                make_agent(**telemetry.providers).run("add 2 and 3")
            # no shutdown: the atexit hook flushes, bounded
        """)
    assert result.returncode == 0, result.stderr
    calls = [tuple(map(float, line.split())) for line in result.stdout.splitlines()]
    assert len(calls) == 4, result.stdout
    first = min(started for started, _ in calls)
    assert all(started + timeout - first <= N.EXIT_FLUSH_TIMEOUT + 0.05 or timeout == 0.0
               for started, timeout in calls), calls


def test_configure_after_a_shutdown_warns_once_that_the_global_pipeline_is_stopped() -> None:
    with HttpReceiver() as receiver:
        result = run_script(f"""
            with configure(protocol="http/protobuf", endpoint={receiver.endpoint!r}, metrics=False) as first:
                make_agent().run("add 2 and 3")
            print(first.spans_exported)
            assert configure(protocol="http/protobuf", endpoint={receiver.endpoint!r}, metrics=False) is first
            assert configure(protocol="http/protobuf", endpoint={receiver.endpoint!r}, metrics=False) is first
            make_agent().run("add 2 and 3")  # into the stopped provider: dropped
            print(first.spans_exported)
        """)
    assert result.returncode == 0, result.stderr
    delivered = str(len(expected_span_names()))
    assert result.stdout.split() == [delivered, delivered], "the second run's spans went nowhere"
    warnings = [line for line in result.stderr.splitlines() if "global telemetry pipeline was shut down" in line]
    assert len(warnings) == 1, result.stderr
    assert "spans are dropped" in warnings[0] and "cannot be replaced" in warnings[0]


def test_an_installed_application_provider_is_used_not_replaced() -> None:
    with HttpReceiver() as receiver:
        result = run_script(f"""
            from opentelemetry import metrics, trace
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

            app_exporter = InMemorySpanExporter()
            app_provider = TracerProvider()
            app_provider.add_span_processor(SimpleSpanProcessor(app_exporter))
            trace.set_tracer_provider(app_provider)

            telemetry = configure(protocol="http/protobuf", endpoint={receiver.endpoint!r})
            assert configure(protocol="http/protobuf", endpoint={receiver.endpoint!r}) is telemetry
            assert telemetry.tracer_provider is app_provider is trace.get_tracer_provider()
            assert isinstance(telemetry.meter_provider, MeterProvider)  # none was installed: ours
            assert metrics.get_meter_provider() is telemetry.meter_provider
            make_agent().run("add 2 and 3")
            assert telemetry.shutdown()
            print(len(app_exporter.get_finished_spans()))
            app_provider.get_tracer("app").start_span("still the application's").end()
            print(len(app_exporter.get_finished_spans()))
        """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(len(expected_span_names())), str(len(expected_span_names()) + 1)], \
        "the application's provider got the spans and still works after our shutdown"
    warnings = [line for line in result.stderr.splitlines() if "already installed a global TracerProvider" in line]
    assert len(warnings) == 1, result.stderr
    assert receiver.spans() == [], "no exporter was added to the application's provider"
    assert N.METRIC_RUNS in receiver.metric_names()


# --- module boundaries ---------------------------------------------------------------------

def imported_modules(module: str) -> set[str]:
    """What ``tracedagent/<module>.py`` imports (``module`` dotted below the package, such as
    ``_core._secrets``), relative imports resolved to their full names."""
    import ast
    tree = ast.parse((ROOT / "tracedagent" / f"{module.replace('.', '/')}.py").read_text())
    package = f"tracedagent.{module}".rsplit(".", 1)[0].split(".")
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:  # a module of a package, or a name in a module
                full = f"{base}.{alias.name}"
                is_module = (ROOT / f"{full.replace('.', '/')}.py").exists()
                found.add(full if is_module else base)
    return found


def test_endpoint_resolution_needs_no_sdk_and_url_users_do_not_import_it() -> None:
    """``_endpoints`` reads URLs and variables with the standard library; the modules that only
    need a URL helper get it there, not from the module that builds the SDK pipeline."""
    allowed = {"tracedagent._core._names", "opentelemetry.util.re",  # the API's header parser, not the SDK
               "tracedagent._core._secrets"}  # which names mark a credential; itself standard library only
    assert imported_modules("_core._secrets") <= set(sys.stdlib_module_names) | {"__future__"}
    outside = {m for m in imported_modules("_export._endpoints")
               if m.split(".")[0] not in sys.stdlib_module_names and m not in allowed}
    assert outside == set()
    for module in ("_export._http", "_traces._jaeger", "_cli._doctor"):
        assert not imported_modules(module) & {"tracedagent._export._configure", "tracedagent._export._exporters"}, module


# --- SIGTERM ----------------------------------------------------------------------------------

LOOP_UNTIL_SIGTERM = """
    import signal, time
    telemetry = configure(protocol={protocol!r}, endpoint={endpoint!r}, export_timeout={export_timeout})
    print("handler", signal.getsignal(signal.SIGTERM).__module__, flush=True)
    while True:  # until SIGTERM
        run = make_agent().run("add 2 and 3")
        print(run.trace_id, flush=True)  # finished
        time.sleep(0.01)
"""


def finished_runs_until_sigterm(after: int, **settings: object) -> tuple[list[str], subprocess.CompletedProcess]:
    """Start ``LOOP_UNTIL_SIGTERM``, send SIGTERM once ``after`` runs have finished; the trace
    ids of every run that finished before the process ended, and how it ended."""
    process = subprocess.Popen(**script(LOOP_UNTIL_SIGTERM.format(**settings)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        assert process.stdout.readline().split() == ["handler", "tracedagent._export._sigterm"]
        finished = [process.stdout.readline().strip() for _ in range(after)]
        process.send_signal(signal.SIGTERM)
        rest, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    return finished + rest.split(), subprocess.CompletedProcess(process.args, process.returncode, rest, stderr)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sigterm_delivers_every_finished_run_then_ends_the_process_as_sigterm_does(protocol: str) -> None:
    with RECEIVERS[protocol]() as receiver:
        finished, ended = finished_runs_until_sigterm(20, protocol=protocol, endpoint=receiver.endpoint,
                                                      export_timeout=2)
    assert ended.returncode == -signal.SIGTERM, ended.stderr
    assert ended.stderr == ""
    spans_per_trace = Counter(span.trace_id for span in receiver.spans())
    assert len(finished) >= 20
    assert {trace_id: spans_per_trace[trace_id] for trace_id in finished} == \
        {trace_id: len(expected_span_names()) for trace_id in finished}


def test_a_hung_collector_cannot_keep_a_sigtermed_process_alive() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)  # accepts connections, never answers
        _, ended = finished_runs_until_sigterm(3, protocol=N.PROTOCOL_GRPC, export_timeout=30,
                                               endpoint=f"http://127.0.0.1:{listener.getsockname()[1]}")
    assert ended.returncode == -signal.SIGTERM, ended.stderr


@pytest.mark.parametrize("setup, handler", [
    ("configure()", "tracedagent._export._sigterm"),
    ("configure(set_global=False)", "tracedagent._export._sigterm"),
    ("configure(handle_sigterm=False)", "default"),
    (f"os.environ['{N.ENV_HANDLE_SIGTERM}'] = 'false'; configure()", "default"),
    (f"os.environ['{N.ENV_HANDLE_SIGTERM}'] = 'false'; configure(handle_sigterm=True)", "tracedagent._export._sigterm"),
    ("signal.signal(signal.SIGTERM, application_handler); configure()", "application"),
    ("signal.signal(signal.SIGTERM, signal.SIG_IGN); configure()", "ignore"),
    ("thread = threading.Thread(target=configure); thread.start(); thread.join()", "default"),
])
def test_the_sigterm_handler_is_installed_only_where_the_application_has_none(setup: str, handler: str) -> None:
    result = run_script(f"""
        import os, signal, threading

        def application_handler(signum, frame):
            pass

        {setup}
        installed = signal.getsignal(signal.SIGTERM)
        print({{signal.SIG_DFL: "default", signal.SIG_IGN: "ignore", application_handler: "application"}}
              .get(installed) or installed.__module__)
    """, OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == handler
