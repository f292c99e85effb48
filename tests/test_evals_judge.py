"""The LLM judge (``llm_judge``): scripted verdicts that pass, fail, cannot be read, or never
come (the model raising, timing out); its calls as chat spans under its grade in the graded
run's trace; its tokens and cost reported apart, never in the graded run's; through the real
OpenAI adapter on a local wire-format server. And the context-growth built-in, on live and
recorded runs alike."""

from __future__ import annotations

import json

import pytest

from _fake_servers import Reply, serve
from _openai_wire import answer, model_for, use_key
from tracedagent import Agent, Budget, tool
from tracedagent._core._records import Completion, ToolCall, Usage
from tracedagent._traces._otlp_json import encode
from tracedagent.evals import (Case, Dataset, GradedRun, JudgeAnswerInvalid, Report, answered, context_growth_under,
                               grade_recorded, llm_judge, output_contains, recorded_runs)
from tracedagent.evals._experiment import grade_trial
from tracedagent.evals._grade import as_grader
from tracedagent.evals._telemetry import GradeTelemetry
from tracedagent.testing import FakeModel, Recorder, play, tool_call

RUBRIC = "The answer says where the order is."
PRICES = Budget(price_per_1k_input=3.0, price_per_1k_output=15.0)


@tool
def lookup(order_id: str) -> str:
    """Looks an order up."""
    return f"{order_id}: shipped"


def verdict(score: float, label: str = "ok", explanation: str = "it says where") -> str:
    return json.dumps({"score": score, "label": label, "explanation": explanation})


def agent_for(recorder: Recorder, **options):
    """A factory: each case's agent looks the order up, then answers; priced or not."""
    def make(case: Case) -> Agent:
        return Agent(FakeModel([tool_call("lookup", {"order_id": "A1"}), "A1 has shipped."]), [lookup], name="shop",
                     **recorder.providers, **options)
    return make


def judged(*script, graders=(), repeat: int = 1, agent_options=None, **judge_options):
    recorder = Recorder()
    judge_model = FakeModel(list(script))
    judge = llm_judge(judge_model, RUBRIC, **judge_options)
    report = Dataset([Case(task="where is A1?", name="a1")], [answered(), *graders, judge]).evaluate(
        agent_for(recorder, **(agent_options or {})), repeat=repeat, recorder=recorder)
    return recorder, judge_model, report


def grade_of(report: Report, name: str = "llm_judge"):
    [trial] = report.trials
    return next(g for g in trial.grades if g.grader == name)


# --- verdicts --------------------------------------------------------------------------------

def test_a_judge_that_approves_passes_with_its_score_label_and_explanation():
    _, judge_model, report = judged(verdict(0.9, "good", "it names the status"))
    grade = grade_of(report)
    assert (grade.passed, grade.score, grade.label, grade.explanation) == (True, 0.9, "good", "it names the status")
    assert grade.error is None and report.pass_rate == 1.0
    # what the judge was shown: the rubric, the task and the run's answer; the schema (prompted: FakeModel declares no mode)
    [sent] = judge_model.calls
    system, user = sent["messages"]
    assert sent["output"].mode == "prompted" and sent["tools"] is None
    assert RUBRIC in system["content"] and '"score"' in system["content"]
    assert "where is A1?" in user["content"] and "A1 has shipped." in user["content"]


def test_a_judge_that_disapproves_fails_at_its_threshold():
    _, _, report = judged(verdict(0.3, "vague", "no status"))
    grade = grade_of(report)
    assert not grade.passed and grade.score == 0.3 and grade.label == "vague" and grade.error is None
    assert report.pass_rate == 0.0
    _, _, lenient = judged(verdict(0.3), threshold=0.25)
    assert grade_of(lenient).passed


@pytest.mark.parametrize("text", ["```json\n" + verdict(1.0) + "\n```", "Here is my grade: " + verdict(1.0) + " Done."])
def test_a_verdict_in_a_code_fence_or_in_prose_is_read(text):
    _, _, report = judged(text)
    assert grade_of(report).passed


@pytest.mark.parametrize("text", ["Looks fine to me.", '{"score": 1.5, "label": "x", "explanation": "y"}',
                                  '{"score": "high"}', "[1, 2]", '{"score": true}', ""])
