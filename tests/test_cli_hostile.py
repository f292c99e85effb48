"""Names a model chose, drawn by the command line: escaped, never obeyed, never a crash.

A prompt injection picks tool names, and what the model says ends up in agent names, error
texts and stop reasons of traces that others read. Every command that draws a trace -
``show`` (a file), ``trace`` and ``traces`` (Jaeger's HTTP API, here a local server
answering Jaeger-shaped JSON) and the demo's tables - must exit 0 and print such names
with their markup left alone and their control characters written as escapes.

The ``hostile_names`` strategy mixes rich markup, terminal escape sequences, C0/C1 control
characters, lone surrogates and huge strings.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner, Result
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.console import Console

from _fake_servers import RoutedServer
from jaeger_v3 import as_api_v3
from tracedagent._cli import _main as _cli
from tracedagent._core import _names as N
from tracedagent._cli._listing import Listing
from tracedagent._traces._otlp_json import decode
from tracedagent._cli._render import StopTally, printable, runs_table, stop_counts_table, trace_tree
from tracedagent._traces._trace import group_traces

ROOT = Path(__file__).resolve().parent.parent
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
T0_NS = 1_700_000_000_000_000_000
BIDI = {*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A)), "\u200e", "\u200f"}


def unprintable(output: str) -> list[str]:
    """Characters a terminal would obey or choke on (a newline is the output's own)."""
    return [c for c in output if c != "\n" and (unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") or c in BIDI)]


# --- the strategy ----------------------------------------------------------------------

MARKUP = ["[/]", "[bold]", "[/bold]", "[red]x[/red]", "[link=https://example.invalid]click[/link]", "[", "\\[",
          "[@click=app.quit]", ":warning:", "[[/]]"]
ESCAPES = ["\x1b[2J", "\x1b]8;;https://example.invalid\x1b\\", "\x1b[31m", "\x9b2J", "\x1bc", "\r", "\b", "\x07",
           "\x00", "\x7f", "\u202e", "\u2028", "\t", "\n"]
_piece = st.one_of(st.sampled_from(MARKUP + ESCAPES),
                   st.characters(categories=["Cc", "Cs"]),  # control characters and lone surrogates
                   st.text(max_size=6))
hostile_names = st.one_of(
    st.lists(_piece, min_size=1, max_size=8).map("".join),
    st.tuples(_piece, st.integers(300, 3000)).map(lambda p: (p[0] or "x") * p[1]),  # huge
)
"""Names as a hostile model would choose them."""


@dataclass(frozen=True)
class Hostile:
    """One run's model-chosen strings."""

    agent: str
    tools: list[str]
    stop: str
    error: str


hostile_runs = st.builds(Hostile, agent=hostile_names, tools=st.lists(hostile_names, min_size=1, max_size=3),
                         stop=hostile_names, error=hostile_names)
ISSUE_EXAMPLE = Hostile(agent="\x1b[2Jsupport", tools=["[/]", "bad\ud800name"], stop="answered", error="[bold]x")


# --- one run's spans, as OTLP/JSON and as Jaeger's JSON ----------------------------------

def spans_of(h: Hostile) -> list[dict[str, Any]]:
    """The run's spans in a neutral shape: a run, a step, a failed model call, the tool calls."""
    run = {"id": "00f067aa0ba90201", "parent": None, "name": f"invoke_agent {h.agent}",
           "attributes": {N.GEN_AI_OPERATION_NAME: N.OP_INVOKE_AGENT, N.GEN_AI_AGENT_NAME: h.agent,
                          N.STOP_REASON: h.stop, N.STEPS: 1, N.GEN_AI_USAGE_INPUT_TOKENS: 10,
                          N.GEN_AI_USAGE_OUTPUT_TOKENS: 5, N.TOOLS_REQUESTED: h.tools, N.TOOLS_EXECUTED: h.tools[:1]},
           "events": [{N.STOP_REASON: h.stop}]}
    step = {"id": "00f067aa0ba90202", "parent": run["id"], "name": N.STEP_SPAN_NAME,
            "attributes": {N.STEP_INDEX: h.error, N.STEP_INPUT_TOKENS: h.error}}
    chat = {"id": "00f067aa0ba90203", "parent": step["id"], "name": f"chat {h.error}", "error": h.error,
            "attributes": {N.GEN_AI_OPERATION_NAME: N.OP_CHAT, N.GEN_AI_USAGE_INPUT_TOKENS: 10,
                           N.GEN_AI_RESPONSE_FINISH_REASONS: [h.error], N.ERROR_TYPE: h.error}}
    tools = [{"id": f"00f067aa0ba903{i:02x}", "parent": step["id"], "name": f"execute_tool {tool}",
              "attributes": {N.GEN_AI_OPERATION_NAME: N.OP_EXECUTE_TOOL, N.GEN_AI_TOOL_NAME: tool,
                             N.TOOL_OUTCOME: h.error, N.ERROR_TYPE: h.stop}} for i, tool in enumerate(h.tools)]
    return [run, step, chat, *tools]


def otlp_document(h: Hostile) -> dict[str, Any]:
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, list):
            return {"arrayValue": {"values": [value(x) for x in v]}}
        return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}

    spans = [{"traceId": TRACE_ID, "spanId": s["id"], **({"parentSpanId": s["parent"]} if s["parent"] else {}),
              "name": s["name"], "kind": 1, "startTimeUnixNano": str(T0_NS), "endTimeUnixNano": str(T0_NS + 5_000_000),
              "attributes": [{"key": k, "value": value(v)} for k, v in s["attributes"].items()],
              **({"status": {"code": 2, "message": s["error"]}} if "error" in s else {}),
              "events": [{"name": N.STOP_EVENT, "timeUnixNano": str(T0_NS),
                          "attributes": [{"key": k, "value": value(v)} for k, v in e.items()]}
                         for e in s.get("events", [])]}
             for s in spans_of(h)]
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": h.agent}}]},
                               "scopeSpans": [{"spans": spans}]}]}


