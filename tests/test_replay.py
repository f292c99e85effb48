"""Replay: every demo scenario, recorded with content capture on, becomes a pytest file that
passes on the recorded behaviour - run by pytest in a subprocess, as a user would run it -
and fails, with the diverging step, when a stub's result changes. Bad inputs get one line.

The recordings are real: the demo's agents, the real OpenTelemetry SDK, the OTLP/JSON file
the demo writes. Only the model is scripted (it always is, in a test).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from _fake_servers import RoutedServer
from jaeger_v3 import NOT_FOUND
from test_cli import assert_fails_cleanly, tracedagent
from tracedagent import Agent, Budget, Completion, FatalToolError, Registry, Stop, ToolCall, ToolOutcome, tool
from tracedagent._core import _names as N
from tracedagent._cli._demo import SCENARIOS, Recording, build_agent, run_scenario
from tracedagent._traces._otlp_json import OtlpJsonWriter
from tracedagent.testing import FakeModel, Replay, ReplayMismatch, tool_call

BY_NAME = {s.name: s for s in SCENARIOS if s.stops_with is not Stop.CANCELLED}
"""The scenarios replay can turn into tests: every one but the run whose reader left (a run that
did not return is refused, by name: test_a_cancelled_run_is_refused_by_name). The typed one
(refund-triage, invalid_output) included: its generated test imports its output type from the
path its trace recorded (test_a_typed_run_replays_with_its_recorded_output_type)."""
DEADLINE_PACE = 0.25
"""slow-carrier's latencies and deadline scale with the pace (down to the demo's floor), so it
is recorded at this pace, where the deadline cuts the hanging tool call off with room to spare."""


def record(path: Path, runs: list[tuple[Any, Any]], **env: str) -> dict[str, Any]:
    """Run each ``(agent_factory, runner)`` into one OTLP/JSON file; returns the runs."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    provider = TracerProvider()
    writer = OtlpJsonWriter(path)
    provider.add_span_processor(Recording(writer))
    try:
        done = [run(make(provider)) for make, run in runs]
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    provider.shutdown()
    writer.close()
    return done


