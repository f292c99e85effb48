"""Online grading (``Agent(graders=OnlineGrading([...]))``): live runs graded as they end, each
grade in the run's trace under its ended run span, off the run's time; sampling, a full queue,
a raising grader, and what a grader online can and cannot read."""

from __future__ import annotations

import asyncio
import random
import threading
from dataclasses import replace

import pytest
from opentelemetry.trace import format_trace_id

from tracedagent import Agent, Budget, Stop, tool
from tracedagent.evals import (Grade, Grader, OnlineGrading, SpansNotKept, answered, context_growth_under, evaluate,
                               grader, no_failed_calls, sampled, steps_under, tokens_under, tool_success_rate,
                               trajectory_contains)
from tracedagent.evals import Case, Dataset
from tracedagent.testing import FakeModel, Recorder, tool_call

FLUSH = 10.0


@tool
def lookup(order_id: str) -> str:
    """Looks an order up."""
    return f"{order_id}: shipped"


def shop(recorder: Recorder, grading: OnlineGrading, turns: int = 1, **options) -> Agent:
    """An agent that looks an order up, then answers, ``turns`` times over."""
    script = [tool_call("lookup", {"order_id": "A1"}), "A1 has shipped"] * turns
    return Agent(FakeModel(script), [lookup], name="shop", graders=grading, **recorder.providers, **options)


def online(recorder: Recorder, graders, **options) -> OnlineGrading:
    return OnlineGrading(graders, **recorder.providers, **options)


def drive(agent: Agent, driver: str, task: str = "where is A1?"):
    if driver == "run":
        return agent.run(task)
    if driver == "arun":
        return asyncio.run(agent.arun(task))
    if driver == "stream":
        with agent.stream(task) as stream:
            list(stream)
        return stream.run

    async def read():
        async with agent.astream(task) as stream:
            async for _ in stream:
                pass
        return stream.run
    return asyncio.run(read())


@pytest.mark.parametrize("driver", ["run", "arun", "stream", "astream"])
def test_each_grade_is_in_the_runs_trace_under_its_ended_run_span(driver):
    rec = Recorder()
    grading = online(rec, [answered(), trajectory_contains(["lookup"]), steps_under(5), no_failed_calls(),
                           tool_success_rate(), tokens_under(10_000)])
    run = drive(shop(rec, grading, attributes={"team": "support"}), driver)
    assert grading.flush(FLUSH)
    (span,) = rec.spans("invoke_agent shop")
    grades = [s for s in rec.spans() if s.name.startswith("evaluate ")]
    assert sorted(s.name for s in grades) == sorted(f"evaluate {n}" for n in (
        "answered", "trajectory_contains", "steps_under", "no_failed_calls", "tool_success_rate", "tokens_under"))
    for g in grades:
        assert format_trace_id(g.context.trace_id) == run.trace_id
        assert g.parent.span_id == span.context.span_id
        assert g.start_time >= span.end_time  # graded after the run span ended
        (event,) = g.events
        assert event.name == "gen_ai.evaluation.result" and event.attributes["gen_ai.evaluation.score.value"] == 1.0
        assert g.attributes["tracedagent.evaluation.passed"] is True and g.attributes["team"] == "support"
    assert rec.metric("tracedagent.evaluation.grades", **{"gen_ai.evaluation.name": "answered",
                                                          "tracedagent.evaluation.passed": True}) == 1
    assert grading.counts.graded == 6


def test_the_run_returns_before_a_slow_grader_finishes():
    rec = Recorder()
    release, started = threading.Event(), threading.Event()

    def slow(run) -> bool:
        started.set()
        return release.wait(FLUSH)

    grading = online(rec, [slow])
    run = shop(rec, grading).run("where is A1?")  # returns while the grader waits for `release`
    assert run.ok and started.wait(FLUSH)
    assert not grading.flush(0.05) and not rec.spans("evaluate slow")
    (span,) = rec.spans("invoke_agent shop")
    release.set()
    assert grading.flush(FLUSH)
    (grade,) = rec.spans("evaluate slow")
    assert grade.attributes["tracedagent.evaluation.passed"] is True and grade.start_time >= span.end_time


