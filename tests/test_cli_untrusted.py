"""Trace files and Jaeger answers that anyone may have written: one line, never a traceback,
never a hang.

``tracedagent show``, ``replay`` and ``diff`` read OTLP/JSON files, and ``trace``, ``traces``
(and ``replay``/``diff`` of a trace id) read whatever answers at the Jaeger URL. Each input
here once ended in a traceback (``RecursionError``, ``OverflowError``, ``ValueError`` from
``int()``, ``TypeError`` from a list that was a number), in a command that never returned
(a cycle of parent ids), or in a request that took minutes (a server trickling its answer)
or took the user's credentials to another host (a redirect).
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from _fake_servers import Reply, RoutedServer, closed_port, serve
from jaeger_v3 import as_api_v3
from tracedagent import Agent, Budget
from tracedagent._cli import _main as _cli
from tracedagent._export import _http
from tracedagent._core import _names as N
from tracedagent._traces._jaeger import JaegerClient, JaegerError
from tracedagent._traces._otlp_json import decode, encode
from tracedagent._traces._recorded import Recording
from tracedagent._cli._render import trace_tree
from tracedagent._traces._trace import SpanRecord, Trace
from tracedagent.testing import FakeModel, Recorder, tool_call

ROOT = Path(__file__).resolve().parent.parent
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
T0_NS = 1_700_000_000_000_000_000


def invoke(*args: str) -> Result:
    return CliRunner().invoke(_cli.cli, [str(a) for a in args], catch_exceptions=True)


def assert_one_line_error(result: Result, message: str) -> None:
    """Exit status 1 from a ``CliError`` (an exception of any other kind is a traceback)."""
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1, result.output
    assert message in result.output, result.output


# --- a real run's trace, with content, to tamper with -----------------------------------

def lookup(order_id: str) -> str:
    """Look an order up."""
    return "shipped"


@pytest.fixture(scope="module")
def captured() -> dict[str, Any]:
    """One run's trace as OTLP/JSON, recorded with content capture on: what replay reads."""
    recorder = Recorder()
    logging.disable(logging.WARNING)
    try:
        Agent(FakeModel([tool_call("lookup", {"order_id": "1"}), "done"]), [lookup], capture_content=True,
              **recorder.providers).run("where is my order?")
    finally:
        logging.disable(logging.NOTSET)
    return encode(recorder.spans())


def spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def span_named(document: dict[str, Any], prefix: str) -> dict[str, Any]:
    return next(s for s in spans(document) if s["name"].startswith(prefix))


def set_attribute(span: dict[str, Any], key: str, value: dict[str, Any]) -> None:
    span["attributes"] = [a for a in span.get("attributes", []) if a["key"] != key] + [{"key": key, "value": value}]


