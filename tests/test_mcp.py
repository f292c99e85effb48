"""Tools from MCP servers (``tracedagent.mcp``), against real servers run as subprocesses: the
reference ``mcp-server-time`` over stdio, and the test server ``mcp_servers/workshop.py`` (the
``mcp`` SDK's own server) over stdio and streamable HTTP. Only the model is scripted."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracedagent import Agent, Budget, Completion, Registry, Stop, ToolCall, ToolOutcome
from tracedagent._core import _names as N
from tracedagent.mcp import MCPInvalidReply, MCPServer, MCPUnavailable
from tracedagent.testing import FakeModel, Recorder, tool_call

pytest.importorskip("mcp")  # the `test` extra installs it: CI runs every test here

WORKSHOP = [str(Path(__file__).parent / "mcp_servers" / "workshop.py")]
TIME_SERVER = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
CALM = 60.0
"""A call's timeout where the call is meant to succeed: generous, the test machine is shared."""


def turn(*calls: tuple[str, dict]) -> Completion:
    """One model turn requesting ``calls`` at once."""
    return Completion(text="", finish_reason="tool_calls",
                      tool_calls=[ToolCall(id=f"c{i}", name=name, arguments=args) for i, (name, args) in enumerate(calls)])


def tool_spans(recorder: Recorder) -> list:
    return [s for s in recorder.spans() if s.name.startswith("execute_tool")]


def named(recorder: Recorder, name: str) -> list:
    return [s for s in recorder.spans() if s.name == name]


def workshop(recorder: Recorder, **options) -> MCPServer:
    return MCPServer.stdio(sys.executable, WORKSHOP, tracer_provider=recorder.tracer_provider,
                           **{"timeout": CALM, **options})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_http(port: int) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, *WORKSHOP, "--http", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return process
        except OSError:
            if process.poll() is not None:
                raise RuntimeError("the workshop server exited on start")
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the workshop server did not listen in time")


@pytest.fixture(scope="module")
def http_url():
    port = free_port()
    process = serve_http(port)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(10)


# --- the reference server, over stdio --------------------------------------------------------

def test_mcp_server_time_over_stdio_answers_a_scripted_run_and_its_spans_carry_the_mcp_attributes():
    recorder = Recorder()
    with MCPServer.stdio(sys.executable, TIME_SERVER, tracer_provider=recorder.tracer_provider,
                         timeout=CALM) as time_server:
        tools = time_server.tools()
        assert {t.name for t in tools} == {"get_current_time", "convert_time"}
        assert tools[0].parameters["required"], "the schema is the server's own"
        model = FakeModel([turn(("get_current_time", {"timezone": "Asia/Tokyo"}),
                                ("convert_time", {"source_timezone": "UTC", "time": "12:00",
                                                  "target_timezone": "Asia/Tokyo"})),
                           "It is evening in Tokyo."])
        run = Agent(model, Registry(tools), **recorder.providers).run("What time is it in Tokyo?")

    assert run.stop is Stop.ANSWERED
    now, converted = run.steps[0].tool_results
    assert now.outcome is ToolOutcome.OK and '"timezone": "Asia/Tokyo"' in now.content
    assert converted.outcome is ToolOutcome.OK and '"datetime": "' in converted.content and "21:00" in converted.content
    assert "Asia/Tokyo" in str(model.calls[1]["messages"][-1]), "the model was shown the result"

    [initialize] = named(recorder, "initialize")
    [listing] = named(recorder, "tools/list")
    [connect] = named(recorder, N.MCP_CONNECT_SPAN_NAME)
    assert initialize.parent.span_id == listing.parent.span_id == connect.context.span_id, \
        "opened outside a run, the session's requests nest under a span of their own"
    session_id = initialize.attributes[N.MCP_SESSION_ID]
    ids = set()
    for span in tool_spans(recorder):
        a = span.attributes
        assert a[N.MCP_METHOD_NAME] == "tools/call" and a[N.NETWORK_TRANSPORT] == "pipe"
        assert a[N.MCP_SESSION_ID] == session_id and a[N.MCP_PROTOCOL_VERSION] == initialize.attributes[N.MCP_PROTOCOL_VERSION]
        assert N.SERVER_ADDRESS not in a and a[N.MCP_SERVER] == "mcp_server_time"
        ids.add(a[N.JSONRPC_REQUEST_ID])
    assert len(ids) == 2 and initialize.attributes[N.JSONRPC_REQUEST_ID] not in ids
    assert not [s for s in recorder.spans() if s.name.startswith("MCP send")], \
        "the tool span stands for the request: the SDK opens no second client span"