def jaeger_trace(h: Hostile, trace_id: str = TRACE_ID) -> dict[str, Any]:
    """What Jaeger's query API answers for the run (arrays stored as JSON strings)."""
    def tag(key: str, v: Any) -> dict[str, Any]:
        return {"key": key, "type": "string", "value": json.dumps(v) if isinstance(v, list) else v}

    spans = [{"traceID": trace_id, "spanID": s["id"], "operationName": s["name"],
              "references": [{"refType": "CHILD_OF", "traceID": trace_id, "spanID": s["parent"]}] if s["parent"] else [],
              "startTime": T0_NS // 1000, "duration": 5000, "processID": "p1",
              "tags": [tag(k, v) for k, v in s["attributes"].items()]
              + ([tag("otel.status_code", "ERROR"), tag("otel.status_description", s["error"])] if "error" in s else []),
              "logs": [{"timestamp": T0_NS // 1000, "fields": [tag("event", N.STOP_EVENT),
                                                               *(tag(k, v) for k, v in e.items())]}
                       for e in s.get("events", [])]}
             for s in spans_of(h)]
    return {"traceID": trace_id, "spans": spans, "processes": {"p1": {"serviceName": h.agent, "tags": []}}}


# --- the command line, in-process --------------------------------------------------------

@pytest.fixture(scope="module")
def jaeger() -> Iterator[RoutedServer]:
    server = RoutedServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def wide_cli() -> Iterator[None]:
    """The command's console wide enough that no value wraps, so each can be found whole."""
    width = _cli._console.width
    _cli._console.width = 50_000
    yield
    _cli._console.width = width


def invoke(*args: str) -> Result:
    return CliRunner().invoke(_cli.cli, list(args), catch_exceptions=True)


def assert_drawn_escaped(result: Result, *values: str) -> None:
    assert result.exit_code == 0, (result.output, result.exception)
    assert not unprintable(result.output)
    for value in values:  # as the reader gets it: JSON joins two surrogates that make a pair into one character
        assert printable(json.loads(json.dumps(value))) in result.output