def test_an_answer_that_is_not_a_verdict_is_a_failed_grade_named_judge_answer_invalid(text):
    recorder, _, report = judged(text)
    grade = grade_of(report)
    assert not grade.passed and grade.error == JudgeAnswerInvalid.__name__ == "JudgeAnswerInvalid"
    assert grade.explanation.startswith("JudgeAnswerInvalid: ")
    assert grade.input_tokens and grade.input_tokens > 0  # the call was made: its tokens are counted all the same
    (span,) = recorder.spans("evaluate llm_judge")
    assert span.attributes["error.type"] == "JudgeAnswerInvalid"


@pytest.mark.parametrize("failure, kind", [(RuntimeError("provider down"), "RuntimeError"),
                                           (TimeoutError("slow"), "TimeoutError")])
def test_a_judge_whose_model_fails_is_a_failed_grade_with_the_error_type_never_an_exception(failure, kind):
    recorder, _, report = judged(failure)
    grade = grade_of(report)
    assert not grade.passed and grade.error == kind and grade.label == "error"
    assert "provider down" not in (grade.explanation or "")  # a provider's message may echo content: its type only
    assert grade.input_tokens is None and grade.cost is None
    [chat] = [s for s in recorder.spans() if s.name == "chat fake-model" and s.attributes.get("error.type") == kind]
    assert chat.status.status_code.name == "ERROR"


def test_a_recorded_run_without_content_cannot_be_judged_and_no_call_is_made():
    recorder = Recorder()
    played = play(Agent(FakeModel(["A1 shipped."]), **recorder.providers), "where?", recorder=recorder)
    judge_model = FakeModel([verdict(1.0)])
    report = grade_recorded(None, [llm_judge(judge_model, RUBRIC)], runs=[played.view],
                            tracer_provider=recorder.tracer_provider)
    grade = grade_of(report)
    assert not grade.passed and grade.error == "ContentNotRecorded"
    assert judge_model.calls == []


def test_a_judge_checks_its_arguments():
    with pytest.raises(ValueError, match="include"):
        llm_judge(FakeModel([]), RUBRIC, include=("task", "secrets"))
    with pytest.raises(ValueError, match="rubric"):
        llm_judge(FakeModel([]), "  ")
    with pytest.raises(ValueError, match="output_mode"):
        llm_judge(FakeModel([]), RUBRIC, output_mode="native")  # FakeModel declares no native mode


# --- its calls traced ------------------------------------------------------------------------

def test_the_judges_call_is_a_chat_span_under_its_grade_in_the_graded_runs_trace():
    recorder, _, report = judged(verdict(1.0), pricing=PRICES)
    [run] = recorder.spans("invoke_agent shop")
    (grade_span,) = recorder.spans("evaluate llm_judge")
    judge_chats = [s for s in recorder.spans("chat fake-model") if s.parent.span_id == grade_span.context.span_id]
    assert len(judge_chats) == 1
    [chat] = judge_chats
    assert chat.context.trace_id == grade_span.context.trace_id == run.context.trace_id
    assert grade_span.parent.span_id == run.context.span_id
    # the grader ran inside its span: the span began before the call and ended after it
    assert grade_span.start_time <= chat.start_time and chat.end_time <= grade_span.end_time
    # the grade carries the judge's usage and cost; the call its own, priced at the judge's prices
    grade = grade_of(report)
    assert chat.attributes["gen_ai.usage.input_tokens"] == grade.input_tokens == grade_span.attributes[
        "gen_ai.usage.input_tokens"]
    assert grade_span.attributes["gen_ai.usage.output_tokens"] == grade.output_tokens
    assert chat.attributes["tracedagent.usage.cost_usd"] == pytest.approx(grade.cost)
    assert grade_span.attributes["tracedagent.usage.cost_usd"] == pytest.approx(grade.cost)
    assert grade.cost == pytest.approx(PRICES.cost_of(grade.input_tokens, grade.output_tokens))
    # no content on the judge's call unless opted in, as for a run
    assert not any(k.startswith("gen_ai.input") or k.startswith("gen_ai.output.messages") for k in chat.attributes)
    # the judge's words may quote the run: its explanation is in the report, on the span only with capture on
    assert grade.explanation == "it says where" and "gen_ai.evaluation.explanation" not in grade_span.attributes
    # a deterministic grader's span has no usage of its own
    (plain,) = recorder.spans("evaluate answered")
    assert "gen_ai.usage.input_tokens" not in plain.attributes