def written(tmp_path: Path, document: Any, name: str = "trace.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


# --- files that are not trace data --------------------------------------------------------

def one_span(**fields: Any) -> str:
    span = {"traceId": TRACE_ID, "spanId": "00f067aa0ba902b7", "name": "s", "startTimeUnixNano": "1",
            "endTimeUnixNano": "2", **fields}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


@pytest.mark.parametrize("content, message", [
    pytest.param('{"resourceSpans": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested more than 200 levels deep",
                 id="nested beyond the recursion limit"),
    pytest.param('{"resourceSpans": [' + "[" * 300 + "]" * 300 + "]}", "nested more than 200 levels deep",
                 id="nested within it"),
    pytest.param('{"resourceSpans": [' + "9" * 5000 + "]}", "a number of more than 4300 digits",
                 id="a 5000-digit integer"),
    pytest.param(one_span(startTimeUnixNano=1).replace('"startTimeUnixNano": 1', '"startTimeUnixNano": 1e400'),
                 "span #1 is malformed (inf is not an integer)", id="a time of 1e400"),
    pytest.param(one_span(endTimeUnixNano="1" + "0" * 400), "span #1 is malformed", id="a time of 10**400"),
    pytest.param(one_span(attributes=[{"key": "a", "value": {"intValue": 1}}]).replace('"intValue": 1', '"intValue": 1e400'),
                 "span #1 is malformed (inf is not an integer)", id="an intValue of 1e400"),
    pytest.param(one_span(attributes=[{"key": "a", "value": {"doubleValue": 10**400}}]),
                 "span #1 is malformed", id="a doubleValue too large for a float"),
    pytest.param(one_span(events=[{"name": "e", "timeUnixNano": 10**30}]), "span #1 is malformed (1000",
                 id="an event time beyond 64 bits"),
])
def test_a_file_that_is_not_trace_data_is_one_line_in_every_command(tmp_path, content, message):
    path = written(tmp_path, content)
    for args in (["show", path], ["replay", path, "-o", tmp_path / "test_x.py"], ["diff", path, path]):
        assert_one_line_error(invoke(*args), message)


TAMPERED: dict[str, Callable[[dict[str, Any]], None]] = {
    "executed tools a number": lambda d: set_attribute(span_named(d, "invoke_agent"), N.TOOLS_EXECUTED, {"intValue": "5"}),
    "a number among the requested tools": lambda d: set_attribute(
        span_named(d, "invoke_agent"), N.TOOLS_REQUESTED,
        {"arrayValue": {"values": [{"stringValue": "lookup"}, {"intValue": "7"}]}}),
    "steps infinite": lambda d: set_attribute(span_named(d, "invoke_agent"), N.STEPS, {"doubleValue": "Infinity"}),
    "tokens text": lambda d: set_attribute(span_named(d, "invoke_agent"), N.GEN_AI_USAGE_INPUT_TOKENS,
                                           {"stringValue": "1e999"}),
    "cost text": lambda d: set_attribute(span_named(d, "invoke_agent"), N.COST_USD, {"stringValue": "free"}),
}


@pytest.mark.parametrize("tamper", TAMPERED.values(), ids=TAMPERED.keys())
def test_attributes_of_the_wrong_type_are_read_as_what_they_are(captured, tmp_path, tamper):
    """A run span whose lists, counts or cost hold another type: shown, compared and replayed."""
    document = copy.deepcopy(captured)
    tamper(document)
    path = written(tmp_path, document)
    good = written(tmp_path, captured, "good.json")
    for args in (["show", path], ["diff", path, good], ["replay", path, "-o", tmp_path / "test_x.py"]):
        result = invoke(*args)
        assert result.exit_code == 0, (args[0], result.output, result.exception)


def test_a_step_s_tool_list_of_the_wrong_type_in_a_trace_without_content(captured, tmp_path):
    """Without content, diff reads a step's calls off its tool list: a number there is one call."""
    document = copy.deepcopy(captured)
    chat = span_named(document, "chat")
    chat["attributes"] = [a for a in chat["attributes"] if a["key"] != N.GEN_AI_OUTPUT_MESSAGES]
    set_attribute(span_named(document, "step"), N.TOOLS_REQUESTED, {"intValue": "3"})
    result = invoke("diff", written(tmp_path, document), written(tmp_path, captured, "good.json"))
    assert result.exit_code == 0, (result.output, result.exception)
    assert "B: lookup" in result.output and "A: 3() -> ok" in result.output


def test_a_budget_ceiling_that_is_not_a_number_is_read_as_not_set(captured):
    """Was: copied into the recording, so the generated test failed building its ``Budget``."""
    document = copy.deepcopy(captured)
    set_attribute(span_named(document, "invoke_agent"), N.BUDGET_MAX_STEPS, {"stringValue": "many"})
    set_attribute(span_named(document, "invoke_agent"), N.BUDGET_MAX_TOKENS, {"intValue": "500"})
    recording = Recording.of(decode(document))
    assert "max_steps" not in recording.budget and recording.budget["max_tokens"] == 500
    assert recording.make_budget().max_steps == Budget().max_steps


@pytest.mark.parametrize("attribute, span_prefix, what", [
    (N.GEN_AI_OUTPUT_MESSAGES, "chat", "the model's turn in step 0"),
    (N.GEN_AI_INPUT_MESSAGES, "invoke_agent", "the run's task"),
])
def test_captured_messages_whose_parts_are_not_a_list(captured, tmp_path, attribute, span_prefix, what):
    """Replay refuses content tracedagent did not write; diff compares what is left."""
    document = copy.deepcopy(captured)
    set_attribute(span_named(document, span_prefix), attribute,
                  {"stringValue": json.dumps([{"role": "assistant", "parts": 5}])})
    path = written(tmp_path, document)
    assert_one_line_error(invoke("replay", path, "-o", tmp_path / "test_x.py"),
                          f"{what} is not the JSON tracedagent captures ({attribute})")
    result = invoke("diff", path, written(tmp_path, captured, "good.json"))
    assert result.exit_code == 0, (result.output, result.exception)


WEIRD_VALUES = [{"intValue": "5"}, {"stringValue": "x"}, {"arrayValue": {"values": [{"intValue": "1"}]}},
                {"boolValue": True}, {"doubleValue": "NaN"}, {"doubleValue": "-Infinity"},
                {"kvlistValue": {"values": [{"key": "a", "value": {"stringValue": "b"}}]}},
                {"stringValue": "[1,2]"}, {"stringValue": "{}"}, {"stringValue": "null"},
                {"stringValue": '[{"role": 5}]'}, {"stringValue": '[{"role":"user","parts":[5]}]'},
                {"stringValue": "[" * 500 + "]" * 500}, {"intValue": "-1"}, {}]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@example(data=None)
def test_any_attribute_of_any_span_replaced_by_any_value(captured, tmp_path, data):
    """What the review's fuzzer did: one attribute of one span replaced; every command either
    succeeds or says why in one line."""
    document = copy.deepcopy(captured)
    if data is None:  # what it found: the run's executed tools as a number
        span, index, value = span_named(document, "invoke_agent"), None, {"intValue": "5"}
        set_attribute(span, N.TOOLS_EXECUTED, value)
    else:
        span = data.draw(st.sampled_from(spans(document)))
        index = data.draw(st.integers(0, len(span["attributes"]) - 1))
        span["attributes"][index]["value"] = data.draw(st.sampled_from(WEIRD_VALUES))
    path = written(tmp_path, document)
    good = written(tmp_path, captured, "good.json")
    for args in (["show", path], ["diff", path, good], ["replay", path, "-o", tmp_path / "test_x.py"]):
        result = invoke(*args)
        assert result.exit_code == 0 or isinstance(result.exception, SystemExit), (args[0], repr(result.exception))
        assert result.exit_code == 0 or result.output.startswith("Error: "), result.output


# --- span trees that are not trees -----------------------------------------------------------

def record(span_id: str, parent: str | None, name: str, start: int = 0) -> SpanRecord:
    return SpanRecord(trace_id=TRACE_ID, span_id=span_id, parent_id=parent, name=name,
                      start_ns=T0_NS + start, end_ns=T0_NS + start + 10)


def tree_text(trace: Trace) -> str:
    from rich.console import Console
    console = Console(width=200, color_system=None, record=True, file=open(os.devnull, "w"))
    console.print(trace_tree(trace))
    return console.export_text()


def test_a_cycle_of_parent_ids_is_shown_from_its_first_span_and_nothing_is_left_out():
    trace = Trace([record("000000000000000a", "000000000000000c", "a", 0),
                   record("000000000000000b", "000000000000000a", "b", 1),
                   record("000000000000000c", "000000000000000b", "c", 2),
                   record("000000000000000d", "000000000000000d", "own parent", 3),
                   record("000000000000000e", None, "root", 4)])
    assert [s.name for s in trace.roots] == ["a", "own parent", "root"]
    assert [s.name for s in trace.children(trace.roots[0])] == ["b"]
    assert [trace.depth(s) for s in trace.spans] == [0, 1, 2, 0, 0]
    shown = tree_text(trace)
    assert all(name in shown for name in ("a ", "b ", "c ", "own parent", "root"))


def test_spans_that_share_an_id_each_appear_once():
    """The second span carries the first's id and names it as its parent: it hangs below it once,
    instead of below itself for ever."""
    trace = Trace([record("000000000000000a", None, "first", 0), record("000000000000000a", "000000000000000a", "second", 1)])
    assert [s.name for s in trace.roots] == ["first"]
    assert [s.name for s in trace.children(trace.roots[0])] == ["second"]
    assert trace.children(trace.spans[1]) == []
    assert tree_text(trace).count("second") == 1


def test_a_chain_of_spans_deeper_than_the_recursion_limit_is_drawn(tmp_path):
    chain = [{"traceId": TRACE_ID, "spanId": f"{i + 1:016x}", **({"parentSpanId": f"{i:016x}"} if i else {}),
              "name": f"span {i}", "startTimeUnixNano": str(T0_NS + i), "endTimeUnixNano": str(T0_NS + 10_000)}
             for i in range(3000)]
    path = written(tmp_path, {"resourceSpans": [{"scopeSpans": [{"spans": chain}]}]})
    result = invoke("show", path)
    assert result.exit_code == 0, repr(result.exception)
    assert "span 0" in result.output


def test_replay_and_diff_of_a_run_in_a_cycle_end(captured, tmp_path):
    """Was: both hung for ever walking up the run span's parents; ``show`` left the cycle out."""
    document = copy.deepcopy(captured)
    run, step = span_named(document, "invoke_agent"), span_named(document, "step")
    run["parentSpanId"] = step["spanId"]
    path = written(tmp_path, document)
    env = {**os.environ, "COLUMNS": "200"}
    for args in (["replay", path, "-o", tmp_path / "test_x.py"], ["diff", path, path], ["show", path]):
        done = subprocess.run([sys.executable, "-m", "tracedagent", *map(str, args)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert "invoke_agent" in done.stdout and "step 0" in done.stdout and "execute_tool lookup" in done.stdout


# --- Jaeger answers that are not Jaeger's --------------------------------------------------

@pytest.fixture()
def jaeger() -> Iterator[RoutedServer]:
    server = RoutedServer()
    yield server
    server.close()


def jaeger_span(**fields: Any) -> dict[str, Any]:
    return {"traceID": TRACE_ID, "spanID": "00f067aa0ba902b7", "operationName": "invoke_agent x", "references": [],
            "startTime": T0_NS // 1000, "duration": 1000, "tags": [], "logs": [], "processID": "p1", **fields}


def jaeger_answer(*span_list: dict[str, Any]) -> dict[str, Any]:
    return {"data": [{"traceID": TRACE_ID, "spans": list(span_list), "processes": {"p1": {"serviceName": "s"}}}]}


def otlp_answer(**fields: Any) -> dict[str, Any]:
    """api_v3's answer for one trace holding one span with these fields."""
    span = {"traceId": TRACE_ID, "spanId": "00f067aa0ba902b7", "name": "invoke_agent x", "kind": 1,
            "startTimeUnixNano": str(T0_NS), "endTimeUnixNano": str(T0_NS + 1000), **fields}
    return {"result": {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [span]}]}]}}