def test_sampling_is_deterministic_with_a_seeded_source_and_an_unsampled_grade_is_not_made():
    def grades_of(seed: int) -> tuple[list[int], int]:
        rec = Recorder()
        judged: list[int] = []
        counter = iter(range(100))

        @grader("judge")
        def judge(run) -> bool:
            return True

        def numbered(run) -> bool:  # on every run: which run this is
            judged.append(next(counter))
            return True

        grading = online(rec, [sampled(judge, 0.3), numbered], rng=random.Random(seed))
        agent = shop(rec, grading, turns=20)
        for _ in range(20):
            agent.run("where is A1?")
        assert grading.flush(FLUSH)
        made = [s for s in rec.spans() if s.name == "evaluate judge"]
        run_of = {s.context.span_id: i for i, s in enumerate(rec.spans("invoke_agent shop"))}
        return sorted(run_of[s.parent.span_id] for s in made), grading.counts.unsampled

    first, unsampled = grades_of(7)
    assert first == grades_of(7)[0] and 0 < len(first) < 20 and unsampled == 20 - len(first)
    assert first != grades_of(8)[0]
    with pytest.raises(ValueError):
        sampled(answered(), 1.5)


def test_a_full_queue_drops_the_grading_counted_and_never_blocks_the_run():
    rec = Recorder()
    release = threading.Event()
    grading = online(rec, [lambda run: release.wait(FLUSH)], max_pending=1)
    agent = shop(rec, grading, turns=4)
    runs = [agent.run("where is A1?") for _ in range(4)]  # one grading, one queued, two dropped
    assert all(r.ok for r in runs)
    release.set()
    assert grading.flush(FLUSH)
    counts = grading.counts
    assert counts.dropped >= 1 and counts.graded + counts.dropped == 4
    assert rec.metric("tracedagent.evaluation.dropped", **{"gen_ai.agent.name": "shop"}) == counts.dropped
    assert len([s for s in rec.spans() if s.name.startswith("evaluate ")]) == counts.graded


def test_a_raising_grader_is_a_failed_grade_and_a_spans_reader_is_told_why():
    rec = Recorder()

    def broken(run) -> bool:
        raise RuntimeError("bug in the grader")

    def reads_spans(run) -> bool:
        return bool(run.spans("chat"))

    grading = online(rec, [broken, reads_spans, answered()])
    run = shop(rec, grading).run("where is A1?")
    assert run.ok and grading.flush(FLUSH)
    (b,) = rec.spans("evaluate broken")
    assert b.attributes["tracedagent.evaluation.passed"] is False and b.attributes["error.type"] == "RuntimeError"
    (s,) = rec.spans("evaluate reads_spans")
    assert s.attributes["error.type"] == SpansNotKept.__name__
    (a,) = rec.spans("evaluate answered")
    assert a.attributes["tracedagent.evaluation.passed"] is True


def test_a_grader_online_reads_the_run_its_task_and_output_as_evaluate_does():
    rec = Recorder()
    seen: dict = {}

    def look(run) -> Grade:
        seen.update(task=run.task, text=run.text, outcomes=run.tool_outcomes, steps=run.steps,
                    duration=run.duration, stop=run.stop_reason, attributes=run.attributes)
        return Grade(score=0.5, label="half")

    grading = online(rec, [Grader(check=look, name="look", threshold=0.4)])
    history = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "noted"}]
    agent = shop(rec, grading, attributes={"team": "support"})
    agent.run("where is A1?", history)
    assert grading.flush(FLUSH)
    assert seen["task"] == "where is A1?" and seen["text"] == "A1 has shipped"
    assert seen["outcomes"] == [("lookup", "ok")] and seen["steps"] == 2 and seen["stop"] == "answered"
    assert seen["duration"] > 0 and seen["attributes"] == {"team": "support"}
    (g,) = rec.spans("evaluate look")
    assert g.attributes["gen_ai.evaluation.score.label"] == "half" and g.attributes["tracedagent.evaluation.passed"]