def test_the_judges_content_is_captured_only_when_opted_in():
    recorder, _, _ = judged(verdict(1.0), capture_content=True)
    (grade_span,) = recorder.spans("evaluate llm_judge")
    [chat] = [s for s in recorder.spans() if s.parent is not None and s.parent.span_id == grade_span.context.span_id]
    assert "where is A1?" in chat.attributes["gen_ai.input.messages"]
    assert RUBRIC in chat.attributes["gen_ai.system_instructions"]
    assert "it says where" in chat.attributes["gen_ai.output.messages"]
    assert grade_span.attributes["gen_ai.evaluation.explanation"] == "it says where"


# --- its cost reported apart ----------------------------------------------------------------

def test_the_judges_tokens_and_cost_are_reported_apart_never_in_the_graded_runs():
    priced = {"budget": Budget(price_per_1k_input=1.0, price_per_1k_output=2.0)}
    recorder = Recorder()
    unjudged = Dataset([Case(task="where is A1?", name="a1")], [answered()]).evaluate(
        agent_for(recorder, **priced), repeat=2, recorder=recorder)
    _, _, plain = judged(verdict(1.0), verdict(0.8), repeat=2, agent_options=priced)
    _, _, report = judged(verdict(1.0), verdict(0.8), repeat=2, agent_options=priced, pricing=PRICES)
    # the graded runs' figures are the same with and without a judge
    figures = [(t.steps, t.tokens, t.cost) for t in unjudged.trials]
    assert figures[0][2] > 0
    for with_judge in (plain, report):
        assert [(t.steps, t.tokens, t.cost) for t in with_judge.trials] == figures
        assert with_judge.distributions() == {**unjudged.distributions(), "latency": with_judge.distributions()["latency"]}
    # the judge's, summed apart
    judge_grades = [g for t in report.trials for g in t.grades if g.grader == "llm_judge"]
    assert report.judge_tokens == sum(g.input_tokens + g.output_tokens for g in judge_grades) > 0
    assert report.judge_cost == pytest.approx(sum(g.cost for g in judge_grades)) and report.judge_cost > 0
    assert plain.judge_cost is None and plain.judge_tokens > 0  # unpriced judge: tokens known, cost not
    assert unjudged.judge_tokens is None and unjudged.judge_cost is None  # no judge at all
    # and in the JSON, read back
    data = json.loads(report.to_json())
    assert data["judge_cost"] == pytest.approx(report.judge_cost) and data["judge_tokens"] == report.judge_tokens
    again = Report.from_json(report.to_json())
    assert again.judge_cost == pytest.approx(report.judge_cost) and again.judge_tokens == report.judge_tokens


def test_the_judges_cost_counts_toward_the_experiments_max_cost():
    recorder = Recorder()
    judge = llm_judge(FakeModel([verdict(1.0)] * 3), RUBRIC, pricing=PRICES)
    dataset = Dataset([Case(task="where is A1?", name="a1")], [judge])
    report = dataset.evaluate(agent_for(recorder), repeat=3, max_cost=1e-9, recorder=recorder)  # the runs: unpriced
    assert report.cost_exhausted and report.skipped == 2 and len(report.trials) == 1
    assert report.trials[0].cost is None  # the run's own cost stays unknown: the judge's is not the run's
    unjudged = Dataset([Case(task="where is A1?", name="a1")], [answered()]).evaluate(
        agent_for(recorder), repeat=3, max_cost=1e-9, recorder=recorder)
    assert not unjudged.cost_exhausted and len(unjudged.trials) == 3


# --- through a real provider adapter, on the local wire-format server -------------------------

def test_a_judge_through_the_openai_adapter_asks_for_a_strict_json_schema(monkeypatch):
    use_key(monkeypatch)
    recorder = Recorder()
    with serve(answer(verdict(1.0, "good"), input_tokens=120, output_tokens=14)) as server:
        judge = llm_judge(model_for(server), RUBRIC, pricing=PRICES)
        report = Dataset([Case(task="where is A1?", name="a1")], [judge]).evaluate(agent_for(recorder),
                                                                                  recorder=recorder)
    grade = grade_of(report)
    assert grade.passed and grade.label == "good" and (grade.input_tokens, grade.output_tokens) == (120, 14)
    assert grade.cost == pytest.approx(PRICES.cost_of(120, 14))
    [body] = server.bodies()
    schema = body["response_format"]["json_schema"]
    assert body["response_format"]["type"] == "json_schema" and schema["strict"] is True
    assert set(schema["schema"]["required"]) == {"score", "label", "explanation"}
    (grade_span,) = recorder.spans("evaluate llm_judge")
    [chat] = recorder.spans("chat gpt-test")
    assert chat.parent.span_id == grade_span.context.span_id
    assert chat.attributes["gen_ai.provider.name"] == "openai" and chat.attributes["gen_ai.usage.input_tokens"] == 120