_ANY_ENDPOINT = ("nested JSON", "a 5000-digit integer", "a compressed body", "errors a number", "nested error")
"""Answers no endpoint can read: asked of the search (Jaeger's UI model) and of api_v3 (OTLP JSON) alike."""


@pytest.mark.parametrize("status, body, message", [
    pytest.param(200, b"[" * 100_000 + b"]" * 100_000, "nested more than 200 levels deep", id="nested JSON"),
    pytest.param(200, b'{"data": [' + b"9" * 5000 + b"]}", "a number of more than 4300 digits", id="a 5000-digit integer"),
    pytest.param(200, b'\x1f\x8b\x08\x00' + bytes(range(128, 256)), "not JSON: not text in a Unicode encoding",
                 id="a compressed body"),
    pytest.param(200, json.dumps(jaeger_answer(jaeger_span(startTime=1))).encode().replace(b'"startTime": 1,', b'"startTime": 1e400,'),
                 "cannot read (ValueError: inf is not an integer)", id="a start of 1e400"),
    pytest.param(200, json.dumps(jaeger_answer(jaeger_span(duration=10**30))).encode(),
                 "cannot read (ValueError: 1000", id="a duration beyond 64 bits"),
    pytest.param(200, json.dumps(jaeger_answer(jaeger_span(logs=[{"timestamp": 1e300, "fields": []}]))).encode(),
                 "cannot read (ValueError: 1e+300 is out of range)", id="an event time beyond 64 bits"),
    pytest.param(500, b'{"errors": 5}', "answered HTTP 500: Internal Server Error", id="errors a number"),
    pytest.param(500, b"[" * 100_000 + b"]" * 100_000, "answered HTTP 500: Internal Server Error", id="nested error"),
])
def test_a_hostile_jaeger_answer_is_one_line(jaeger, request, status, body, message):
    jaeger.answer("/api/traces", body, status=status)
    assert_one_line_error(invoke("traces", "--jaeger", jaeger.url), message)
    if request.node.callspec.id in _ANY_ENDPOINT:
        jaeger.answer(f"/api/v3/traces/{TRACE_ID}", body, status=status)
        assert_one_line_error(invoke("trace", TRACE_ID, "--jaeger", jaeger.url), message)
        assert_one_line_error(invoke("diff", TRACE_ID, TRACE_ID, "--jaeger", jaeger.url), message)


