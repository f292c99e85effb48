"""The tool registry: dispatch to a named outcome, the JSON-schema argument checks, the policy."""

from __future__ import annotations

import pytest

from sample_tools import charge_card, no_refunds, refund, registry, search_help
from tracedagent import Registry, Tool, ToolCall, ToolError, ToolOutcome, tool


# --- dispatch: every way a call can go, as a named outcome ---------------------------

@pytest.mark.parametrize("call, outcome, content_part", [
    (ToolCall("1", "search_help", {"q": "x"}), ToolOutcome.OK, "3 articles about x"),
    (ToolCall("1", "refund", {"order_id": "A1", "amount": 5}), ToolOutcome.DENIED, "refunds need a human"),
    (ToolCall("1", "search_help", "{not json"), ToolOutcome.INVALID_ARGUMENTS, "not valid JSON"),
    (ToolCall("1", "search_help", "[1, 2]"), ToolOutcome.INVALID_ARGUMENTS, "must be a JSON object"),
    (ToolCall("1", "search_help", {}), ToolOutcome.INVALID_ARGUMENTS, "'q' is required"),
    (ToolCall("1", "search_help", {"q": 3}), ToolOutcome.INVALID_ARGUMENTS, "'q' must be string"),
    (ToolCall("1", "search_help", {"q": "x", "z": 1}), ToolOutcome.INVALID_ARGUMENTS, "unexpected argument 'z'"),
    (ToolCall("1", "delete_everything", {}), ToolOutcome.UNKNOWN_TOOL, "unknown tool 'delete_everything'"),
    (ToolCall("1", "broken", {}), ToolOutcome.ERROR, "Error: broken failed (ZeroDivisionError)"),
    (ToolCall("1", "not_found", {}), ToolOutcome.ERROR, "Error: no such order"),
    (ToolCall("1", "charge_card", {"amount": 1}), ToolOutcome.FATAL, "payment credentials revoked"),
])
def test_every_tool_outcome(call, outcome, content_part):
    def broken() -> str:
        """Has a bug."""
        return str(1 / 0)

    def not_found() -> str:
        """Raises a ToolError."""
        raise ToolError("no such order")

    reg = registry(search_help, refund, charge_card, broken, not_found, policy=no_refunds)
    result = reg.dispatch(call)
    assert result.outcome is outcome
    assert content_part in result.content
    assert result.call_id == "1" and result.name == call.name
    assert result.ok is (outcome is ToolOutcome.OK)


def test_valid_json_string_arguments_are_parsed():
    assert registry(search_help).dispatch(ToolCall("1", "search_help", '{"q": "x"}')).ok


def test_an_unexpected_tool_exception_shows_the_model_only_its_class():
    def connect() -> str:
        """Opens a connection."""
        raise ConnectionError("postgres://admin:hunter2@db.internal/prod refused")

    result = registry(connect).dispatch(ToolCall("1", "connect", {}))
    assert result.outcome is ToolOutcome.ERROR and result.error_type == "ConnectionError"
    assert "hunter2" not in result.content


def test_a_tool_result_json_cannot_hold_is_still_text():
    def odd() -> dict:
        """Returns a mapping with tuple keys."""
        return {(1, 2): "x"}

    result = registry(odd).dispatch(ToolCall("1", "odd", {}))
    assert result.ok and result.content == "{(1, 2): 'x'}"


# --- schemas: the arguments are checked against the tool's JSON schema ----------------

@pytest.mark.parametrize("arguments, problem", [
    ({"tags": ["a", "b"], "mode": "fast"}, None),
    ({"tags": ["a", 2], "mode": "fast"}, "tags'[1] must be string, got integer"),
    ({"tags": [], "mode": "slow"}, "must be one of ['fast', 'safe'], got 'slow'"),
    ({"tags": [], "mode": "fast", "limit": 2.5}, None),
    ({"tags": [], "mode": "fast", "limit": "2"}, "does not match any allowed type"),
    ({"tags": [], "mode": "fast", "extra": {"anything": [1]}}, None),
])
def test_a_hand_written_schema_is_checked_by_the_supported_keywords(arguments, problem):
    seen = []
    schema = {"type": "object", "required": ["tags", "mode"],
              "properties": {"tags": {"type": "array", "items": {"type": "string"}},
                             "mode": {"enum": ["fast", "safe"]},
                             "limit": {"anyOf": [{"type": "number"}, {"type": "null"}]},
                             "extra": {"type": "object", "items": True, "minProperties": 1}}}
    hand_written = Tool(name="go", description="Go.", parameters=schema, fn=lambda **kw: seen.append(kw) or "ok")
    result = Registry([hand_written]).dispatch(ToolCall("1", "go", arguments))
    if problem is None:
        assert result.ok and seen == [arguments]
    else:
        assert result.outcome is ToolOutcome.INVALID_ARGUMENTS and problem in result.content and not seen