def test_a_server_that_cannot_be_started_is_one_named_error_at_the_with():
    recorder = Recorder()
    with pytest.raises(MCPUnavailable, match="could not start or reach"):
        with MCPServer.stdio("/nonexistent/mcp-server", tracer_provider=recorder.tracer_provider):
            pass
    [connect] = named(recorder, N.MCP_CONNECT_SPAN_NAME)
    assert connect.attributes[N.ERROR_TYPE] == "FileNotFoundError"
    with pytest.raises(MCPUnavailable):
        with MCPServer.http(f"http://127.0.0.1:{free_port()}/mcp", connect_timeout=20):
            pass


def test_the_connect_span_names_why_the_connection_failed_not_the_cancellation_it_caused(caplog):
    """The SDK's transport cancels the first request when it cannot connect and raises its own
    error only as it exits: the span says ConnectError (the refused port), or timeout (a server
    that accepts and never answers), as the raised MCPUnavailable does; never CancelledError."""
    recorder = Recorder()
    with pytest.raises(MCPUnavailable, match="ConnectError"):
        with MCPServer.http(f"http://127.0.0.1:{free_port()}/mcp", connect_timeout=20,
                            tracer_provider=recorder.tracer_provider):
            pass
    [refused] = named(recorder, N.MCP_CONNECT_SPAN_NAME)
    assert refused.attributes[N.ERROR_TYPE] == "ConnectError" and refused.status.status_code.name == "ERROR"

    recorder = Recorder()
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        with pytest.raises(MCPUnavailable, match="no answer in time"):
            with MCPServer.http(f"http://127.0.0.1:{silent.getsockname()[1]}/mcp", connect_timeout=1,
                                tracer_provider=recorder.tracer_provider):
                pass
    [silent_span] = named(recorder, N.MCP_CONNECT_SPAN_NAME)
    assert silent_span.attributes[N.ERROR_TYPE] == N.ERROR_TIMEOUT
    assert all(span.end_time is not None for span in recorder.spans())
    assert "never retrieved" not in caplog.text


def test_a_url_that_cannot_be_read_is_never_shown_since_it_may_hold_a_key():
    """The server's name falls back to its host, and without one to "mcp", never to the URL."""
    recorder = Recorder()
    with pytest.raises(MCPUnavailable) as raised:
        with MCPServer.http("localhost:8080/mcp?api_key=sk-live-SECRET123", connect_timeout=20,
                            tracer_provider=recorder.tracer_provider):
            pass
    assert "SECRET" not in str(raised.value)
    assert recorder.spans() and not any("SECRET" in str(value) for span in recorder.spans()
                                        for value in span.attributes.values())


def test_a_servers_own_names_and_ids_are_bounded_on_the_spans():
    recorder = Recorder()
    long_name = "n" * 20_000
    with MCPServer.stdio(sys.executable, [*WORKSHOP, "--echo-as", long_name], timeout=CALM,
                         tracer_provider=recorder.tracer_provider) as server:
        [tool] = [t for t in server.tools(prefix="p_") if t.name.startswith("p_nnn")]
        run = Agent(FakeModel([turn((tool.name, {"text": "hi"})), "done"]), [tool], **recorder.providers).run("go")
    assert run.ok and "hi" in run.steps[0].tool_results[0].content
    [span] = tool_spans(recorder)
    assert span.attributes[N.MCP_TOOL_NAME] == long_name[:N.MAX_NAME_LENGTH]
    assert all(len(value) <= N.MAX_NAME_LENGTH for s in recorder.spans() for value in s.attributes.values()
               if isinstance(value, str))