@pytest.mark.parametrize("body, message", [
    pytest.param(json.dumps(otlp_answer(startTimeUnixNano=1)).encode().replace(b'"startTimeUnixNano": 1,',
                                                                             b'"startTimeUnixNano": 1e400,'),
                 "span #1 is malformed (inf is not an integer)", id="a start of 1e400"),
    pytest.param(json.dumps(otlp_answer(endTimeUnixNano=str(10**30))).encode(),
                 "span #1 is malformed ('1000000000000000000000000000000' is out of range)", id="an end beyond 64 bits"),
    pytest.param(json.dumps(otlp_answer(events=[{"name": "e", "timeUnixNano": 1e300}])).encode(),
                 "span #1 is malformed (1e+300 is out of range)", id="an event time beyond 64 bits"),
    pytest.param(b'{"result": 5}', "not OTLP/JSON trace data", id="a result that is not traces"),
    pytest.param(json.dumps(jaeger_answer(jaeger_span())).encode(), "not OTLP/JSON trace data",
                 id="the search's shape"),
])
def test_a_hostile_api_v3_answer_is_one_line(jaeger, body, message):
    """One trace comes from api_v3 as OTLP JSON, read by the trace file's reader and its guards."""
    jaeger.answer(f"/api/v3/traces/{TRACE_ID}", body)
    assert_one_line_error(invoke("trace", TRACE_ID, "--jaeger", jaeger.url), message)
    assert_one_line_error(invoke("diff", TRACE_ID, TRACE_ID, "--jaeger", jaeger.url), message)