def test_a_judge_call_that_times_out_is_a_failed_grade_named_by_its_error(monkeypatch):
    use_key(monkeypatch)
    recorder = Recorder()
    with serve(Reply(delay=3.0, body=b"{}")) as server:
        judge = llm_judge(model_for(server, max_retries=0), RUBRIC, timeout=0.3)
        report = Dataset([Case(task="where is A1?", name="a1")], [judge]).evaluate(agent_for(recorder),
                                                                                  recorder=recorder)
    grade = grade_of(report)
    assert not grade.passed and grade.error == "APITimeoutError"


# --- context growth --------------------------------------------------------------------------

def turn(input_tokens: int, call: str | None = None) -> Completion:
    calls = [ToolCall(id=f"c{input_tokens}", name="lookup", arguments={"order_id": call})] if call else []
    return Completion(text="" if call else "A1 has shipped.", tool_calls=calls,
                      usage=Usage(input_tokens=input_tokens, output_tokens=5))


def grown(recorder: Recorder, *sizes: int, capture: bool = False):
    script = [turn(size, call=f"A{i}") for i, size in enumerate(sizes[:-1])] + [turn(sizes[-1])]
    agent = Agent(FakeModel(script, estimate_usage=False), [lookup], name="shop", capture_content=capture,
                  **recorder.providers)
    return play(agent, "where is A1?", recorder=recorder)


GROWTH = [as_grader(context_growth_under(3.0), name="ratio"), as_grader(context_growth_under(tokens=500), name="tokens"),
          as_grader(context_growth_under(1.5, per_step=True), name="per_step")]


def verdicts(trial) -> list[tuple[str, bool, str | None]]:
    return [(g.grader, g.passed, g.label) for g in trial.grades]


@pytest.mark.parametrize("sizes, passed", [((100, 150, 250), [True, True, False]),   # 2.5x, +150; the last step 1.67x
                                           ((100, 120, 700), [False, False, False]),  # 7x, +600
                                           ((100, 140, 190), [True, True, True]),
                                           ((900,), [True, True, True])])             # one call has not grown
def test_context_growth_is_read_off_each_calls_input_tokens_live_and_recorded_alike(sizes, passed, tmp_path):
    recorder = Recorder()
    played = grown(recorder, *sizes)
    live = grade_trial(GROWTH, GradedRun(played.view, run=played.run), GradeTelemetry(recorder.tracer_provider))
    assert [g.passed for g in live.grades] == passed, live.grades
    path = tmp_path / "run.otlp.json"
    path.write_text(json.dumps(encode([s for s in recorder.spans() if not s.name.startswith("evaluate ")])))
    recorded = grade_recorded(path, GROWTH, tracer_provider=Recorder().tracer_provider)
    assert verdicts(recorded.trials[0]) == verdicts(live)


def test_context_growth_explains_without_content_and_checks_its_bound():
    recorder = Recorder()
    graded = GradedRun(grown(recorder, 100, 700).view)
    grade = context_growth_under(2.0).check(graded)
    assert grade.score == 0.0 and grade.explanation == ("the context grew 7.00 times (100 to 700 input tokens) from the "
                                                        "first model call to the last, over the bound 2")
    assert "A1" not in grade.explanation
    zero = GradedRun(grown(Recorder(), 0, 50).view)
    assert context_growth_under(2.0).check(zero).label == "unknown"
    assert context_growth_under(tokens=60).check(zero).score == 1.0
    for bad in ({}, {"ratio": 2.0, "tokens": 5}, {"ratio": 0.5}, {"tokens": -1}):
        with pytest.raises(ValueError):
            context_growth_under(**bad)


def test_a_dataset_saves_and_loads_the_context_growth_grader(tmp_path):
    dataset = Dataset([Case(task="t", name="a")], [context_growth_under(2.5, per_step=True)])
    dataset.save(tmp_path / "d.json")
    [loaded] = Dataset.load(tmp_path / "d.json").graders
    assert loaded.name == "context_growth_under" and loaded.args == {"ratio": 2.5, "tokens": None, "per_step": True}