def test_a_server_error_with_the_sdks_connection_closed_code_is_the_servers_error_not_a_lost_connection():
    recorder = Recorder()
    with workshop(recorder) as server:
        script = [turn(("overloaded", {})), turn(("overloaded", {})), turn(("pid", {})), "done"]
        run = Agent(FakeModel(script), server.tools(), **recorder.providers).run("go")
    first, second = run.steps[0].tool_results[0], run.steps[1].tool_results[0]
    assert (first.error_type, second.error_type) == ("MCPRequestError", "MCPRequestError")
    assert "too busy, try later" in first.content, "the model sees the server's message"
    sessions = {s.attributes[N.MCP_SESSION_ID] for s in tool_spans(recorder)}
    assert len(sessions) == 1, "the session was kept, not restarted after each error"


# --- outcomes ---------------------------------------------------------------------------------

def test_every_kind_of_answer_is_a_named_outcome_the_model_sees(http_url):
    recorder = Recorder()

    async def go():
        async with MCPServer.http(http_url, tracer_provider=recorder.tracer_provider, timeout=CALM) as server:
            model = FakeModel([turn(("echo", {"text": "hi"}), ("picture", {}), ("refuse", {"reason": "closed"}),
                                    ("reject", {}), ("echo", {})), "done"])
            return await Agent(model, Registry(server.tools()), **recorder.providers).arun("go")

    run = asyncio.run(go())
    assert run.stop is Stop.ANSWERED, "no failure of a server's raises out of the run"
    echo, picture, refused, rejected, invalid = run.steps[0].tool_results
    assert (echo.outcome, echo.content) == (ToolOutcome.OK, '{"result": "hi"}'), "structured content, as JSON"
    assert picture.content == "a pixel\n[image image/png, 32 bytes]", "other content named with its type and size"
    assert (refused.outcome, refused.error_type) == (ToolOutcome.ERROR, "MCPToolError")
    assert refused.content.startswith("Error: ") and "refused: closed" in refused.content, "an isError result's text is what the model sees"
    assert (rejected.outcome, rejected.error_type) == (ToolOutcome.ERROR, "MCPRequestError")
    assert "-32042" in rejected.content and "the workshop is closed" in rejected.content
    assert invalid.outcome is ToolOutcome.INVALID_ARGUMENTS, "the registry checks the server's schema"

    spans = {s.attributes[N.GEN_AI_TOOL_CALL_ID]: s for s in tool_spans(recorder)}
    assert spans["c3"].attributes[N.RPC_RESPONSE_STATUS_CODE] == "-32042"
    assert spans["c2"].attributes[N.ERROR_TYPE] == "MCPToolError"
    assert N.JSONRPC_REQUEST_ID not in spans["c4"].attributes, "an invalid call never reaches the server"
    a = spans["c0"].attributes
    assert (a[N.NETWORK_TRANSPORT], a[N.SERVER_ADDRESS], a[N.SERVER_PORT]) == ("tcp", "127.0.0.1", int(http_url.split(":")[2].split("/")[0]))
    assert a[N.MCP_SESSION_ID] == named(recorder, "initialize")[0].attributes[N.MCP_SESSION_ID]
    assert len(a[N.MCP_SESSION_ID]) >= 16, "over HTTP the session id is the server's Mcp-Session-Id"


def test_a_server_that_never_answers_is_a_timeout_and_the_session_goes_on():
    recorder = Recorder()
    with workshop(recorder, timeout=1.0) as server:
        model = FakeModel([tool_call("hang"), tool_call("pid"), "done"])
        run = Agent(model, Registry(server.tools()), **recorder.providers).run("go")
        assert server.connections == 1
    hung, pid = [r for step in run.steps for r in step.tool_results]
    assert hung.outcome is ToolOutcome.TIMEOUT and "timed out after 1 s" in hung.content
    assert pid.outcome is ToolOutcome.OK and json.loads(pid.content)["result"] > 0
    assert tool_spans(recorder)[0].attributes[N.ERROR_TYPE] == "timeout"


