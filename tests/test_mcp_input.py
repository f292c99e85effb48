"""An MCP tool's input checked against the server's JSON Schema in full (``jsonschema``), before
the call is sent: against the test server ``mcp_servers/workshop.py``'s ``book`` tool (a
``minimum``, a ``pattern``, a ``$ref``, a ``oneOf``) over stdio, and the validator alone for the
keywords and messages. Only the model is scripted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tracedagent import Agent, Completion, Registry, Stop, ToolCall, ToolOutcome
from tracedagent._core import _names as N
from tracedagent._core._schemas import InvalidArguments
from tracedagent.testing import FakeModel, Recorder

pytest.importorskip("mcp")
from tracedagent.mcp import MCPServer  # noqa: E402
from tracedagent.mcp._arguments import input_validator  # noqa: E402

WORKSHOP = [str(Path(__file__).parent / "mcp_servers" / "workshop.py")]
GOOD = {"seats": 2, "code": "OSL", "guest": {"name": "Ada"}, "payment": {"kind": "card", "number": "4242"}}


CASES = [
    ({"seats": 3.0}, None),  # a whole-number float is a JSON Schema integer
    ({"payment": {"kind": "cash", "amount": 10}}, None),
    ({"seats": 0}, "'seats' must be >= 1"),
    ({"seats": 2.5}, "'seats' must be integer, got number"),
    ({"code": "osl"}, "'code' must match '^[A-Z]{3}$'"),
    ({"guest": {}}, "'guest'['name'] is required"),  # through the $ref
    ({"guest": {"name": ""}}, "'guest'['name'] must have at least 1 characters"),
    ({"payment": {"kind": "cheque"}}, "'payment'"),  # matches no branch of the oneOf
]


def test_the_servers_schema_is_honoured_in_full_and_only_valid_calls_reach_it():
    recorder = Recorder()
    calls = [ToolCall(f"c{i}", "book", {**GOOD, **change}) for i, (change, _) in enumerate(CASES)]
    with MCPServer.stdio(sys.executable, WORKSHOP, tracer_provider=recorder.tracer_provider, timeout=60) as server:
        model = FakeModel([Completion(text="", finish_reason="tool_calls", tool_calls=calls), "done"])
        run = Agent(model, Registry(server.tools()), **recorder.providers).run("book")
    assert run.stop is Stop.ANSWERED
    spans = {s.attributes[N.GEN_AI_TOOL_CALL_ID]: s for s in recorder.spans() if s.name.startswith("execute_tool")}
    for (change, problem), result in zip(CASES, run.steps[0].tool_results):
        sent = N.JSONRPC_REQUEST_ID in spans[result.call_id].attributes
        if problem is None:
            assert result.outcome is ToolOutcome.OK and "booked " in result.content, (change, result.content)
            assert sent, "the call was sent"
        else:
            assert result.outcome is ToolOutcome.INVALID_ARGUMENTS and problem in result.content, (change, result.content)
            assert not sent, "an invalid call never reaches the server"


SCHEMA = {"type": "object", "additionalProperties": False, "required": ["n"],
          "properties": {"n": {"type": "integer", "maximum": 9}, "tags": {"type": "array", "items": {"type": "string"},
                                                                          "maxItems": 2},
                         "when": {"type": "string", "format": "date"}}}


@pytest.mark.parametrize("arguments, problem", [
    ({"n": 3.0}, None),
    ({"n": 1, "when": "not a date"}, None),  # format is an annotation: never stricter than JSON Schema
    ({"n": True}, "'n' must be integer, got boolean"),
    ({"n": 10}, "'n' must be <= 9"),
    ({"n": 1, "tags": ["a", 2]}, "'tags'[1] must be string, got integer"),
    ({"n": 1, "tags": ["a", "b", "c"]}, "'tags' must have at most 2 items"),
    ({"n": 1, "other": 1}, "unexpected argument 'other'"),
    ({}, "'n' is required"),
])
def test_the_validator_says_where_and_which_keyword(arguments, problem):
    validate = input_validator(SCHEMA)
    if problem is None:
        assert validate(arguments) is arguments, "the arguments go to the server as they came"
    else:
        with pytest.raises(InvalidArguments) as raised:
            validate(arguments)
        assert str(raised.value) == problem


def test_the_message_never_quotes_the_input_and_is_bounded():
    secret = "sk-" + "a1B2" * 12
    validate = input_validator({"type": "object", "properties": {"k": {"type": "integer"}, "p": {"pattern": "^x$"}},
                                "additionalProperties": False})
    for arguments in ({"k": secret}, {"p": secret}, {secret: 1}, {"k": 1, "x" * 10_000: 1}):
        with pytest.raises(InvalidArguments) as raised:
            validate(arguments)
        assert secret not in str(raised.value) and len(str(raised.value)) <= 310, str(raised.value)


def test_a_schema_json_schema_rejects_or_cannot_resolve_refuses_that_tools_calls_by_name():
    with pytest.raises(InvalidArguments, match="not valid JSON Schema"):
        input_validator({"type": "int"})({"a": 1})
    with pytest.raises(InvalidArguments, match="could not be applied"):
        input_validator({"type": "object", "properties": {"a": {"$ref": "https://example.invalid/a.json"}}})({"a": 1})
