"""Captured content: bounded by what it records, still JSON when cut, and no secret survives.

Issue #30 items 2 and 3, and #31 item 1. The cost tests count the characters the redactor is
handed (a deterministic stand-in for time: before, it read the whole 20 MB); the secret tests
ship the spans through the real OTLP protobuf encoder and look for the secret's bytes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from tracedagent import Agent, Completion, Redactor, ToolCall, tool
from tracedagent._core import _names as N
from tracedagent.testing import FakeModel, Recorder, Replay, tool_call

LIMIT = N.DEFAULT_CONTENT_MAX_LENGTH
CONTENT = (N.GEN_AI_INPUT_MESSAGES, N.GEN_AI_OUTPUT_MESSAGES, N.GEN_AI_SYSTEM_INSTRUCTIONS,
           N.GEN_AI_TOOL_CALL_ARGUMENTS)


class Counting(Redactor):
    """The default redactor, counting the characters it reads."""

    def __init__(self) -> None:
        super().__init__()
        self.read = 0

    def __call__(self, text: str) -> str:
        self.read += len(text)
        return super().__call__(text)


def big_result_agent(size: int, rec: Recorder, redact: Redactor, **options: Any) -> Agent:
    @tool
    def dump(table: str) -> str:
        """Dumps a table."""
        return "row,value\n" * (size // 10)

    return Agent(FakeModel([tool_call("dump", {"table": "t"}), "done"]), [dump], capture_content=True,
                 redact=redact, **rec.providers, **options)


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_20_mb_result_costs_the_redactor_what_the_span_keeps_not_what_the_tool_returned(driver):
    rec, redact = Recorder(), Counting()
    agent = big_result_agent(20_000_000, rec, redact)
    run = agent.run("go") if driver == "run" else asyncio.run(agent.arun("go"))
    assert run.ok
    # the result's span, the second chat span's input, the run: each reads about one limit's worth
    assert redact.read < 8 * LIMIT, redact.read
    [tool_span] = [s for s in rec.spans() if s.name.startswith("execute_tool")]
    assert len(tool_span.attributes[N.GEN_AI_TOOL_CALL_RESULT]) == LIMIT
    assert list(tool_span.attributes[N.CONTENT_TRUNCATED]) == [N.GEN_AI_TOOL_CALL_RESULT]


def test_ten_megabytes_of_arguments_cost_what_is_kept():
    rec, redact = Recorder(), Counting()
    calls = [ToolCall("a", "take", {"blob": "x" * 10_000_000}),
             ToolCall("b", "take", {f"k{i}": i for i in range(1_000_000)}),
             ToolCall("c", "take", '{"blob": "' + "y" * 10_000_000)]

    @tool
    def take(**kwargs: Any) -> str:
        """Takes anything."""
        return "ok"

    model = FakeModel([Completion(tool_calls=calls), "done"])
    run = Agent(model, [take], capture_content=True, redact=redact, **rec.providers).run("go")
    assert run.ok
    assert redact.read < 20 * LIMIT, redact.read
    for span in rec.spans():
        for name in CONTENT:
            if name in span.attributes:
                assert len(span.attributes[name]) <= LIMIT
                json.loads(span.attributes[name])  # cut inside, still JSON


def test_cut_content_stays_json_and_the_span_says_what_was_cut(monkeypatch):
    monkeypatch.setenv(N.ENV_CONTENT_MAX_LENGTH, "2000")
    rec = Recorder()

    @tool
    def lookup(n: int) -> str:
        """Looks a thing up."""
        return f"thing {n}: " + "detail " * 100

    turns = [tool_call("lookup", {"n": i}) for i in range(8)] + ["x" * 5000]
    agent = Agent(FakeModel(turns), [lookup], system_prompt="be brief", capture_content=True, **rec.providers)
    assert agent.run("look everything up").ok
    chats = [s for s in rec.spans() if s.name.startswith("chat")]
    last = chats[-1].attributes
    messages = json.loads(last[N.GEN_AI_INPUT_MESSAGES])
    assert len(last[N.GEN_AI_INPUT_MESSAGES]) <= 2000
    assert messages[0]["parts"][0]["content"] == "look everything up"  # the task is kept
    [omitted] = [m for m in messages if m["parts"] and m["parts"][0]["type"] == N.CONTENT_OMITTED_PART]
    assert omitted["parts"][0]["count"] > 0
    assert messages[-1]["role"] == "tool"  # the latest message is kept
    output = json.loads(last[N.GEN_AI_OUTPUT_MESSAGES])
    assert output[0]["parts"][0]["content"].startswith("xxx")  # the turn, cut inside its part
    assert set(last[N.CONTENT_TRUNCATED]) == {N.GEN_AI_INPUT_MESSAGES, N.GEN_AI_OUTPUT_MESSAGES}
    assert N.CONTENT_TRUNCATED not in chats[0].attributes  # nothing of the first call was cut
    for span in rec.spans():
        for name in CONTENT:
            if name in span.attributes:
                json.loads(span.attributes[name])
                assert not span.attributes[name].endswith(N.TRUNCATION_MARK)


@pytest.mark.parametrize("variable", [N.ENV_ATTRIBUTE_VALUE_LENGTH_LIMIT, N.ENV_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT])
def test_the_sdks_attribute_limit_lowers_the_capture_limit_so_its_cut_never_splits_json(monkeypatch, variable):
    monkeypatch.setenv(variable, "300")
    rec = Recorder()
    Agent(FakeModel(["y" * 1000]), capture_content=True, **rec.providers).run("z" * 1000)
    [chat] = [s for s in rec.spans() if s.name.startswith("chat")]
    for name in (N.GEN_AI_INPUT_MESSAGES, N.GEN_AI_OUTPUT_MESSAGES):
        assert len(chat.attributes[name]) <= 300 and json.loads(chat.attributes[name])


def test_a_20_kb_turn_replays_at_the_default_limit(tmp_path):
    from test_replay import record

    turn = "A long answer. " * 1400  # 21,000 characters
    path = tmp_path / "long.otlp.json"

    @tool
    def lookup(q: str) -> str:
        """Looks up."""
        return "found: " + "z" * 20_000

    [run] = record(path, [(lambda tp: Agent(FakeModel([tool_call("lookup", {"q": "w" * 20_000}), turn]), [lookup],
                                            capture_content=True, tracer_provider=tp),
                           lambda agent: agent.run("write at length"))])
    replay = Replay.from_file(path, run.trace_id)
    replayed = replay.run()
    assert replayed.output == turn == run.output
    replay.check(replayed)


# --- secrets ------------------------------------------------------------------------------------

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SECRETS = {
    "aws-bare": (AWS_SECRET, f"the key is {AWS_SECRET} - keep it safe"),
    "github-pat": ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCD",
                   "token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCD"),
    **{f"json-{key}": ("Tr0ub4dor-and-3", f'{{"user": "svc", "{key}": "Tr0ub4dor-and-3"}}')
       for key in ("password", "aws_secret_access_key", "pwd", "db_pass", "passphrase", "private_key", "auth")},
    "json-number": ("48151623", '{"user": "svc", "pwd": 48151623}'),
    "json-object": ("Tr0ub4dor-and-3", '{"user": "svc", "password": {"value": "Tr0ub4dor-and-3"}}'),
    "json-array": ("Tr0ub4dor-and-3", '{"user": "svc", "api_key": ["Tr0ub4dor-and-3"]}'),
    "pem": ("MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn", "svc's key:\n-----BEGIN PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn"
            "/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n-----END PRIVATE KEY-----\n"),
    "stripe": ("sk_live_51H8XYZabcdEFGHijklMNOPqrst", "svc charges with sk_live_51H8XYZabcdEFGHijklMNOPqrst"),
    "sendgrid": ("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",
                 "svc mails with 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"),
    "twilio": ("SK2f3a9c4e8b7d6a5f4e3d2c1b0a9f8e7d", "svc texts as SK2f3a9c4e8b7d6a5f4e3d2c1b0a9f8e7d"),
    "azure": ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsu",
              "AccountName=svc;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsu==;EndpointSuffix=x"),
    "google": ("AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "svc maps with AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    "npm": ("npm_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R", "svc publishes with npm_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"),
}
"""A secret, and a text that carries it."""


def _placements(text: str) -> dict[str, Any]:
    """Where a text can travel: the task, a tool's result as it is, after a space or a newline,
    and cut short (a JSON string whose end is gone); arguments as an object and as a malformed
    raw string; and held in a string argument (JSON in JSON), in an object and in raw text,
    well-formed or not."""
    held = '{"user": "svc", "payload": ' + json.dumps(text) + "}"
    return {"task": text, "result": text, "result-space": " " + text, "result-newline": "\n" + text,
            "result-cut-short": text[: text.rfind('"') if text.endswith('}') else len(text)],
            "raw-arguments": text.rstrip("}") + ",}" if text.startswith("{") else text,
            "object-arguments": json.loads(text) if text.startswith("{") else {"note": text},
            "string-in-object-arguments": {"user": "svc", "payload": text},
            "string-in-raw-arguments": held, "string-in-malformed-raw-arguments": held[:-1] + ",}"}


@pytest.mark.parametrize("kind", sorted(SECRETS))
@pytest.mark.parametrize("where", sorted(_placements("{}")))
def test_a_secret_never_reaches_the_wire_with_capture_on(kind, where):
    secret, text = SECRETS[kind]
    placed = _placements(text)[where]

    @tool
    def fetch(**kwargs: Any) -> str:
        """Fetches."""
        return placed if where.startswith("result") else "ok"

    arguments = placed if where.endswith("arguments") else {}
    model = FakeModel([Completion(tool_calls=[ToolCall("c", "fetch", arguments)]), "done"])
    rec = Recorder()
    Agent(model, [fetch], capture_content=True, **rec.providers).run(placed if where == "task" else "go")
    wire = encode_spans(rec.spans()).SerializeToString()
    assert secret.encode() not in wire
    assert b"svc" in wire or "svc" not in text  # what is not a secret stays


def test_a_long_conversation_of_short_messages_that_fits_is_not_cut():
    from tracedagent._instrumentation._content import ContentCapture

    capture = ContentCapture(None, LIMIT)
    messages = [{"role": "user", "content": "flood"}] + [
        {"role": "tool", "tool_call_id": f"c{i}", "name": "ping", "content": "pong"} for i in range(200)]
    attributes = capture.conversation(messages)
    assert N.CONTENT_TRUNCATED not in attributes
    assert len(json.loads(attributes[N.GEN_AI_INPUT_MESSAGES])) == 201  # (128 kept before: a count, not a size)
    long = messages + [{"role": "assistant", "content": "x" * 2 * LIMIT}]  # one huge message: it is cut,
    shown = json.loads(capture.conversation(long)[N.GEN_AI_INPUT_MESSAGES])  # the others stay
    assert len(shown) == 202 and shown[-1]["parts"][0]["content"].startswith("xxx")
    assert {part["type"] for message in shown for part in message["parts"]} == {"text", "tool_call_response"}


# --- the opt-in: the upstream values of OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT -----

def _captured_with(monkeypatch: pytest.MonkeyPatch, value: str) -> bool:
    """Whether an agent left to the environment put the task on its run span."""
    monkeypatch.setenv(N.ENV_CAPTURE_CONTENT, value)
    rec = Recorder()
    Agent(FakeModel(["fine"]), [], **rec.providers).run("the secret task")
    [run_span] = [s for s in rec.spans() if s.name.startswith("invoke_agent")]
    return N.GEN_AI_INPUT_MESSAGES in run_span.attributes


@pytest.mark.parametrize("value, captured", [
    ("span_only", True), ("SPAN_ONLY", True), ("span_and_event", True), (" Span_And_Event ", True),
    ("event_only", False), ("no_content", False), ("NO_CONTENT", False),
    ("true", True), ("1", True), ("yes", True), ("on", True), ("false", False), ("0", False), ("", False),
])
def test_the_upstream_capture_values_and_the_boolean_ones_are_read_alike(monkeypatch, caplog, value, captured):
    """One value turns content on for tracedagent and the upstream GenAI instrumentations beside
    it: the span modes capture (tracedagent records content on spans only), event_only and
    no_content do not; the boolean form still works; none of these is warned about."""
    assert _captured_with(monkeypatch, value) is captured
    assert not [r for r in caplog.records if N.ENV_CAPTURE_CONTENT in r.getMessage()]


def test_an_unknown_capture_value_captures_nothing_and_is_warned_about_once(monkeypatch, caplog):
    caplog.set_level("WARNING", logger="tracedagent")
    assert _captured_with(monkeypatch, "spans_only") is False  # a typo of span_only
    assert _captured_with(monkeypatch, "spans_only") is False
    warnings = [r.getMessage() for r in caplog.records if N.ENV_CAPTURE_CONTENT in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "'spans_only'" in warnings[0] and "span_only" in warnings[0] and "true" in warnings[0]
    assert _captured_with(monkeypatch, "sure") is False  # another unknown value: its own warning
    assert len([r for r in caplog.records if N.ENV_CAPTURE_CONTENT in r.getMessage()]) == 2