def test_a_server_killed_mid_call_is_reported_on_that_call_and_started_again_for_the_next():
    recorder = Recorder()
    with workshop(recorder) as server:
        tools = Registry(server.tools())
        model = FakeModel([tool_call("pid"), tool_call("die"), tool_call("pid", {}, id="again"), "done"])
        run = Agent(model, tools, **recorder.providers).run("go")
        assert server.connections == 2
    first, died, second = [r for step in run.steps for r in step.tool_results]
    assert run.stop is Stop.ANSWERED
    assert (died.outcome, died.error_type) == (ToolOutcome.ERROR, "MCPConnectionLost")
    assert "opened again for the next call" in died.content
    assert second.outcome is ToolOutcome.OK and second.content != first.content, "a new server process"

    spans = {s.attributes[N.GEN_AI_TOOL_CALL_ID]: s for s in tool_spans(recorder)}
    restarted = [s for s in named(recorder, "initialize") if s.attributes.get(N.MCP_RESTART)]
    assert [s.parent.span_id for s in restarted] == [spans["again"].context.span_id], \
        "the restart's initialize nests under the call that needed it"
    assert spans["again"].attributes[N.MCP_SESSION_ID] != spans[next(iter(spans))].attributes[N.MCP_SESSION_ID]


async def test_a_server_sigkilled_mid_call_is_reported_on_that_call(tmp_path):
    recorder = Recorder()
    started = tmp_path / "started"
    async with workshop(recorder) as server:
        tools = Registry(server.tools())
        model = FakeModel([tool_call("hang", {"started": str(started)}), tool_call("echo", {"text": "after"}), "done"])
        running = asyncio.ensure_future(Agent(model, tools, **recorder.providers).arun("go"))
        deadline = time.monotonic() + CALM
        while not (started.exists() and started.read_text()) and time.monotonic() < deadline and not running.done():
            await asyncio.sleep(0.05)
        os.kill(int(started.read_text()), signal.SIGKILL)
        run = await running
        assert server.connections == 2
    killed, after = [r for step in run.steps for r in step.tool_results]
    assert (killed.outcome, killed.error_type) == (ToolOutcome.ERROR, "MCPConnectionLost")
    assert (after.outcome, after.content) == (ToolOutcome.OK, '{"result": "after"}'), "started again for the next call"


def test_a_server_gone_for_good_is_an_error_on_each_call():
    port = free_port()
    process = serve_http(port)
    recorder = Recorder()
    with MCPServer.http(f"http://127.0.0.1:{port}/mcp", tracer_provider=recorder.tracer_provider,
                        timeout=CALM, connect_timeout=20) as server:
        tools = Registry(server.tools())
        process.kill()
        process.wait(10)
        model = FakeModel([tool_call("echo", {"text": "a"}), tool_call("echo", {"text": "b"}), "done"])
        run = Agent(model, tools, **recorder.providers).run("go")
    assert run.stop is Stop.ANSWERED
    outcomes = [(r.outcome, r.error_type) for step in run.steps for r in step.tool_results]
    assert all(outcome is ToolOutcome.ERROR and kind in ("MCPConnectionLost", "MCPUnavailable")
               for outcome, kind in outcomes), outcomes


# --- the tool list ----------------------------------------------------------------------------

def test_the_tool_list_follows_list_changed():
    recorder = Recorder()
    with workshop(recorder) as server:
        assert "extra" not in Registry(server.tools())
        run = Agent(FakeModel([tool_call("grow"), "done"]), Registry(server.tools()), **recorder.providers).run("go")
        assert run.steps[0].tool_results[0].outcome is ToolOutcome.OK
        tools = Registry(server.tools())
        assert "extra" in tools, "applied before the call that changed it returned"
        run = Agent(FakeModel([tool_call("extra", {"n": 21}), "done"]), tools, **recorder.providers).run("go")
    assert run.steps[0].tool_results[0].content == '{"result": 42}'
    assert len(named(recorder, "tools/list")) == 2