@settings(max_examples=40, deadline=None)
@given(h=hostile_runs)
@example(h=ISSUE_EXAMPLE)
def test_show_trace_and_traces_draw_hostile_names_escaped(h, jaeger, wide_cli, tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / "hostile.otlp.json"
    path.write_text(json.dumps(otlp_document(h)))  # json escapes lone surrogates; the reader restores them
    assert_drawn_escaped(invoke("show", str(path)), h.agent, h.stop, *h.tools)

    jaeger.answer(f"/api/v3/traces/{TRACE_ID}", as_api_v3(jaeger_trace(h)))
    assert_drawn_escaped(invoke("trace", TRACE_ID, "--jaeger", jaeger.url), h.agent, h.stop, *h.tools)

    jaeger.answer("/api/traces", {"data": [jaeger_trace(h, trace_id=h.error)], "errors": None})
    service = h.agent[:200].encode("utf-8", "replace").decode()  # an argument: UTF-8, and short enough for a URL
    assert_drawn_escaped(invoke("traces", "--jaeger", jaeger.url, "--service", service), h.agent, h.stop)


@settings(max_examples=60, deadline=None)
@given(h=hostile_runs, width=st.integers(20, 200))
@example(h=ISSUE_EXAMPLE, width=80)
def test_the_tables_and_trees_draw_hostile_names_at_any_width(h, width):
    """The renderers themselves, on a console that still reads markup in plain strings: they
    hand rich none, so they do not depend on the command's console having markup off."""
    console = Console(file=io.StringIO(), width=width, color_system=None)
    (trace,) = group_traces(decode(otlp_document(h)))
    runs = trace.runs()
    tally = StopTally()
    for run in runs:
        tally.add(run)
    for renderable in (runs_table(runs, title=h.error), stop_counts_table(tally, title=h.error),
                       Listing(runs, title=h.error), trace_tree(trace)):
        console.print(renderable)
    assert not unprintable(console.file.getvalue())


@pytest.mark.parametrize("value, shown", [
    ("\x1b[2J", "\\x1b[2J"),
    ("\x9b2J", "\\x9b2J"),
    ("a\x00b\x7fc", "a\\x00b\\x7fc"),
    ("line\nbreak\ttab\rreturn", "line\\nbreak\\ttab\\rreturn"),
    ("bad\ud800name", "bad\\ud800name"),
    ("\u202egnp.exe", "\\u202egnp.exe"),
    ("[/] [bold]x[/bold]", "[/] [bold]x[/bold]"),  # markup is left as it is: rich is never asked to read it
    ("naïve 漢字 😀", "naïve 漢字 😀"),
    ("x" * 205, "x" * 200 + "… (+5 characters)"),
])
def test_printable_escapes_what_a_terminal_would_obey(value, shown):
    assert printable(value) == shown


# --- errors and the command's own lines ---------------------------------------------------

def test_an_error_message_quoting_a_hostile_path_is_one_escaped_line(tmp_path):
    result = invoke("show", str(tmp_path / "\x1b[2Jmissing[/].json"))
    assert result.exit_code == 1
    assert result.output == f"Error: {tmp_path}/\\x1b[2Jmissing[/].json: no such file\n"  # all it prints: one line


def test_jaegers_own_error_text_is_escaped(jaeger):
    jaeger.answer("/api/traces", {"data": None, "errors": [{"code": 400, "msg": "\x1b[2Jbad [/] request"}]}, status=400)
    result = invoke("traces", "--jaeger", jaeger.url)
    assert result.exit_code == 1
    assert "answered HTTP 400: \\x1b[2Jbad [/] request" in result.output
    assert not unprintable(result.output)


def test_the_demo_prints_a_hostile_output_path_escaped(tmp_path, wide_cli):
    out = tmp_path / "[bold]\x1b[2J[red].otlp.json"  # a "/" would be a directory
    result = invoke("demo", "--pace", "0", "--only", "help-desk", "--out", str(out))
    assert result.exit_code == 0, (result.output, result.exception)
    assert out.exists()
    assert f"spans written to {tmp_path}/[bold]\\x1b[2J[red].otlp.json" in result.output
    assert not unprintable(result.output)


# --- as the issue found it: a real process writing to a real pipe -----------------------

def test_trace_of_a_run_with_a_markup_tool_name_exits_0_and_writes_no_escape_sequence(jaeger):
    """Was: ``MarkupError`` traceback for ``[/]``, ``UnicodeEncodeError`` for a lone surrogate,
    and the raw ``ESC [2J`` on stdout."""
    jaeger.answer(f"/api/v3/traces/{TRACE_ID}", as_api_v3(jaeger_trace(ISSUE_EXAMPLE)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["COLUMNS"] = "200"
    done = subprocess.run([sys.executable, "-m", "tracedagent", "trace", TRACE_ID, "--jaeger", jaeger.url],
                          cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    stdout = done.stdout.decode("utf-8")  # strict: a surrogate could not have been written
    assert b"\x1b" not in done.stdout and not done.stderr
    assert "execute_tool [/]" in stdout and "execute_tool bad\\ud800name" in stdout
    assert "invoke_agent \\x1b[2Jsupport" in stdout