def test_json_schema_true_false_and_required_without_properties():
    schema = {"type": "object", "required": ["id"], "properties": {"id": True, "legacy": False}}
    reg = Registry([Tool(name="go", description="Go.", parameters=schema, fn=lambda **kw: "ok")])
    assert reg.dispatch(ToolCall("1", "go", {"id": [1, {"any": "thing"}]})).ok
    assert "'legacy' is not allowed" in reg.dispatch(ToolCall("1", "go", {"id": 1, "legacy": 1})).content
    bare = Registry([Tool(name="go", description="Go.", parameters={"type": "object", "required": ["id"]},
                          fn=lambda **kw: "ok")])
    assert "'id' is required" in bare.dispatch(ToolCall("1", "go", {})).content


@pytest.mark.parametrize("arguments, problem", [
    ({"where": {"city": "Oslo"}}, None),
    ({"where": "Oslo"}, "'where' must be object, got string"),
    ({"where": {"city": 3}}, "'city' must be string, got integer"),
    ({"where": {}}, "'city' is required"),
])
def test_an_object_schema_checks_its_own_type(arguments, problem):
    schema = {"type": "object", "required": ["where"], "additionalProperties": False, "properties": {
        "where": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}}}
    result = Registry([Tool(name="go", description="Go.", parameters=schema, fn=lambda **kw: "ok")]).dispatch(
        ToolCall("1", "go", arguments))
    assert (result.ok if problem is None else problem in result.content), result.content


@pytest.mark.parametrize("schema", [{"type": "object", "properties": {"a": {"anyOf": 5}}},
                                    {"type": "object", "required": "a"},
                                    {"type": "object", "properties": {"a": {"enum": "abc"}}},
                                    {"type": "object", "properties": ["a"]}])
def test_a_schema_that_cannot_be_checked_fails_the_registry_naming_the_tool(schema):
    with pytest.raises(ValueError, match="tool 'go': its parameters are not a JSON schema"):
        Registry([Tool(name="go", description="Go.", parameters=schema, fn=lambda **kw: "ok")])


# --- the registry and the policy -------------------------------------------------------

def test_registry_accepts_plain_functions_and_rejects_duplicates():
    def add(a: int, b: int = 2) -> int:
        """Add two numbers."""
        return a + b

    reg = Registry([add])
    assert reg.dispatch(ToolCall("1", "add", {"a": 1})).content == "3"
    assert reg.schemas()[0]["parameters"]["required"] == ["a"]
    with pytest.raises(ValueError, match="two tools are named 'add'"):
        Registry([add, add])


def test_async_tools_are_accepted_and_async_generators_refused():
    async def fetch(url: str) -> str:
        """Fetch a page."""
        return url

    assert tool(fetch).is_async and tool(fetch).parameters["required"] == ["url"]

    async def pages(url: str):
        """Stream pages."""
        yield url

    with pytest.raises(TypeError, match="pages is an async generator"):
        tool(pages)


def test_a_policy_that_raises_fails_closed():
    def broken_policy(call):
        raise RuntimeError("boom")

    result = registry(refund, policy=broken_policy).dispatch(ToolCall("1", "refund", {"order_id": "A", "amount": 1}))
    assert result.outcome is ToolOutcome.DENIED and "policy failed" in result.content


def test_a_policy_returning_neither_none_nor_a_reason_fails_closed():
    result = registry(refund, policy=lambda call: False).dispatch(
        ToolCall("1", "refund", {"order_id": "A", "amount": 1}))
    assert result.outcome is ToolOutcome.DENIED and "returned bool" in result.content
