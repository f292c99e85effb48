"""Typed runs through replay and diff: the run span says where the output type lives
(``tracedagent.output.type_path``), ``Replay`` imports it, ``tracedagent replay`` writes a test
that imports it (run by pytest in a subprocess, as a user would), a type that cannot be imported
is a ``ReplayError`` naming its path, and ``tracedagent diff`` compares typed answers as JSON.

The output type lives in a module written for the test (``replay_weather_types``), imported
from a directory put on the path: a type in the user's package, as in production.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from test_cli import ROOT, assert_fails_cleanly, tracedagent
from test_replay import pytest_in, record
from tracedagent import Agent, Stop
from tracedagent._core import _names as N
from tracedagent.testing import FakeModel, Recorder, Replay, ReplayError, json_answer

TYPES = '''
from dataclasses import dataclass


@dataclass
class Weather:
    city: str
    celsius: int
'''


@pytest.fixture(scope="module")
def types(tmp_path_factory):
    """``replay_weather_types`` importable (this process, and CLI and pytest subprocesses with ``env``)."""
    where = tmp_path_factory.mktemp("types")
    (where / "replay_weather_types.py").write_text(TYPES)
    sys.path.insert(0, str(where))
    import replay_weather_types
    yield replay_weather_types, where
    sys.path.remove(str(where))
    sys.modules.pop("replay_weather_types", None)


def env_with(where: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(where), str(ROOT), os.environ.get("PYTHONPATH", "")])}


def typed_agent(output_type, script, system_prompt="You forecast the weather.", **model):
    return lambda tp: Agent(FakeModel(script, **model), name="forecaster", output_type=output_type, tracer_provider=tp,
                            capture_content=True, system_prompt=system_prompt)


def ask(agent):
    return agent.run("Weather in Paris?")


def test_the_run_span_says_where_an_importable_output_type_lives(types):
    module, _ = types

    @dataclass
    class Local:
        city: str

    for output_type, path in ((module.Weather, "replay_weather_types:Weather"), (Local, None), (list[int], None)):
        recorder = Recorder()
        Agent(FakeModel(["[1]" if output_type == list[int] else '{"city": "Paris", "celsius": 1}']),
              output_type=output_type, **recorder.providers).run("go")
        attributes = recorder.only_run().span.attributes
        assert attributes.get(N.OUTPUT_TYPE_PATH) == path
        assert N.OUTPUT_TYPE_NAME in attributes


def test_an_answered_typed_run_replays_through_the_generated_test(types, tmp_path):
    module, where = types
    path = tmp_path / "runs.otlp.json"
    [original] = record(path, [(typed_agent(module.Weather, ["Sunny, 21 degrees.", json_answer(
        module.Weather("Paris", 21))]), ask)])
    assert original.stop is Stop.ANSWERED and original.output_retries == 1
    out = where / "test_replay_forecaster.py"
    result = tracedagent("replay", path, "-o", out, env=env_with(where))
    assert result.returncode == 0, result.stderr
    assert "from replay_weather_types import Weather" in out.read_text()
    run = pytest_in(where, out.name)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "1 passed" in run.stdout

    replay = Replay.from_file(out.with_suffix(".json"))  # in Python: no output_type= either
    again = replay.run()
    replay.check(again)
    assert again.output == module.Weather("Paris", 21) == original.output and again.output_retries == 1
    # The trace holds the prompt as sent, the schema's instruction included; the agent adds it again.
    assert replay.system_prompt.startswith("You forecast the weather.\n\nWhen you give your final answer")
    assert replay.agent().system_prompt == "You forecast the weather."
    played = replay.play(capture_content=True)
    [system] = json.loads(played.view.span.attributes[N.GEN_AI_SYSTEM_INSTRUCTIONS])
    assert system["content"] == replay.system_prompt  # sent as when recorded: the instruction once


def test_a_type_that_cannot_be_imported_is_a_named_error(types, tmp_path):
    module, where = types

    @dataclass
    class Local:
        city: str
        celsius: int

    path = tmp_path / "local.otlp.json"
    record(path, [(typed_agent(Local, ['{"city": "Paris", "celsius": 21}']), ask)])
    replay = Replay.from_file(path)
    assert replay.recording.output_type == "Local" and replay.recording.output_type_path is None
    with pytest.raises(ReplayError, match="recorded without an import path.*pass output_type="):
        replay.run()
    replay.check(replay.run(replay.agent(output_type=Local)))  # named by hand, it replays

    assert_fails_cleanly(tracedagent("replay", path, "-o", tmp_path / "t.py"),
                         "recorded without an import path (a type defined in a function or in __main__, or a "
                         "form like list[int]): name it with --output-type MODULE:NAME")
    out = where / "test_replay_local.py"
    result = tracedagent("replay", path, "-o", out, "--output-type", "replay_weather_types:Weather",
                         env=env_with(where))
    assert result.returncode == 0, result.stderr
    assert "1 passed" in pytest_in(where, out.name).stdout
    assert_fails_cleanly(tracedagent("replay", path, "-o", tmp_path / "t.py", "--output-type", "nowhere_xyz:T"),
                         "the output type nowhere_xyz:T: cannot import it (ModuleNotFoundError")

    for recorded, message in (("nowhere_xyz:Weather", "cannot import the output type Local of the run of forecaster "
                                                      "from nowhere_xyz:Weather (ModuleNotFoundError"),
                              ("replay_weather_types:Gone", "from replay_weather_types:Gone (AttributeError"),
                              ("os:system; rm -rf", "has the path os:system; rm -rf, which is not module:qualname")):
        replay.recording.output_type_path = recorded
        with pytest.raises(ReplayError) as refused:
            replay.agent()
        assert message in str(refused.value) and "pass output_type=" in str(refused.value)


def test_diff_compares_typed_answers_as_json_and_says_when_one_run_is_untyped(types, tmp_path):
    module, _ = types
    path = tmp_path / "three.otlp.json"
    unmetered = {"estimate_usage": False}  # the same tokens for both spellings
    runs = record(path, [(typed_agent(module.Weather, ['{"city": "Paris", "celsius": 21}'], **unmetered), ask),
                         (typed_agent(module.Weather, ['{ "celsius": 21,\n  "city": "Paris" }'], **unmetered), ask),
                         (typed_agent(None, ['{"city": "Paris", "celsius": 21}'], **unmetered), ask)])
    a, b, untyped = (r.trace_id for r in runs)
    same = tracedagent("diff", a, b, "--file", path)
    assert same.returncode == 0, same.stderr
    [output] = [line for line in same.stdout.splitlines() if line.lstrip("│ ").split("│")[0].strip() == "output"]
    assert "≠" not in output and output.count('{"celsius": 21, "city": "Paris"}') == 2
    assert [line for line in same.stdout.splitlines() if "output type" in line and "Weather" in line]
    assert "The runs agree on every one of their 1 steps." in same.stdout  # one value, written two ways

    mixed = tracedagent("diff", a, untyped, "--file", path)
    assert mixed.returncode == 0, mixed.stderr
    assert "A is a typed run (Weather), B an untyped one: its output is text." in mixed.stdout
    [kind] = [line for line in mixed.stdout.splitlines() if "output type" in line]
    assert "≠" in kind and "- (text)" in kind