def test_a_tool_list_tag_nested_too_deeply_is_left_a_string(jaeger):
    """Jaeger stores tool lists as JSON strings, decoded back: one nested past the recursion
    limit raised ``RecursionError`` in the decoder."""
    nested = "[" * 5000 + "]" * 5000
    tag = {"key": N.TOOLS_REQUESTED, "type": "string", "value": nested}
    run = jaeger_span(tags=[{"key": N.GEN_AI_OPERATION_NAME, "type": "string", "value": N.OP_INVOKE_AGENT}, tag])
    jaeger.answer(f"/api/v3/traces/{TRACE_ID}", as_api_v3(jaeger_answer(run)["data"][0]))
    result = invoke("trace", TRACE_ID, "--jaeger", jaeger.url)
    assert result.exit_code == 0, repr(result.exception)


@pytest.mark.parametrize("url", ["http://a..b:16686", f"http://{'a' * 64}.example:16686"])
def test_a_jaeger_host_name_no_resolver_takes_is_one_line(url):
    """Was: ``UnicodeError`` from the idna codec, deep in ``socket``; ``doctor`` said "not a usable URL"."""
    for args in (["traces"], ["trace", TRACE_ID], ["diff", TRACE_ID, TRACE_ID]):
        assert_one_line_error(invoke(*args, "--jaeger", url), f"not a usable Jaeger URL: '{url}' (not a usable host name")


def test_a_too_long_since_is_a_usage_error_not_an_overflow():
    result = invoke("traces", "--since", "9" * 400 + "d")
    assert result.exit_code == 2, repr(result.exception)
    assert "reaches back further than 10,000 days" in result.output


# --- the request's time limit, and redirects ------------------------------------------------

class _Trickle(BaseHTTPRequestHandler):
    """Answers one byte every 0.1 s: the status line and headers (``/headers``), or the body."""

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's naming
        head = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n"
        body = b'{"data": []}' + b" " * 100
        try:
            if self.path.startswith("/headers"):
                for byte in head + body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.1)
            else:
                self.wfile.write(head)
                for byte in body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.1)
        except OSError:  # the client gave up, as it should
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture()
def trickle() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("path", ["/api/v3/traces/" + TRACE_ID, "/headers/api/v3/traces/" + TRACE_ID])
def test_a_server_that_trickles_its_answer_is_cut_off_at_the_time_limit(trickle, path):
    """Was: the limit bounded each read, so 112 bytes at 0.1 s each took 11 s (a byte a second:
    minutes) against a limit of 1 s."""
    base = trickle + path.removesuffix("/api/v3/traces/" + TRACE_ID)
    started = time.monotonic()
    with pytest.raises(JaegerError, match="did not answer within 1 s"):
        JaegerClient(base, timeout=1.0).trace(TRACE_ID)
    assert time.monotonic() - started < 2.5
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        _http.request(trickle + path, 1.0, max_bytes=1 << 20)
    assert time.monotonic() - started < 2.5


