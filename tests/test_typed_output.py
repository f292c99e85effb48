"""A run's typed output (#37): ``Agent(output_type=...)``, the answer validated in the run
machine, retried with the problem, ``Stop.INVALID_OUTPUT`` when the retries run out; on every driver."""

from __future__ import annotations

import dataclasses
import datetime
import json
from dataclasses import dataclass
from typing import Literal

import pydantic
import pytest
from typing_extensions import TypedDict  # pydantic reads typing.TypedDict on Python 3.12 and later only

from sample_tools import close_account, search_help
from tracedagent import Agent, Budget, Checkpoint, MalformedCheckpoint, Registry, Stop
from tracedagent._core._output import OutputCheck, OutputRequest
from tracedagent.testing import FakeModel, Recorder, json_answer, tool_call


@dataclass
class Weather:
    city: str
    celsius: int


class Refund(pydantic.BaseModel):
    order_id: str
    amount: float = pydantic.Field(gt=0)
    when: datetime.date


class Point(TypedDict):
    x: int
    y: int


PARIS = '{"city": "Paris", "celsius": 21}'


def typed(script, output_type=Weather, **options) -> Agent:
    return Agent(FakeModel(script), output_type=output_type, **options)


# --- the answer ---------------------------------------------------------------------------------

def test_an_answer_that_validates_is_the_typed_output_and_its_text_is_kept():
    run = typed([PARIS]).run("Weather in Paris?")
    assert run.ok and run.output == Weather(city="Paris", celsius=21)
    assert run.text == PARIS and run.output_retries == 0 and run.step_count == 1


def test_an_untyped_run_is_unchanged_its_output_the_text():
    run = Agent(FakeModel(["It is sunny."])).run("Weather?")
    assert run.output == run.text == "It is sunny." and run.output_retries == 0
    assert "JSON" not in json.dumps(run.messages)  # no instruction without an output type


@pytest.mark.parametrize("output_type, answer, expected", [
    (Refund, '{"order_id": "A1", "amount": 12.5, "when": "2026-12-04"}',
     Refund(order_id="A1", amount=12.5, when=datetime.date(2026, 12, 4))),
    (Point, '{"x": 1, "y": 2.0}', {"x": 1, "y": 2}),  # a whole-number float is an int, as in JSON Schema
    (list[int], "[1, 2, 3]", [1, 2, 3]),
    (Literal["yes", "no"], '"no"', "no"),
    (int | Weather, PARIS, Weather(city="Paris", celsius=21)),
    (int, "```json\n42\n```", 42),  # a code fence around the JSON is tolerated
    (bool, "true", True),
])
def test_every_kind_of_output_type_validates_its_json(output_type, answer, expected):
    run = typed([answer], output_type=output_type).run("go")
    assert run.ok and run.output == expected and run.text == answer


def test_json_answer_scripts_a_typed_answer():
    value = Refund(order_id="A1", amount=3.0, when=datetime.date(2026, 1, 2))
    assert typed([json_answer(value)], output_type=Refund).run("go").output == value
    assert typed([json_answer(Weather("Oslo", -3))]).run("go").output == Weather("Oslo", -3)


def test_a_type_pydantic_cannot_validate_is_refused_when_the_agent_is_built():
    class Opaque:
        pass

    with pytest.raises(TypeError, match="Opaque"):
        typed([], output_type=Opaque)


def test_tool_turns_are_dispatched_then_the_typed_answer_ends_the_run():
    model = FakeModel([tool_call("search_help", {"q": "weather"}), PARIS])
    run = Agent(model, [search_help], output_type=Weather).run("go")
    assert run.ok and run.trajectory() == ["search_help"] and run.output == Weather("Paris", 21)


# --- retries ------------------------------------------------------------------------------------

def test_an_invalid_answer_is_sent_back_with_the_problem_and_the_next_one_answers():
    model = FakeModel(['{"city": "Paris"}', PARIS])
    run = Agent(model, output_type=Weather).run("go")
    assert run.stop is Stop.ANSWERED and run.output == Weather("Paris", 21)
    assert run.output_retries == 1 and run.step_count == 2 and len(model.calls) == 2
    told = model.calls[1]["messages"][-1]
    assert told["role"] == "user" and "celsius" in told["content"] and "Field required" in told["content"]
    assert model.calls[1]["messages"][-2] == {"role": "assistant", "content": '{"city": "Paris"}'}