def test_a_judged_trace_graded_again_reads_the_runs_own_calls_not_the_judges(tmp_path):
    """A run judged before has the judge's chat span (with its verdict, content on) under its
    grade in its trace: grading the recorded trace reads the run's own answer and calls."""
    recorder = Recorder()
    big = Completion(text=verdict(1.0), usage=Usage(input_tokens=5000, output_tokens=20))  # far past any bound here
    judge = llm_judge(FakeModel([big]), RUBRIC, capture_content=True)
    played = grown(recorder, 100, 150, capture=True)
    graders = [output_contains("shipped"), context_growth_under(1.2),
               as_grader(context_growth_under(1.6, per_step=True), name="per_step")]
    live = grade_recorded(None, [*graders, judge], runs=[played.view], tracer_provider=recorder.tracer_provider)
    path = tmp_path / "judged.otlp.json"
    path.write_text(json.dumps(encode(recorder.spans())))  # the judge's spans included
    recorded = grade_recorded(path, graders, tracer_provider=Recorder().tracer_provider)
    assert verdicts(recorded.trials[0]) == verdicts(live.trials[0])[:3]
    assert [g.passed for g in recorded.trials[0].grades] == [True, False, True]
    [view] = recorded_runs(path)
    graded = GradedRun(view)
    assert len(view.spans("evaluate llm_judge")) == 1 and len(view.chat_spans) == 3  # the trace holds the judge's
    assert graded.spans("evaluate llm_judge") == [] and len(graded.chat_spans) == 2  # the run's own: not its grades'


# --- the grade's span around its grader ------------------------------------------------------

def test_the_grades_span_ends_however_the_grading_ends_and_broken_telemetry_fails_no_grade():
    recorder = Recorder()
    graded = GradedRun(play(Agent(FakeModel(["ok"]), **recorder.providers), "hi", recorder=recorder).view)
    telemetry = GradeTelemetry(recorder.tracer_provider)

    def interrupted(g, run):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        telemetry.grade(as_grader(answered(), name="stopped"), graded, interrupted)
    (span,) = recorder.spans("evaluate stopped")  # ended (the recorder holds only ended spans), marked failed
    assert span.attributes["error.type"] == "cancelled" and span.status.status_code.name == "ERROR"

    class Broken:
        def start_span(self, *args, **kwargs):
            raise RuntimeError("exporter on fire")

    telemetry.tracer = Broken()
    trial = grade_trial([answered(), llm_judge(FakeModel([verdict(1.0)]), RUBRIC, include=("stop_reason",))],
                        graded, telemetry)
    assert [g.passed for g in trial.grades] == [True, True]


def test_aevaluate_grades_in_worker_threads_so_judges_calls_wait_side_by_side():
    """Two judge calls meet at a barrier: were grading done on the event loop, one at a time,
    the first would wait alone and break it (a failed grade), not time a thing."""
    import asyncio
    import threading

    barrier = threading.Barrier(2, timeout=10)

    class Meeting:
        def complete(self, request):
            barrier.wait()
            return Completion(text=verdict(1.0), usage=Usage(input_tokens=10, output_tokens=3))

    recorder = Recorder()
    cases = [Case(task="where is A1?", name="a"), Case(task="where is B2?", name="b")]
    report = asyncio.run(Dataset(cases, [llm_judge(Meeting(), RUBRIC)]).aevaluate(
        agent_for(recorder), concurrency=2, recorder=recorder))
    assert [g.error for t in report.trials for g in t.grades] == [None, None] and report.pass_rate == 1.0
    assert report.judge_tokens == 26


def test_a_judge_kept_across_experiments_does_not_keep_their_recorders():
    """A judge reused by many experiments (a pytest session's) holds none of their providers,
    whose recorders hold every span they recorded."""
    import gc
    import weakref
    judge = llm_judge(FakeModel([verdict(1.0)] * 2), RUBRIC)
    recorder = Recorder()
    report = Dataset([Case(task="where is A1?", name="a1")], [judge]).evaluate(agent_for(recorder), recorder=recorder)
    assert report.pass_rate == 1.0 and recorder.spans("evaluate llm_judge")
    gone = weakref.ref(recorder.tracer_provider)
    del recorder, report
    gc.collect()
    assert gone() is None