def test_clashing_tool_names_are_refused_unless_prefixed():
    recorder = Recorder()
    with workshop(recorder) as a, workshop(recorder) as b:
        with pytest.raises(ValueError, match="two tools are named 'echo'"):
            Registry([*a.tools(), *b.tools()])
        tools = Registry([*a.tools(prefix="a_"), *b.tools(prefix="b_")])
        run = Agent(FakeModel([turn(("a_pid", {}), ("b_pid", {})), "done"]), tools, **recorder.providers).run("go")
    a_pid, b_pid = run.steps[0].tool_results
    assert a_pid.ok and b_pid.ok and a_pid.content != b_pid.content, "each call went to its own server"
    spans = {s.attributes[N.GEN_AI_TOOL_NAME]: s.attributes for s in tool_spans(recorder)}
    assert spans["a_pid"][N.MCP_TOOL_NAME] == spans["b_pid"][N.MCP_TOOL_NAME] == "pid"
    assert spans["a_pid"][N.MCP_SESSION_ID] != spans["b_pid"][N.MCP_SESSION_ID]


# --- traces -----------------------------------------------------------------------------------

def test_every_call_carries_the_tool_spans_trace_context_to_the_server():
    recorder = Recorder()
    with workshop(recorder) as server:
        run = Agent(FakeModel([tool_call("traceparent"), "done"]), Registry(server.tools()),
                    **recorder.providers).run("go")
    [span] = tool_spans(recorder)
    _, trace_id, span_id, _ = run.steps[0].tool_results[0].content.split("-")
    assert (trace_id, span_id) == (f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"), \
        "the server's parent is the execute_tool span itself"


async def test_a_hundred_concurrent_aruns_share_one_session_and_keep_their_own_traces():
    recorder = Recorder()
    async with workshop(recorder) as server:
        tools = Registry(server.tools())

        async def one(i: int):
            model = FakeModel([tool_call("echo", {"text": f"run {i}"}), tool_call("traceparent"), f"done {i}"])
            return await Agent(model, tools, **recorder.providers).arun(f"task {i}")

        runs = await asyncio.gather(*(one(i) for i in range(100)))
        assert server.connections == 1
    assert all(run.stop is Stop.ANSWERED for run in runs)
    assert [run.steps[0].tool_results[0].content for run in runs] == [f'{{"result": "run {i}"}}' for i in range(100)]
    assert len({run.trace_id for run in runs}) == 100
    for run in runs:
        sent = run.steps[1].tool_results[0].content.split("-")[1]
        assert sent == run.trace_id, "each server request carried its own run's trace"
    spans = tool_spans(recorder)
    assert len(spans) == 200 and len({s.attributes[N.JSONRPC_REQUEST_ID] for s in spans}) == 200
    assert len({s.attributes[N.MCP_SESSION_ID] for s in spans}) == 1
    by_trace = {}
    for s in spans:
        by_trace.setdefault(f"{s.context.trace_id:032x}", []).append(s)
    assert sorted(by_trace) == sorted(run.trace_id for run in runs) and all(len(v) == 2 for v in by_trace.values())


# --- an agent served as an MCP tool ------------------------------------------------------------

SERVED = str(Path(__file__).parent / "mcp_servers" / "served_agent.py")
HERE = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
"""The served agent imports this checkout's tracedagent (a stdio server inherits few variables)."""


def test_an_agent_served_as_an_mcp_tool_answers_or_names_its_stop():
    recorder = Recorder()
    with MCPServer.stdio(sys.executable, [SERVED], env=HERE, tracer_provider=recorder.tracer_provider, timeout=CALM) as served, \
            MCPServer.stdio(sys.executable, [SERVED, "--give-up"], env=HERE, tracer_provider=recorder.tracer_provider,
                            timeout=CALM) as giving_up:
        [orders] = served.tools()
        assert orders.name == "orders" and orders.parameters["required"] == ["task"]
        tools = Registry([orders, *giving_up.tools(prefix="lazy_")])
        model = FakeModel([turn(("orders", {"task": "Where is A-17?"}), ("lazy_orders", {"task": "Where is A-17?"})),
                           "done"])
        run = Agent(model, tools, **recorder.providers).run("go")
    answered, gave_up = run.steps[0].tool_results
    assert (answered.outcome, answered.content) == (ToolOutcome.OK, "Order A-17 shipped on Monday.")
    assert (gave_up.outcome, gave_up.error_type) == (ToolOutcome.ERROR, "MCPToolError")
    assert "step_budget_exhausted" in gave_up.content


async def test_mcp_tools_work_under_stream_and_astream_too():
    recorder = Recorder()
    async with workshop(recorder) as server:
        tools = Registry(server.tools())
        async with Agent(FakeModel([tool_call("echo", {"text": "streamed"}), "done"]), tools,
                         **recorder.providers).astream("go") as stream:
            async for _ in stream:
                pass
        async_run = stream.run

        def sync_stream():
            with Agent(FakeModel([tool_call("echo", {"text": "streamed too"}), "done"]), tools,
                       **recorder.providers).stream("go") as stream:
                for _ in stream:
                    pass
            return stream.run

        sync_run = await asyncio.to_thread(sync_stream)
    assert async_run.steps[0].tool_results[0].content == '{"result": "streamed"}'
    assert sync_run.steps[0].tool_results[0].content == '{"result": "streamed too"}'
    assert [s.attributes[N.MCP_METHOD_NAME] for s in tool_spans(recorder)] == ["tools/call", "tools/call"]


# --- the run's deadline -----------------------------------------------------------------------

@pytest.mark.parametrize("timeout", [10.0, None], ids=["own_timeout_10s", "no_timeout"])
@pytest.mark.parametrize("driver", ["run", "arun"])
def test_the_runs_deadline_cuts_an_mcp_call_under_run_as_under_arun(driver, timeout):
    """``run`` cannot cut a call, but an MCP call waits on the session's loop, where it can be
    cancelled: a 2 s budget ends a 10 s call at 2 s, with or without the tool's own timeout."""
    recorder = Recorder()
    with workshop(recorder, timeout=timeout) as server:
        agent = Agent(FakeModel([tool_call("nap", {"seconds": 10}), "done"]), Registry(server.tools()),
                      budget=Budget(max_seconds=2), **recorder.providers)
        started = time.monotonic()
        run = agent.run("go") if driver == "run" else asyncio.run(agent.arun("go"))
        took = time.monotonic() - started
        after = Agent(FakeModel([tool_call("pid"), "done"]), Registry(server.tools())).run("go")
        assert after.steps[0].tool_results[0].ok and server.connections == 1, "the session goes on"
    assert run.stop is Stop.TIME_BUDGET
    [napped] = run.steps[0].tool_results
    assert (napped.outcome, napped.deadline_cut) == (ToolOutcome.TIMEOUT, True)
    assert took < 8, f"the call was cut at the run's deadline, not answered after 10 s ({took:.1f} s)"
    [span] = tool_spans(recorder)
    assert span.attributes[N.TOOL_DEADLINE_CUT] is True and span.attributes[N.ERROR_TYPE] == N.ERROR_TIMEOUT


# --- a server that breaks the protocol ----------------------------------------------------------

HOSTILE = [str(Path(__file__).parent / "mcp_servers" / "hostile.py")]


def hostile(recorder: Recorder, *args: str, **options) -> MCPServer:
    return MCPServer.stdio(sys.executable, [*HOSTILE, *args], tracer_provider=recorder.tracer_provider,
                           **{"timeout": CALM, **options})


def test_a_json_rpc_errors_message_reaches_the_model_cut_like_a_result():
    recorder = Recorder()
    with hostile(recorder, max_result_length=1000) as server:
        run = Agent(FakeModel([tool_call("huge_error", {"length": 2_000_000}), "done"]), Registry(server.tools()),
                    **recorder.providers).run("go")
    [error] = run.steps[0].tool_results
    assert (error.outcome, error.error_type) == (ToolOutcome.ERROR, "MCPRequestError")
    assert "-32050" in error.content and error.content.endswith("...[truncated: 2000000 characters]")
    assert len(error.content) < 1200, len(error.content)


def test_a_flood_of_list_changed_is_one_refresh_at_a_time_and_one_queued():
    """2,000 notifications during one call: not 2,000 tools/list requests, but the one running
    when they come and one after it, which reads every change."""
    recorder = Recorder()
    with hostile(recorder) as server:
        tools = Registry(server.tools())
        run = Agent(FakeModel([tool_call("flood", {"count": 2000}), tool_call("listings"), "done"]), tools,
                    **recorder.providers).run("go")
        assert [t.name for t in server.tools()] == tools.names, "the list was read again, and is whole"
    flooded, listings = [r for step in run.steps for r in step.tool_results]
    assert (flooded.outcome, flooded.content) == (ToolOutcome.OK, "flooded")
    refreshes = len(named(recorder, "tools/list")) - 1
    assert 1 <= refreshes <= 2, refreshes
    assert int(listings.content) == refreshes + 1, "the server saw as many as were traced"


@pytest.mark.parametrize("tool, wrong", [
    ("not_an_object", "dict_type at JSONRPCResponse.result"),
    ("cut_short", "json_invalid"),
    ("deep_result", "recursion limit exceeded"),
    ("wrong_result", "list_type at content"),
])
def test_a_reply_that_cannot_be_read_ends_the_call_at_once_named(tool, wrong):
    """Not a timeout after the call's full wait: the server answered, with something that is
    not a reply; the model is told what was wrong with it, the spans its class."""
    recorder = Recorder()
    with hostile(recorder, timeout=30) as server:
        started = time.monotonic()
        run = Agent(FakeModel([tool_call(tool), tool_call("stray_line"), "done"]), Registry(server.tools()),
                    **recorder.providers).run("go")
        took = time.monotonic() - started
        assert server.connections == 1
    unreadable, after_stray_line = [r for step in run.steps for r in step.tool_results]
    assert (unreadable.outcome, unreadable.error_type) == (ToolOutcome.ERROR, "MCPInvalidReply")
    assert "could not be read" in unreadable.content and wrong in unreadable.content
    assert took < 20, f"{took:.1f} s: the call waited for its timeout"
    assert (after_stray_line.outcome, after_stray_line.content) == (ToolOutcome.OK, "after the stray line"), \
        "a line that names no request (a log line on stdout) is ignored, and the session goes on"
    assert tool_spans(recorder)[0].attributes[N.ERROR_TYPE] == "MCPInvalidReply"


def test_a_tool_list_nested_deeper_than_the_sdk_reads_is_named_at_the_with_not_no_answer_in_time():
    recorder = Recorder()
    started = time.monotonic()
    with pytest.raises(MCPUnavailable) as raised:
        with hostile(recorder, "--deep-schema", "300", connect_timeout=20):
            pass
    assert time.monotonic() - started < 15, "it ended when the reply came, not at connect_timeout"
    assert "no answer in time" not in str(raised.value) and "recursion limit exceeded" in str(raised.value)
    assert isinstance(raised.value.__cause__, MCPInvalidReply)
    [listing] = named(recorder, "tools/list")
    [connect] = named(recorder, N.MCP_CONNECT_SPAN_NAME)
    assert listing.attributes[N.ERROR_TYPE] == connect.attributes[N.ERROR_TYPE] == "MCPInvalidReply"
    assert all(span.end_time is not None for span in recorder.spans())