class _Short(BaseHTTPRequestHandler):
    """Promises more than it sends, then closes: an answer broken off (a proxy or Jaeger dying)."""

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's naming
        self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
        self.wfile.write(b'{"data": []}')

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_an_answer_shorter_than_its_content_length_is_broken_off_not_read_as_whole():
    """A body cut short that happens to be JSON (here a whole empty answer) was read as the
    answer; one that is not said "not JSON". Either way the answer broke off."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Short)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(JaegerError, match="broke off the answer"):
            JaegerClient(f"http://127.0.0.1:{server.server_address[1]}", timeout=5.0).trace(TRACE_ID)
    finally:
        server.shutdown()
        server.server_close()


def test_credentials_are_not_taken_along_to_another_host():
    """Jaeger's ``user:password@`` (an ``Authorization`` header) and an OTLP endpoint's API key
    header went to whatever host a redirect named. Within the origin they still go; without
    credentials a redirect is followed anywhere."""
    elsewhere, origin = RoutedServer(), RoutedServer()
    try:
        elsewhere.answer("/api/traces", {"data": []})
        origin.routes["/api/traces"] = Reply(status=302, headers={"location": elsewhere.url + "/api/traces"})
        origin.routes["/moved/api/traces"] = Reply(status=302, headers={"location": "/here/api/traces"})
        origin.answer("/here/api/traces", {"data": []})
        with_credentials = origin.url.replace("http://", "http://reader:hunter22@")

        result = invoke("traces", "--jaeger", with_credentials)
        assert_one_line_error(result, f"Jaeger at {origin.url} redirected to http://127.0.0.1:")
        assert "which was not followed" in result.output and "hunter22" not in result.output
        assert elsewhere.requests == []

        assert invoke("traces", "--jaeger", with_credentials + "/moved").exit_code == 0  # the same origin
        assert base64.b64decode(origin.requests[-1].headers["authorization"][6:]) == b"reader:hunter22"
        assert invoke("traces", "--jaeger", origin.url).exit_code == 0  # no credentials: followed
        assert [r.headers.get("authorization") for r in elsewhere.requests] == [None]

        with serve(Reply(status=302, headers={"location": elsewhere.url + "/api/traces"})) as collector:
            with pytest.raises(_http.RedirectRefused):
                _http.request(collector.url + "/v1/traces", 2.0, max_bytes=1024, body=b"",
                              headers={"x-api-key": "s3cr3t", "Content-Type": "application/x-protobuf"})
        assert len(elsewhere.requests) == 1
    finally:
        elsewhere.close()
        origin.close()


# --- the demo when nothing is traced ------------------------------------------------------------

def test_the_demo_links_no_trace_when_tracing_is_off(tmp_path):
    """Was: a link to ``.../trace/None`` per run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(COLUMNS="200", OTEL_SDK_DISABLED="true")
    done = subprocess.run([sys.executable, "-m", "tracedagent", "demo", "--pace", "0", "--only", "help-desk",
                           "--otlp", f"http://127.0.0.1:{closed_port()}", "--out", str(tmp_path / "d.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "/trace/" not in done.stdout and "None" not in done.stdout
    assert "No run recorded a span: tracing is off (OTEL_SDK_DISABLED=true" in done.stdout
    assert "tracedagent show" not in done.stdout  # the file holds nothing to show


@pytest.mark.parametrize("path", ["os:system\nimport os", "os:system; rm -rf ~", "__import__('os'):x", "a:b:c"])
def test_a_tampered_output_type_path_writes_no_code(captured, tmp_path, path):
    """The one thing from a trace a generated test names in code is a typed run's output type:
    a path that is not dotted identifiers is refused, in one line, and nothing is written."""
    document = copy.deepcopy(captured)
    run = span_named(document, "invoke_agent")
    set_attribute(run, N.OUTPUT_TYPE_NAME, {"stringValue": "Weather"})
    set_attribute(run, N.OUTPUT_TYPE_PATH, {"stringValue": path})
    out = tmp_path / "test_x.py"
    assert_one_line_error(invoke("replay", written(tmp_path, document), "-o", out), "expected module:qualname")
    assert not out.exists()
