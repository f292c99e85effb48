"""One LLM span per model call with a provider instrumentation on too (issue #39, item 8):
OpenInference's OpenAI instrumentor, installed for real, traces the ``openai`` SDK that
``OpenAIChatModel`` calls against a local server speaking the Chat Completions wire format.
By default tracedagent's ``chat`` span suppresses it; ``provider_spans="keep"`` does not; a
call made outside a run is the instrumentor's to trace, as before."""

from __future__ import annotations

import logging

import pytest
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.instrumentation.utils import is_http_instrumentation_enabled, is_instrumentation_enabled

from _fake_servers import serve
from async_support import drive
from _openai_wire import answer, clients_for, model_for, streamed_answer, use_key
from tracedagent import Agent, Completion
from tracedagent._core import _names as N
from tracedagent.testing import FakeModel, Recorder

OPENINFERENCE_KIND = "openinference.span.kind"


@pytest.fixture
def rec(monkeypatch: pytest.MonkeyPatch):
    """A recorder whose tracer provider OpenInference's instrumentor also writes to, for the test."""
    use_key(monkeypatch)
    monkeypatch.delenv(N.ENV_PROVIDER_SPANS, raising=False)
    recorder = Recorder()
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=recorder.providers["tracer_provider"])
    try:
        yield recorder
    finally:
        instrumentor.uninstrument()


def llm_spans(rec: Recorder) -> list:
    """Every span that stands for a model call: tracedagent's chat spans and the instrumentor's LLM spans."""
    return [s for s in rec.spans() if s.attributes.get(N.GEN_AI_OPERATION_NAME) == N.OP_CHAT
            or s.attributes.get(OPENINFERENCE_KIND) == "LLM"]


@pytest.mark.parametrize("driver", ["run", "arun", "stream"])
def test_by_default_a_call_in_a_run_is_one_llm_span_the_chat_span(rec, driver):
    replies = [streamed_answer("Hel", "lo.")] if driver == "stream" else [answer("Hello.")]
    with serve(*replies) as server:
        agent = Agent(model_for(server), **rec.providers)
        run = drive(agent, driver, "Hi")
    assert run.ok and run.output == "Hello."
    [span] = llm_spans(rec)
    assert span.name == "chat gpt-test" and span.attributes[N.GEN_AI_USAGE_INPUT_TOKENS] == 20


def test_keep_leaves_the_provider_span_under_the_chat_span(rec):
    with serve(answer("Hello.")) as server:
        assert Agent(model_for(server), provider_spans="keep", **rec.providers).run("Hi").ok
    chat, provider = sorted(llm_spans(rec), key=lambda s: s.start_time)
    assert chat.attributes[N.GEN_AI_OPERATION_NAME] == N.OP_CHAT
    assert provider.attributes[OPENINFERENCE_KIND] == "LLM"
    assert provider.parent.span_id == chat.context.span_id  # the duplicate is marked by its place


def test_the_variable_keeps_them_and_the_argument_wins(rec, monkeypatch):
    monkeypatch.setenv(N.ENV_PROVIDER_SPANS, "keep")
    with serve(answer("Hello."), answer("Hello.")) as server:
        Agent(model_for(server), **rec.providers).run("Hi")
        assert len(llm_spans(rec)) == 2
        rec.clear()
        Agent(model_for(server), provider_spans="suppress", **rec.providers).run("Hi")
        assert len(llm_spans(rec)) == 1


def test_a_call_outside_a_run_is_still_traced_by_the_instrumentor_and_spans_after_a_run_too(rec):
    with serve(answer("Hello."), answer("Direct.")) as server:
        Agent(model_for(server), **rec.providers).run("Hi")
        sync_client, _ = clients_for(server)
        sync_client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "Hi"}])
    kinds = [s.attributes.get(OPENINFERENCE_KIND) or s.attributes.get(N.GEN_AI_OPERATION_NAME) for s in llm_spans(rec)]
    assert sorted(kinds) == ["LLM", "chat"]  # the suppression ended with the chat span


def test_a_wrong_value_is_named(monkeypatch, caplog):
    with pytest.raises(ValueError, match="provider_spans"):
        Agent(FakeModel(["ok"]), provider_spans="drop")
    monkeypatch.setenv(N.ENV_PROVIDER_SPANS, "drop-them")
    with caplog.at_level(logging.WARNING, logger="tracedagent"):
        agent = Agent(FakeModel(["ok"]))
    assert agent._telemetry.suppress_provider_spans
    assert any(N.ENV_PROVIDER_SPANS in r.getMessage() for r in caplog.records)


class Probe:
    """A model that notes, during each call, whether OpenTelemetry's instrumentations
    (``opentelemetry-instrumentation``'s checks, which its openai, anthropic and HTTP client
    instrumentors make before each span) would record."""

    model_name = "probe"

    def __init__(self) -> None:
        self.seen: list[tuple[bool, bool]] = []

    def complete(self, request):
        self.seen.append((is_instrumentation_enabled(), is_http_instrumentation_enabled()))
        return Completion(text="ok")


@pytest.mark.parametrize("setting, enabled", [(None, False), ("suppress", False), ("keep", True)])
def test_opentelemetry_s_own_instrumentations_and_http_client_spans_are_off_inside_the_call_only(
        monkeypatch, setting, enabled):
    monkeypatch.delenv(N.ENV_PROVIDER_SPANS, raising=False)
    probe = Probe()
    assert Agent(probe, provider_spans=setting, **Recorder().providers).run("Hi").ok
    assert probe.seen == [(enabled, enabled)]  # HTTP client spans go with them: what suppression costs
    assert is_instrumentation_enabled()  # and only inside the call