def test_context_growth_is_graded_online_as_evaluate_grades_it():
    """Online only the run span is kept: the context's sizes come from the Run's own steps, the
    numbers its chat spans carried, so the grade is evaluate's (it was a SpansNotKept failure)."""
    growth = [context_growth_under(1.0), replace(context_growth_under(tokens=10_000), name="by_tokens")]
    rec = Recorder()
    grading = online(rec, growth)
    shop(rec, grading).run("where is A1?")
    assert grading.flush(FLUSH)
    live = {s.attributes["gen_ai.evaluation.name"]: s for s in rec.spans() if s.name.startswith("evaluate ")}
    offline = Recorder()
    [trial] = Dataset(["where is A1?"], growth).evaluate(shop(offline, None), recorder=offline).trials
    assert [g.passed for g in trial.grades] == [False, True] and "grew" in trial.grades[0].explanation
    assert [(live[g.grader].attributes["tracedagent.evaluation.passed"],
             live[g.grader].attributes.get("gen_ai.evaluation.explanation")) for g in trial.grades] == \
        [(g.passed, g.explanation) for g in trial.grades]


def test_a_stopped_run_is_graded_and_an_unrecorded_one_is_counted():
    rec = Recorder()
    grading = online(rec, [answered()])
    agent = Agent(FakeModel([tool_call("lookup", {"order_id": "A1"})] * 3), [lookup], name="shop",
                  budget=Budget(max_steps=1), graders=grading, **rec.providers)
    assert agent.run("where is A1?").stop is Stop.STEP_BUDGET
    assert grading.flush(FLUSH)
    (g,) = rec.spans("evaluate answered")
    assert g.attributes["tracedagent.evaluation.passed"] is False

    quiet = OnlineGrading([answered()])
    from opentelemetry.trace import NoOpTracerProvider
    Agent(FakeModel(["hi"]), name="quiet", graders=quiet, tracer_provider=NoOpTracerProvider()).run("hello")
    assert quiet.flush(FLUSH) and quiet.counts.unrecorded == 1 and quiet.counts.graded == 0


def test_graders_takes_online_grading_not_a_list():
    with pytest.raises(TypeError, match="OnlineGrading"):
        Agent(FakeModel(["hi"]), graders=[answered()])


def test_close_grades_what_is_queued_then_stops_the_thread():
    rec = Recorder()
    grading = online(rec, [answered()])
    agent = shop(rec, grading, turns=2)
    agent.run("where is A1?")
    assert grading.close(FLUSH) and len(rec.spans("evaluate answered")) == 1
    agent.run("where is A1?")  # a new thread
    assert grading.flush(FLUSH) and len(rec.spans("evaluate answered")) == 2


def test_close_returns_at_its_timeout_when_a_grader_never_returns_and_the_queue_is_full():
    rec = Recorder()
    release = threading.Event()
    grading = online(rec, [lambda run: release.wait(FLUSH)], max_pending=1)
    agent = shop(rec, grading, turns=2)
    agent.run("where is A1?")  # being graded
    agent.run("where is A1?")  # queued: the queue is full
    closing = threading.Thread(target=grading.close, args=(0.05,), daemon=True)
    closing.start()
    closing.join(FLUSH / 2)
    hung = closing.is_alive()
    release.set()
    assert not hung, "close(timeout) blocked on a full queue"
    assert grading.flush(FLUSH) and len([s for s in rec.spans() if s.name.startswith("evaluate ")]) == 2
    assert grading.close(FLUSH)