def scenario_run(scenario, *, capture: bool = True):
    pace = DEADLINE_PACE if scenario.stops_with is Stop.TIME_BUDGET else 0
    return (lambda tp: build_agent(scenario, pace=pace, tracer_provider=tp, capture_content=capture),
            lambda agent: run_scenario(agent, scenario))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Every scenario recorded once, at the default capture limit (call-flood's 200-call turn
    included): every generated test passing is the proof that every demo run replays."""
    path = tmp_path_factory.mktemp("recorded") / "demo.otlp.json"
    runs = record(path, [scenario_run(s) for s in SCENARIOS])
    return path, {s.name: run for s, run in zip(SCENARIOS, runs)}


def test_a_cancelled_run_is_refused_by_name(recorded, tmp_path):
    path, runs = recorded
    [cancelled] = [name for name, run in runs.items() if run.stop is Stop.CANCELLED]
    assert_fails_cleanly(tracedagent("replay", path, "--trace", runs[cancelled].trace_id, "-o", tmp_path / "t.py"),
                         f"the run of {cancelled!r} was cancelled; only a run that returned can be replayed")


@pytest.fixture(scope="module")
def generated(recorded, tmp_path_factory):
    """`tracedagent replay` on every scenario, into one directory of tests."""
    path, runs = recorded
    out = tmp_path_factory.mktemp("generated")
    for name, run in runs.items():
        if name not in BY_NAME:
            continue
        result = tracedagent("replay", path, "--trace", run.trace_id, "-o", out / f"test_replay_{name.replace('-', '_')}.py")
        assert result.returncode == 0, result.stderr
        assert "Wrote" in result.stdout
    return out


def pytest_in(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=directory,
                          capture_output=True, text=True, timeout=120)


def test_every_generated_test_passes_on_the_recorded_behaviour(generated):
    result = pytest_in(generated, ".")
    assert result.returncode == 0, result.stdout[-3000:]
    assert f"{len(BY_NAME)} passed" in result.stdout


@pytest.mark.parametrize("name", list(BY_NAME))
def test_the_replay_reproduces_the_stop_reason_and_trajectory(recorded, generated, name):
    _, runs = recorded
    original = runs[name]
    replay = Replay.from_file(generated / f"test_replay_{name.replace('-', '_')}.json")
    again = replay.run()
    replay.check(again)
    assert again.stop is original.stop is BY_NAME[name].stops_with
    assert again.step_count == original.step_count
    assert again.requested_tools() == original.requested_tools()
    assert again.trajectory() == original.trajectory()
    assert again.blocked_tools() == original.blocked_tools()
    assert [[r.outcome for r in s.tool_results] for s in again.steps] == \
        [[r.outcome for r in s.tool_results] for s in original.steps]
    assert (again.own_input_tokens, again.own_output_tokens) == (original.own_input_tokens, original.own_output_tokens)


def test_a_typed_run_replays_with_its_recorded_output_type(recorded, generated):
    _, runs = recorded
    [typed] = [s for s in SCENARIOS if s.output_type is not None]
    original = runs[typed.name]
    source = (generated / "test_replay_refund_triage.py").read_text()
    assert "from tracedagent._cli._scenarios import RefundDecision" in source
    assert "replay.agent(output_type=RefundDecision)" in source
    replay = Replay.from_file(generated / "test_replay_refund_triage.json")
    assert replay.recording.output_type_path == "tracedagent._cli._scenarios:RefundDecision"
    again = replay.run()  # no output_type=: imported from the recorded path
    replay.check(again)
    assert again.stop is original.stop is Stop.INVALID_OUTPUT
    assert again.output_retries == original.output_retries == 1 and again.text == original.text


def test_the_deadline_cut_is_replayed_under_arun(recorded, generated):
    replay = Replay.from_file(generated / "test_replay_slow_carrier.json")
    assert replay.recording.driver == "arun"
    assert [c.outcome for c in replay.recording.stubs] == ["timeout"]
    assert replay.recording.stubs[0].until_deadline


def test_changing_one_stub_makes_the_generated_test_fail_with_the_diff(generated, tmp_path):
    for name in ("test_replay_prompt_injection.py", "test_replay_prompt_injection.json"):
        (tmp_path / name).write_bytes((generated / name).read_bytes())
    data = json.loads((tmp_path / "test_replay_prompt_injection.json").read_text())
    assert data["stubs"][0]["name"] == "read_ticket"
    data["stubs"][0]["result"] = "T-9: resolved, nothing to do."
    (tmp_path / "test_replay_prompt_injection.json").write_text(json.dumps(data))
    result = pytest_in(tmp_path, ".")
    assert result.returncode == 1, result.stdout
    assert "step 0 diverged" in result.stdout
    assert "expected: read_ticket" in result.stdout and "IGNORE ALL PREVIOUS" in result.stdout
    assert "actual:   read_ticket" in result.stdout and "T-9: resolved, nothing to do." in result.stdout


def test_a_changed_stub_outcome_changes_the_run_and_check_names_the_stop(generated):
    replay = Replay.from_file(generated / "test_replay_help_desk.json")
    replay.recording.stubs[0] = dataclasses.replace(replay.recording.stubs[0], outcome="fatal",
                                                    result="Fatal error: gone", error_type="FatalToolError")
    with pytest.raises(ReplayMismatch) as failure:
        replay.check(replay.run())
    message = str(failure.value)
    assert "step 0 diverged" in message and "lookup_order" in message and "-> fatal" in message
    assert "stop reason: expected answered, actual fatal_tool_error" in message


def test_a_sub_agent_run_replays_on_its_own(recorded):
    path, runs = recorded
    replay = Replay.from_file(path, runs["planner"].trace_id, agent="researcher")
    assert replay.recording.agent == "researcher"
    run = replay.run()
    replay.check(run)
    assert run.trajectory() == ["search_kb"]


def test_a_team_replays_as_one_run_with_its_sub_agents_stubbed(recorded):
    path, runs = recorded
    replay = Replay.from_file(path, runs["planner"].trace_id)
    assert replay.recording.agent == "planner"
    assert [(c.name, c.outcome) for c in replay.recording.stubs] == [("researcher", "ok"), ("writer", "error")]
    replay.check(replay.run())


# --- runs the demo has no scenario of ---------------------------------------------------------

def replayed(tmp_path: Path, make_agent, driver: str = "run", task: str = "go"):
    """Record one run of ``make_agent(tracer_provider)`` with content on, replay it, check it;
    returns the original run, the replay and the replayed run."""
    path = tmp_path / "run.otlp.json"
    play = (lambda agent: asyncio.run(agent.arun(task))) if driver == "arun" else (lambda agent: agent.run(task))
    [original] = record(path, [(make_agent, play)])
    replay = Replay.from_file(path)
    again = replay.run()
    replay.check(again)
    return original, replay, again


@tool(timeout=0.05)
async def slow_lookup(q: str) -> str:
    """Looks something up, too slowly."""
    await asyncio.sleep(5)
    return "found"


@tool
async def quick_lookup(q: str) -> str:
    """Looks something up at once."""
    return "found"


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_tools_own_timeout_replays_as_a_timeout(tmp_path, driver):
    original, replay, again = replayed(tmp_path, lambda tp: Agent(
        FakeModel([tool_call("slow_lookup", {"q": "a"}), "gave up"]), [slow_lookup], tracer_provider=tp,
        capture_content=True), driver)
    assert replay.recording.driver == driver
    assert [r.outcome for r in again.steps[0].tool_results] == [ToolOutcome.TIMEOUT] == \
        [r.outcome for r in original.steps[0].tool_results]
    assert again.steps[0].tool_results[0].content == "Error: slow_lookup timed out after 0.05 s"


@pytest.mark.parametrize("options", [{"parallel_tool_calls": False}, {"max_tool_concurrency": 1}])
def test_calls_the_deadline_kept_from_starting_stay_undispatched(tmp_path, options):
    turn = Completion(tool_calls=[ToolCall("c1", "slow", {"q": "a"}), ToolCall("c2", "quick_lookup", {"q": "b"})])
    slow = tool(name="slow")(slow_lookup.fn)
    original, replay, again = replayed(tmp_path, lambda tp: Agent(
        FakeModel([turn, "done"]), [slow, quick_lookup], budget=Budget(max_seconds=0.2), tracer_provider=tp,
        capture_content=True, **options), "arun")
    assert original.not_dispatched_tools() == again.not_dispatched_tools() == ["quick_lookup"]
    assert (replay.recording.parallel_tool_calls, replay.recording.max_tool_concurrency) == \
        (options.get("parallel_tool_calls", True), options.get("max_tool_concurrency"))
    assert again.stop is Stop.TIME_BUDGET


def test_a_parallel_turn_is_replayed_by_arun_even_when_its_calls_did_not_overlap(tmp_path):
    @tool
    async def charge(card: str) -> str:
        """Charges a card."""
        raise FatalToolError("the card processor is gone")

    turn = Completion(tool_calls=[ToolCall("c1", "charge", {"card": "x"}), ToolCall("c2", "quick_lookup", {"q": "b"})])
    original, replay, again = replayed(tmp_path, lambda tp: Agent(
        FakeModel([turn, "done"]), [charge, quick_lookup], tracer_provider=tp, capture_content=True), "arun")
    assert replay.recording.driver == "arun"
    assert original.trajectory() == again.trajectory() == ["quick_lookup"]  # the turn's other call ran


@pytest.mark.parametrize("last_call", [{"order_id": "secret"}, "lokup"])
def test_a_time_stop_after_a_call_that_never_reached_a_tool_recurs(tmp_path, last_call):
    @tool
    def lookup(order_id: str) -> str:
        """Looks an order up."""
        return "shipped"

    def policy(call):
        return "not that one" if call.arguments == {"order_id": "secret"} else None

    second = tool_call("lookup", last_call) if isinstance(last_call, dict) else tool_call(last_call, {"order_id": "2"})
    original, replay, again = replayed(tmp_path, lambda tp: Agent(
        FakeModel([tool_call("lookup", {"order_id": "1"}), second, "done"], latency=0.15),
        Registry([lookup], policy=policy), budget=Budget(max_seconds=0.25), tracer_provider=tp, capture_content=True))
    assert original.stop is again.stop is Stop.TIME_BUDGET
    assert again.step_count == original.step_count == 2


def test_a_run_of_more_tool_calls_than_a_span_lists_replays(tmp_path):
    @tool
    def lookup(n: int) -> str:
        """Looks a number up."""
        return str(n)

    turns = [Completion(tool_calls=[ToolCall(f"c{s}-{i}", "lookup", {"n": s * 100 + i}) for i in range(30)])
             for s in range(10)] + ["done"]
    original, replay, again = replayed(tmp_path, lambda tp: Agent(
        FakeModel(turns), [lookup], budget=Budget(max_steps=12, max_tool_calls_per_step=50), tracer_provider=tp,
        capture_content=True), task="count")
    assert len(again.requested_tools()) == 300
    assert len(replay.recording.tools["requested"]) == N.MAX_LIST_ITEMS
    assert replay.recording.tool_counts == {"requested": 300, "executed": 300}
    fewer = dataclasses.replace(replay.recording, tool_counts={"requested": 299, "executed": 299})
    with pytest.raises(ReplayMismatch, match="lengths of the cut tool lists"):
        Replay(fewer).check(again)


# --- real tools -----------------------------------------------------------------------------

def test_real_tools_replay_the_model_against_your_tools(recorded, tmp_path):
    path, runs = recorded
    (tmp_path / "shop_tools.py").write_text(
        "from tracedagent import Registry\nfrom tracedagent._cli._scenarios import lookup_order\n"
        "registry = Registry([lookup_order])\n"
        "def lookup_order_v2(order_id: str) -> str:\n    '''Look an order up.'''\n    return 'lost'\n"
        "from tracedagent import tool\nbroken = Registry([tool(name='lookup_order')(lookup_order_v2)])\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    for spec, name in (("shop_tools:registry", "test_replay_good.py"), ("shop_tools:broken", "test_replay_bad.py")):
        result = subprocess.run([sys.executable, "-m", "tracedagent", "replay", str(path), "--trace",
                                 runs["help-desk"].trace_id, "--real-tools", spec, "-o", name],
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
    assert "from shop_tools import registry as real_tools" in (tmp_path / "test_replay_good.py").read_text()
    assert pytest_in(tmp_path, "test_replay_good.py").returncode == 0
    bad = pytest_in(tmp_path, "test_replay_bad.py")
    assert bad.returncode == 1
    assert "step 0 diverged" in bad.stdout and "'lost'" in bad.stdout


def test_real_tools_that_are_not_a_registry(recorded, tmp_path):
    path, runs = recorded
    trace = runs["help-desk"].trace_id
    assert_fails_cleanly(tracedagent("replay", path, "--trace", trace, "--real-tools", "tracedagent._cli._scenarios:lookup_order",
                                     "-o", tmp_path / "t.py"), "is a function, not a tracedagent Registry")
    assert_fails_cleanly(tracedagent("replay", path, "--trace", trace, "--real-tools", "no_such_module:x",
                                     "-o", tmp_path / "t.py"), "cannot import it (ModuleNotFoundError")
    assert_fails_cleanly(tracedagent("replay", path, "--trace", trace, "--real-tools", "os; rm -rf:x",
                                     "-o", tmp_path / "t.py"), "expected module:attribute")


# --- bad inputs -------------------------------------------------------------------------------

def test_a_trace_without_content_says_how_to_capture_it(tmp_path):
    path = tmp_path / "plain.otlp.json"
    record(path, [scenario_run(BY_NAME["help-desk"], capture=False)])
    assert_fails_cleanly(tracedagent("replay", path, "-o", tmp_path / "t.py"),
                         f"record the run with content capture on (Agent(capture_content=True) or "
                         f"{N.ENV_CAPTURE_CONTENT}=true)")
    assert not (tmp_path / "t.py").exists()


def test_truncated_content_says_how_to_raise_the_limit(tmp_path):
    path = tmp_path / "cut.otlp.json"
    record(path, [scenario_run(BY_NAME["token-hungry-reader"])], **{N.ENV_CONTENT_MAX_LENGTH: "200"})
    assert_fails_cleanly(tracedagent("replay", path, "-o", tmp_path / "t.py"),
                         f"was cut at the capture limit; record the run again with {N.ENV_CONTENT_MAX_LENGTH} raised")


def test_a_trace_that_is_not_in_the_file(recorded, tmp_path):
    path, _ = recorded
    assert_fails_cleanly(tracedagent("replay", path, "--trace", "ab" * 16, "-o", tmp_path / "t.py"),
                         f"{path}: no trace {'ab' * 16}")
    assert_fails_cleanly(tracedagent("replay", path, "-o", tmp_path / "t.py"),
                         f"holds {len(SCENARIOS) + sum(bool(s.decisions) for s in SCENARIOS)} traces; "
                         "choose one by its trace id")  # a resumed run is a trace of its own


def test_a_trace_jaeger_does_not_have(tmp_path):
    missing = "4bf92f3577b34da6a3ce929d0e0e4736"
    jaeger = RoutedServer()
    try:
        jaeger.answer(f"/api/v3/traces/{missing}", NOT_FOUND, status=404)
        assert_fails_cleanly(tracedagent("replay", missing, "--jaeger", jaeger.url, "-o", tmp_path / "t.py"),
                             f"trace {missing} not found in Jaeger at {jaeger.url}")
    finally:
        jaeger.close()


def test_a_trace_that_is_not_a_tracedagent_run(tmp_path):
    provider = TracerProvider()
    path = tmp_path / "web.otlp.json"
    writer = OtlpJsonWriter(path)
    provider.add_span_processor(Recording(writer))
    with provider.get_tracer("web").start_as_current_span("GET /orders"):
        pass
    provider.shutdown()
    writer.close()
    assert_fails_cleanly(tracedagent("replay", path, "-o", tmp_path / "t.py"),
                         "has no tracedagent run (no invoke_agent span with tracedagent.stop_reason)")


def test_a_file_that_is_not_a_trace(tmp_path):
    path = tmp_path / "notes.json"
    path.write_text('{"hello": 1}')
    assert_fails_cleanly(tracedagent("replay", path, "-o", tmp_path / "t.py"), "not OTLP/JSON trace data")


# --- diff -------------------------------------------------------------------------------------

def test_diff_shows_where_two_runs_of_one_task_parted(tmp_path):
    help_desk = BY_NAME["help-desk"]
    stuck = dataclasses.replace(help_desk, script=[tool_call("lookup_order", {"order_id": "A-1001"})] * 4
                                + ["\x1b[2J done"], budget=Budget(max_steps=6, repeat_limit=2))
    path = tmp_path / "two.otlp.json"
    a, b = record(path, [scenario_run(help_desk), scenario_run(stuck)])
    result = tracedagent("diff", a.trace_id, b.trace_id, "--file", path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "First difference: step 1" in out
    assert "A: answered 'Order A-1001 shipped" in out
    assert 'B: lookup_order({"order_id": "A-1001"}) -> ok' in out
    stop_row = next(line for line in out.splitlines() if "stop reason" in line)
    assert "≠" in stop_row and "answered" in stop_row and "repeated_identical_call" in stop_row
    assert "\x1b" not in out


def test_diff_of_a_run_with_itself_finds_no_difference(recorded):
    path, runs = recorded
    trace = runs["prompt-injection"].trace_id
    result = tracedagent("diff", trace, trace, "--file", path)
    assert result.returncode == 0, result.stderr
    assert "The runs agree on every one of their 3 steps." in result.stdout
    assert "≠" not in result.stdout


def test_diff_escapes_what_the_model_chose(tmp_path):
    hostile = dataclasses.replace(BY_NAME["help-desk"], script=[tool_call("lookup_order", {"order_id": "A-1001"}),
                                                                "\x1b]0;owned\x07\u202e answer"])
    path = tmp_path / "hostile.otlp.json"
    a, b = record(path, [scenario_run(BY_NAME["help-desk"]), scenario_run(hostile)])
    result = tracedagent("diff", a.trace_id, b.trace_id, "--file", path)
    assert result.returncode == 0, result.stderr
    assert "\\x1b]0;owned\\x07\\u202e answer" in result.stdout
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout


def test_diff_works_without_content(tmp_path):
    path = tmp_path / "plain.otlp.json"
    a, b = record(path, [scenario_run(BY_NAME["help-desk"], capture=False),
                         scenario_run(BY_NAME["model-outage"], capture=False)])
    result = tracedagent("diff", a.trace_id, b.trace_id, "--file", path)
    assert result.returncode == 0, result.stderr
    assert "First difference: step 1" in result.stdout
    assert "the model call failed (TimeoutError)" in result.stdout


def resumed_trace(path: Path, paused_trace: str) -> str:
    """The trace of the run that resumed ``paused_trace`` (the demo resumes refund-approval)."""
    from tracedagent._traces._otlp_json import read_file
    from tracedagent._traces._trace import group_traces
    [trace] = [t for t in group_traces(read_file(path))
               if any(r.resumed_from == paused_trace for r in t.runs())]
    return trace.trace_id


def test_a_resumed_run_replays_from_its_checkpoint_and_a_changed_decided_call_diverges(recorded):
    path, runs = recorded
    paused = runs["refund-approval"]
    replay = Replay.from_file(path, resumed_trace(path, paused.trace_id))
    assert [c["name"] for c in replay.recording.resumed["decided"]] == ["refund"]
    again = replay.run()
    replay.check(again)
    assert again.ok and again.trajectory() == ["refund"] and again.resumed is not None
    assert [s.index for s in again.steps] == [1, 2], "the decided calls, then the turn after the pause"

    refund = next(i for i, c in enumerate(replay.recording.stubs) if c.name == "refund")
    replay.recording.stubs[refund] = dataclasses.replace(replay.recording.stubs[refund], result="refund failed")
    with pytest.raises(ReplayMismatch):
        replay.check(replay.run())


def test_diff_of_a_paused_run_and_its_resumption(recorded):
    path, runs = recorded
    paused = runs["refund-approval"].trace_id
    result = tracedagent("diff", paused, resumed_trace(path, paused), "--file", path)
    assert result.returncode == 0, result.stderr
    pending = next(line for line in result.stdout.splitlines() if "pending tools" in line)
    decided = next(line for line in result.stdout.splitlines() if "decided calls" in line)
    assert "≠" in pending and "refund" in pending and "refund ok" in decided