@pytest.mark.parametrize("retries", [0, 1, 2])
def test_answers_that_never_validate_stop_invalid_output_after_the_retries(retries):
    model = FakeModel(["sunny", "warm", "nice", "lovely"])
    run = Agent(model, output_type=Weather, budget=Budget(max_output_retries=retries)).run("go")
    assert run.stop is Stop.INVALID_OUTPUT and not run.ok
    assert len(model.calls) == run.step_count == retries + 1 and run.output_retries == retries
    assert run.text == ["sunny", "warm", "nice"][retries]  # the last answer's text, kept
    assert run.output.startswith("Stopped: the answer is not a valid Weather") and "Invalid JSON" in run.output


def test_the_problem_shown_carries_no_value_of_the_answer():
    run = typed(['{"city": "s3cr3t-city", "celsius": "s3cr3t-temp"}'], budget=Budget(max_output_retries=0)).run("go")
    assert run.stop is Stop.INVALID_OUTPUT and "celsius" in run.output and "s3cr3t" not in run.output


def test_at_the_last_step_a_retry_left_loses_to_the_step_budget():
    """A retry is a model call and a step: at the step ceiling the run would have gone on, so the
    step budget stops it, as after a turn of tool calls; with no retry left it is invalid_output."""
    model = FakeModel(["no", "no", "no"])
    run = typed(model.script, budget=Budget(max_steps=2, max_output_retries=5)).run("go")
    assert run.stop is Stop.STEP_BUDGET and run.step_count == 2 and run.output_retries == 1
    run = typed(["no", "no", "no"], budget=Budget(max_steps=2, max_output_retries=1)).run("go")
    assert run.stop is Stop.INVALID_OUTPUT and run.step_count == 2 and run.output_retries == 1


def test_an_output_spec_of_ones_own_is_used_as_it_is():
    class Upper:
        name, schema = "Upper", {"type": "string"}

        def validate(self, text: str) -> OutputCheck:
            return OutputCheck(text) if text.isupper() else OutputCheck(problem="not upper case")

    run = typed(["hi", "HI"], output_type=Upper()).run("go")
    assert run.ok and run.output == "HI" and run.output_retries == 1


# --- every driver --------------------------------------------------------------------------------

async def _drive(driver: str, agent: Agent):
    if driver == "run":
        return agent.run("go")
    if driver == "arun":
        return await agent.arun("go")
    if driver == "stream":
        with agent.stream("go") as stream:
            events = [type(e).__name__ for e in stream]
        assert events.count("StepEnd") == stream.run.step_count
        return stream.run
    async with agent.astream("go") as stream:
        events = [type(e).__name__ async for e in stream]
    assert events.count("StepEnd") == stream.run.step_count
    return stream.run


@pytest.mark.parametrize("driver", ["run", "arun", "stream", "astream"])
async def test_every_driver_retries_and_stops_the_same(driver):
    run = await _drive(driver, typed(["sunny", PARIS]))
    assert run.ok and run.output == Weather("Paris", 21) and run.output_retries == 1 and run.step_count == 2
    run = await _drive(driver, typed(["sunny", "warm"]))
    assert run.stop is Stop.INVALID_OUTPUT and run.text == "warm" and run.step_count == 2


@pytest.mark.parametrize("resume", ["resume", "aresume"])
async def test_a_resumed_run_answers_typed(resume):
    script = [tool_call("close_account", {"account": "A1"}), "done", PARIS]
    agent = Agent(FakeModel(script), Registry([close_account]), output_type=Weather)
    paused = agent.run("close it")
    assert paused.stop is Stop.APPROVAL_REQUIRED
    decisions = {call.id: True for call in paused.pending}
    run = agent.resume(paused.paused, decisions) if resume == "resume" else await agent.aresume(paused.paused, decisions)
    assert run.ok and run.output == Weather("Paris", 21) and run.output_retries == 1


# --- the budget in checkpoints -------------------------------------------------------------------

def test_max_output_retries_round_trips_in_a_checkpoint_and_a_version_1_one_reads_the_default():
    agent = Agent(FakeModel([tool_call("close_account", {"account": "A1"})]), Registry([close_account]),
                  budget=Budget(max_output_retries=3), output_type=Weather)
    cp = agent.run("go").paused
    data = json.loads(cp.dumps())
    assert data["budget"]["max_output_retries"] == 3
    assert Checkpoint.from_dict(data).budget.max_output_retries == 3
    old = {k: v for k, v in data.items() if k != "signature"}
    old["version"] = 1
    old["budget"] = {k: v for k, v in data["budget"].items()
                     if k not in ("max_output_retries", "price_per_1k_cache_read", "price_per_1k_cache_write")}
    assert Checkpoint.from_dict(old).budget.max_output_retries == 1
    earlier = {**data, "budget": {k: v for k, v in data["budget"].items() if k != "max_output_retries"}}
    assert Checkpoint.from_dict(earlier).budget.max_output_retries == 1  # a version 2 written before the field
    with pytest.raises(MalformedCheckpoint):
        Checkpoint.from_dict({**data, "budget": {**data["budget"], "max_output_retries": "3"}})