def test_evaluate_grades_every_run_whatever_the_sample():
    rec = Recorder()
    dataset = Dataset(cases=[Case(task="where is A1?")], graders=[sampled(answered(), 0.0)])
    agent = Agent(FakeModel([tool_call("lookup", {"order_id": "A1"}), "A1 has shipped"]), [lookup], name="shop",
                  **rec.providers)
    report = evaluate(dataset, agent, recorder=rec)
    assert report.pass_rate == 1.0 and len(rec.spans("evaluate answered")) == 1


@tool(requires_approval=True)
def refund(order_id: str) -> str:
    """Refunds an order."""
    return f"{order_id}: refunded"


@pytest.mark.parametrize("driver", ["resume", "aresume"])
def test_a_paused_run_and_its_resumed_run_are_each_graded_in_their_own_trace(driver):
    rec = Recorder()
    grading = online(rec, [answered()])
    agent = Agent(FakeModel([tool_call("refund", {"order_id": "A1"}, id="c0"), "refunded"]), [refund], name="desk",
                  graders=grading, **rec.providers)
    paused = agent.run("refund A1")
    assert paused.stop is Stop.APPROVAL_REQUIRED
    resumed = (agent.resume(paused.checkpoint(), {"c0": True}) if driver == "resume"
               else asyncio.run(agent.aresume(paused.checkpoint(), {"c0": True})))
    assert resumed.ok and grading.flush(FLUSH)
    grades = {format_trace_id(s.context.trace_id): s.attributes["tracedagent.evaluation.passed"]
              for s in rec.spans("evaluate answered")}
    assert grades == {paused.trace_id: False, resumed.trace_id: True}


def test_a_temporal_workflow_does_not_grade_online():
    """A workflow does no I/O (its runs are graded from their traces): its telemetry has no listener."""
    from tracedagent.temporal._telemetry import workflow_telemetry
    agent = Agent(FakeModel(["hi"]), name="durable", graders=OnlineGrading([answered()]))
    assert agent._telemetry.run_listener is not None
    assert workflow_telemetry(agent._telemetry).run_listener is None


def test_the_interpreters_exit_waits_for_pending_grades():
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent("""
        import atexit, time
        from tracedagent import Agent
        from tracedagent.evals import OnlineGrading
        from tracedagent.testing import FakeModel, Recorder
        rec = Recorder()
        atexit.register(lambda: print("grades", len(rec.spans("evaluate slow"))))  # runs after the grading's
        def slow(run):
            time.sleep(0.5)  # still grading when the script's last line has run
            return True
        Agent(FakeModel(["hi"]), graders=OnlineGrading([slow], **rec.providers), **rec.providers).run("hello")
        print("returned", len(rec.spans("evaluate slow")))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["returned", "0", "grades", "1"], done.stderr


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="os.fork is POSIX's")
def test_a_forked_child_grades_its_own_runs_not_the_parents_queued_ones():
    """A fork copies the queue and the pending count: the child must not grade the parent's runs
    a second time (their grades are the parent's to make), nor wait on them in flush()."""
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent("""
        import os, threading, warnings
        warnings.simplefilter("ignore")
        from tracedagent import Agent
        from tracedagent.evals import OnlineGrading
        from tracedagent.testing import FakeModel, Recorder
        rec = Recorder()
        release = threading.Event()
        grading = OnlineGrading([lambda run: release.wait(10)], **rec.providers)
        agent = Agent(FakeModel(["hi"] * 3), graders=grading, **rec.providers)
        agent.run("one")  # being graded
        agent.run("two")  # queued when the process forks
        pid = os.fork()
        if pid == 0:
            release.set()
            flushed_at_once = grading.flush(0.5)
            before = len(rec.spans())
            agent.run("three")
            grading.flush(10)
            graded = [s for s in rec.spans()[before:] if s.name.startswith("evaluate ")]
            print("child", flushed_at_once, len(graded), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        release.set()
        print("parent", grading.flush(10), len([s for s in rec.spans() if s.name.startswith("evaluate ")]), flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert sorted(done.stdout.split("\n")[:2]) == ["child True 1", "parent True 2"], (done.stdout, done.stderr)