def test_max_output_retries_may_not_be_negative():
    with pytest.raises(ValueError, match="max_output_retries"):
        Budget(max_output_retries=-1)


# --- how the model is asked -----------------------------------------------------------------------

def test_prompted_mode_puts_the_schema_in_the_system_prompt_and_on_each_request():
    model = FakeModel([PARIS])
    agent = Agent(model, output_type=Weather, system_prompt="Be brief.")
    assert agent.output_mode == "prompted" and agent.output_type is Weather
    agent.run("go")
    system = model.calls[0]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Be brief.\n\n")
    assert '"celsius":{"title":"Celsius","type":"integer"}' in system["content"]
    asked = model.calls[0]["output"]
    assert asked == OutputRequest(name="Weather", schema=asked.schema, mode="prompted")
    assert asked.schema["required"] == ["city", "celsius"]


def test_auto_takes_the_models_declared_mode_and_an_undeclared_one_is_refused():
    native = FakeModel([PARIS])
    native.output_modes = ("native", "prompted")
    agent = Agent(native, output_type=Weather)
    assert agent.output_mode == "native"
    assert agent.run("go").ok and native.calls[0]["output"].mode == "native"
    assert "JSON schema" not in json.dumps(native.calls[0]["messages"])  # the provider is asked instead
    with pytest.raises(ValueError, match="'tool'"):
        Agent(FakeModel([]), output_type=Weather, output_mode="tool")
    with pytest.raises(ValueError, match="output_mode"):
        Agent(FakeModel([]), output_type=Weather, output_mode="json")


# --- spans ------------------------------------------------------------------------------------------

def test_a_typed_runs_spans_say_json_the_type_the_mode_and_the_retries():
    rec = Recorder()
    typed(["sunny", PARIS], **rec.providers).run("go")
    view = rec.only_run()
    a = view.span.attributes
    assert a["gen_ai.output.type"] == "json" and a["tracedagent.output.type_name"] == "Weather"
    assert a["tracedagent.output.mode"] == "prompted" and a["tracedagent.output.retries"] == 1
    assert a["tracedagent.budget.max_output_retries"] == 1
    chats = rec.spans(name="chat fake-model")
    assert len(chats) == 2 and all(c.attributes["gen_ai.output.type"] == "json" for c in chats)
    assert len(view.step_spans) == 2


def test_an_invalid_output_run_span_is_an_error_with_its_stop():
    rec = Recorder()
    typed(["sunny", "warm"], **rec.providers).run("go")
    view = rec.only_run()
    assert view.stop_reason == "invalid_output" and view.span.attributes["error.type"] == "invalid_output"
    assert view.span.attributes["tracedagent.output.retries"] == 1
    assert rec.metric("tracedagent.runs", stop_reason="invalid_output") == 1


def test_an_untyped_runs_spans_have_no_output_attributes():
    rec = Recorder()
    Agent(FakeModel(["hi"]), **rec.providers).run("go")
    spans = rec.spans()
    assert not any(key.startswith(("gen_ai.output.type", "tracedagent.output.", "tracedagent.budget.max_output"))
                   for span in spans for key in span.attributes)


def test_a_typed_run_is_a_generic_run():
    run = typed([PARIS]).run("go")
    assert type(run).__name__ == "Run" and dataclasses.is_dataclass(run)
    from tracedagent import Run
    assert Run[Weather] is not None and Agent[Weather] is not None  # subscriptable: typing.Generic


def test_content_capture_shows_the_schema_sent_and_without_it_nothing():
    rec = Recorder()
    typed([PARIS], capture_content=True, **rec.providers).run("go")
    [chat] = rec.spans(name="chat fake-model")
    assert json.loads(chat.attributes["tracedagent.output.schema"])["required"] == ["city", "celsius"]
    assert "JSON schema of Weather" in chat.attributes["gen_ai.system_instructions"]
    rec = Recorder()
    typed([PARIS], capture_content=False, **rec.providers).run("go")
    assert all("tracedagent.output.schema" not in span.attributes for span in rec.spans())


def test_a_typed_sub_agent_answers_its_caller_with_the_json_text():
    forecaster = typed(["warm", PARIS], name="forecaster")
    caller = Agent(FakeModel([tool_call("forecaster", {"task": "Paris?"}), "It is 21 in Paris."]),
                   [forecaster.as_tool(description="Forecasts.")])
    run = caller.run("go")
    assert run.ok and run.steps[0].tool_results[0].content == PARIS
    [sub] = run.sub_runs
    assert sub.output == Weather("Paris", 21) and sub.output_retries == 1
