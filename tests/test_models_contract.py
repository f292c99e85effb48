"""What every model adapter promises, whoever the provider: a completion and its spans say
the same things, the SDK's retries are kept, a failure stops the run as a named model error
with the partial run kept, and the API key goes nowhere.

Each case runs once per ``Provider``: the adapter through its real SDK against a local fake
of the provider's server (``_fake_servers.py``, speaking ``_openai_wire.py``,
``_openai_responses_wire.py`` or ``_anthropic_wire.py``), and once more through the async
driver (``Agent.arun``, the adapter's ``acomplete`` and the SDK's async client). How each
provider's requests and replies look on the wire (Anthropic's thinking blocks and cache tokens,
OpenAI's calls without ids, the Responses API's items and events) is tested in
``test_models_openai.py``, ``test_models_openai_responses.py`` and ``test_models_anthropic.py``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, Callable

import anthropic
import openai
import pytest
from opentelemetry.trace import StatusCode

import _anthropic_wire
import _openai_responses_wire
import _openai_wire
from _fake_servers import FAST_RETRY, FakeServer, Reply, json_reply, serve
from sample_tools import add, shout
from tracedagent import Agent, Budget, Completion, Model, Run, Stop
from tracedagent._core import _names as N
from tracedagent.models import AnthropicModel, MalformedResponseError, OpenAIChatModel, OpenAIResponsesModel
from tracedagent.testing import Recorder


def run_sync(agent: Agent, task: str) -> Run:
    return agent.run(task)


def complete_sync(model: Model, messages: list[dict[str, Any]], **options: Any) -> Completion:
    return model.complete(messages, **options)


def run_async(agent: Agent, task: str) -> Run:
    return asyncio.run(agent.arun(task))


def complete_async(model: Model, messages: list[dict[str, Any]], **options: Any) -> Completion:
    return asyncio.run(model.acomplete(messages, **options))  # type: ignore[attr-defined]


@dataclass(frozen=True, kw_only=True)
class Provider:
    """One adapter as the contract meets it: how to build it against a ``FakeServer``, how
    that server answers, and how a test calls it. Every case calls the adapter through
    ``run`` and ``complete``, so an async driver is one more entry in ``PROVIDERS``: a
    ``dataclasses.replace`` of a provider with its own ``id``, ``run``, ``complete`` and
    ``client_header``."""

    id: str
    """The test id."""
    name: str
    """``gen_ai.provider.name`` on the chat spans."""
    sdk: ModuleType
    """The SDK whose exceptions the adapter lets through."""
    key: str
    """The fake API key the adapter reads from the environment."""
    use_key: Callable[[pytest.MonkeyPatch], None]
    """Puts ``key`` where the SDK looks for it, and clears the variables that would redirect it."""
    build: Callable[..., Model]
    """``build(server, **options)``: the adapter, talking to ``server``."""
    adapter: type
    """The adapter class, for building it around ready clients."""
    clients: Callable[[FakeServer], tuple[Any, Any]]
    """``clients(server)``: ready sync and async SDK clients, talking to ``server``."""
    model: str
    """The model ``build`` asks for."""
    response_model: str
    """The model the server's replies name."""
    answer: Callable[..., Reply]
    """``answer(text, input_tokens=20, output_tokens=7)``: a final text answer."""
    calls: Callable[..., Reply]
    """``calls(*(id, name, arguments), input_tokens=30, output_tokens=12)``: a tool-calling turn."""
    error: Callable[..., Reply]
    """``error(status, message, **headers)``: an API error."""
    finish_reasons: tuple[str, str]
    """The finish reasons of a tool-calling turn and of an answer."""
    response_ids: tuple[str, str]
    """The ids ``calls`` and ``answer`` give their replies."""
    overloaded: tuple[int, type[Exception]]
    """The status a struggling server answers with, and the SDK error it becomes."""
    malformed: tuple[tuple[str, Reply, str], ...]
    """Bodies no completion can come from: ``(test id, reply, error type)``."""
    required: str
    """The field a ``MalformedResponseError`` names as missing."""
    run: Callable[[Agent, str], Run] = run_sync
    """How a test runs an agent."""
    complete: Callable[..., Completion] = complete_sync
    """``complete(model, messages, **options)``: how a test calls the model itself."""
    client_header: str = "false"
    """The ``x-stainless-async`` header both SDKs send: which of their clients made a request."""

    def sent_every_request_through_its_client(self, server: FakeServer) -> bool:
        return bool(server.requests) and all(r.headers.get("x-stainless-async") == self.client_header
                                             for r in server.requests)


OPENAI = Provider(
    id="openai", name="openai", sdk=openai, key=_openai_wire.FAKE_KEY, use_key=_openai_wire.use_key,
    build=_openai_wire.model_for, adapter=OpenAIChatModel, clients=_openai_wire.clients_for, model=_openai_wire.MODEL, response_model=_openai_wire.RESPONSE_MODEL,
    answer=_openai_wire.answer, calls=_openai_wire.calls, error=_openai_wire.error,
    finish_reasons=("tool_calls", "stop"), response_ids=("chatcmpl-calls", "chatcmpl-answer"),
    overloaded=(500, openai.InternalServerError), required="choices",
    malformed=(("truncated", Reply(body=b'{"id": "x", "choices": [', headers={"content-type": "application/json"}),
                "JSONDecodeError"),
               ("no-choices", json_reply({"id": "x", "object": "chat.completion"}), "MalformedResponseError"),
               ("empty-choices", json_reply({"id": "x", "choices": []}), "MalformedResponseError")))

OPENAI_RESPONSES = Provider(
    id="openai-responses", name="openai", sdk=openai, key=_openai_wire.FAKE_KEY, use_key=_openai_wire.use_key,
    build=_openai_responses_wire.model_for, adapter=OpenAIResponsesModel, clients=_openai_wire.clients_for,
    model=_openai_wire.MODEL, response_model=_openai_wire.RESPONSE_MODEL,
    answer=_openai_responses_wire.answer, calls=_openai_responses_wire.calls, error=_openai_wire.error,
    finish_reasons=("completed", "completed"), response_ids=("resp_calls", "resp_answer"),
    overloaded=(500, openai.InternalServerError), required="output",
    malformed=(("truncated", Reply(body=b'{"id": "resp", "output": [', headers={"content-type": "application/json"}),
                "JSONDecodeError"),
               ("no-output", json_reply({"id": "resp", "object": "response"}), "MalformedResponseError")))

ANTHROPIC = Provider(
    id="anthropic", name="anthropic", sdk=anthropic, key=_anthropic_wire.FAKE_KEY, use_key=_anthropic_wire.use_key,
    build=_anthropic_wire.model_for, adapter=AnthropicModel,
    clients=_anthropic_wire.clients_for, model=_anthropic_wire.MODEL, response_model=_anthropic_wire.RESPONSE_MODEL,
    answer=_anthropic_wire.answer, calls=_anthropic_wire.calls, error=_anthropic_wire.error,
    finish_reasons=("tool_use", "end_turn"), response_ids=("msg_calls", "msg_answer"),
    overloaded=(529, anthropic.OverloadedError), required="content",
    malformed=(("truncated", Reply(body=b'{"id": "msg", "content": [', headers={"content-type": "application/json"}),
                "JSONDecodeError"),
               ("no-content", json_reply({"id": "msg", "type": "message"}), "MalformedResponseError")))

PROVIDERS = [OPENAI, OPENAI_RESPONSES, ANTHROPIC,
             *(replace(p, id=f"{p.id}-async", run=run_async, complete=complete_async, client_header="async:asyncio")
               for p in (OPENAI, OPENAI_RESPONSES, ANTHROPIC))]


@pytest.fixture(params=PROVIDERS, ids=lambda p: p.id)
def provider(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Provider:
    request.param.use_key(monkeypatch)
    return request.param


# --- completions and their spans ------------------------------------------------------


def test_a_text_answer_becomes_the_completion(provider):
    with serve(provider.answer("Hello there.", input_tokens=21, output_tokens=4)) as server:
        completion = provider.complete(provider.build(server), [{"role": "system", "content": "Be brief."},
                                                                {"role": "user", "content": "Hi"}])
    assert completion.text == "Hello there." and not completion.wants_tools
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (21, 4)
    assert completion.model == provider.response_model
    assert completion.response_id == provider.response_ids[1]
    assert completion.finish_reason == provider.finish_reasons[1]
    assert provider.sent_every_request_through_its_client(server)


def test_agent_runs_several_tool_calls_then_answers_and_is_traced(provider):
    rec = Recorder()
    with serve(provider.calls(("call_a", "add", {"a": 2, "b": 3}), ("call_s", "shout", {"text": "hi"})),
               provider.answer("2 + 3 = 5 and HI.", input_tokens=60, output_tokens=9)) as server:
        agent = Agent(provider.build(server), [add, shout], system_prompt="Use tools.", max_output_tokens=100,
                      **rec.providers)
        run = provider.run(agent, "Add 2 and 3, and shout hi.")

    assert run.ok and run.output == "2 + 3 = 5 and HI."
    assert [r.content for r in run.steps[0].tool_results] == ["5", "HI"]
    assert (run.input_tokens, run.output_tokens) == (30 + 60, 12 + 9)
    assert provider.sent_every_request_through_its_client(server)

    [view] = rec.runs()
    assert view.stop_reason == "answered" and view.executed_tools == ["add", "shout"]
    chat = view.chat_spans
    assert len(chat) == 2 and len(view.tool_spans) == 2
    for span in chat:
        assert span.attributes[N.GEN_AI_PROVIDER_NAME] == provider.name
        assert span.attributes[N.GEN_AI_REQUEST_MODEL] == provider.model
        assert span.attributes[N.SERVER_ADDRESS] == "127.0.0.1"
        assert span.attributes[N.SERVER_PORT] == server.port
        assert span.attributes[N.GEN_AI_RESPONSE_MODEL] == provider.response_model
        assert span.attributes[N.GEN_AI_REQUEST_MAX_TOKENS] == 100
    assert [s.attributes[N.GEN_AI_RESPONSE_FINISH_REASONS] for s in chat] == [(r,) for r in provider.finish_reasons]
    assert [s.attributes[N.GEN_AI_RESPONSE_ID] for s in chat] == list(provider.response_ids)
    assert [s.attributes[N.GEN_AI_USAGE_INPUT_TOKENS] for s in chat] == [30, 60]
    assert [s.attributes[N.GEN_AI_USAGE_OUTPUT_TOKENS] for s in chat] == [12, 9]


# --- provider errors ----------------------------------------------------------------


def test_rate_limit_is_retried_by_the_sdk(provider):
    rec = Recorder()
    with serve(provider.error(429, "Rate limit reached", **FAST_RETRY), provider.answer("after retry")) as server:
        run = provider.run(Agent(provider.build(server), **rec.providers), "Hi")
    assert run.ok and run.output == "after retry"
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]
    assert provider.sent_every_request_through_its_client(server)
    [span] = rec.runs()[0].chat_spans
    assert N.ERROR_TYPE not in span.attributes and span.status.status_code is not StatusCode.ERROR


def test_a_persistent_server_error_stops_the_run_and_keeps_the_partial_run(provider):
    rec = Recorder()
    status, error = provider.overloaded
    failing = [provider.error(status, "upstream exploded", **FAST_RETRY) for _ in range(3)]
    with serve(provider.calls(("call_a", "add", {"a": 1, "b": 1})), *failing) as server:
        run = provider.run(Agent(provider.build(server), [add], **rec.providers), "Add.")
    assert len(server.requests) == 1 + 3  # the SDK's default: 2 retries
    assert provider.sent_every_request_through_its_client(server)
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, error)
    assert run.output == f"Stopped: the model call failed ({error.__name__})."
    assert len(run.steps) == 1 and run.steps[0].tool_results[0].content == "2"
    assert run.messages[-1] == {"role": "tool", "tool_call_id": "call_a", "name": "add", "content": "2"}
    view = rec.runs()[0]
    assert view.stop_reason == "model_error"
    ok_span, failed_span = view.chat_spans
    assert N.ERROR_TYPE not in ok_span.attributes
    assert failed_span.attributes[N.ERROR_TYPE] == error.__name__
    assert failed_span.status.status_code is StatusCode.ERROR


@pytest.mark.parametrize("max_retries", [0, 1])
def test_max_retries_is_configurable(provider, max_retries):
    rec = Recorder()
    failing = [provider.error(500, "boom", **FAST_RETRY) for _ in range(1 + max_retries)]
    with serve(*failing, provider.answer("unused")) as server:
        run = provider.run(Agent(provider.build(server, max_retries=max_retries), **rec.providers), "Hi")
    assert len(server.requests) == 1 + max_retries
    assert provider.sent_every_request_through_its_client(server)
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, provider.sdk.InternalServerError)
    assert rec.runs()[0].chat_spans[0].attributes[N.ERROR_TYPE] == "InternalServerError"


def test_timeout_surfaces_as_the_sdk_exception(provider):
    rec = Recorder()
    with serve(Reply(delay=1.0, body=b"{}")) as server:
        run = provider.run(Agent(provider.build(server, timeout=0.2, max_retries=0), **rec.providers), "Hi")
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, provider.sdk.APITimeoutError)
    assert rec.runs()[0].chat_spans[0].attributes[N.ERROR_TYPE] == "APITimeoutError"


@pytest.mark.parametrize("client_timeout, call_timeout", [(30.0, 0.2), (0.2, 30.0)],
                         ids=["call-shorter", "client-shorter"])
def test_a_call_timeout_bounds_the_request_and_never_lengthens_the_clients(provider, client_timeout,
                                                                           call_timeout):
    """The slow server's eventual reply is no completion, so only a timeout explains an APITimeoutError."""
    with serve(Reply(delay=1.0, body=b"{}")) as server:
        model = provider.build(server, timeout=client_timeout, max_retries=0)
        with pytest.raises(provider.sdk.APITimeoutError):
            provider.complete(model, [{"role": "user", "content": "Hi"}], timeout=call_timeout)
    assert len(server.requests) == 1


def test_the_time_budget_left_bounds_the_model_call(provider):
    """The adapter gets the budget's time left as its request timeout (``arun`` also cancels the
    call at the deadline, whichever comes first); the run never waits for the slow reply."""
    rec = Recorder()
    with serve(Reply(delay=6.0, body=b"{}")) as server:  # the budget leaves a loaded machine time to send it
        agent = Agent(provider.build(server, max_retries=0), budget=Budget(max_seconds=1.5), **rec.providers)
        run = provider.run(agent, "Hi")
    assert run.stop is Stop.TIME_BUDGET and len(server.requests) == 1
    [span] = rec.runs()[0].chat_spans
    if run.error is None:  # arun's deadline came first
        assert span.attributes[N.ERROR_TYPE] == "timeout"
    else:
        assert isinstance(run.error, provider.sdk.APITimeoutError)
        assert span.attributes[N.ERROR_TYPE] == "APITimeoutError"


def test_one_adapter_serves_call_after_call(provider):
    """Async: each call below is its own ``asyncio.run``, and an async client's pooled connection
    cannot outlive its event loop, so the adapter must not hand the next loop the last one's."""
    with serve(*(provider.answer(f"answer {i}") for i in range(3))) as server:
        model = provider.build(server)
        texts = [provider.complete(model, [{"role": "user", "content": "Hi"}]).text for _ in range(3)]
    assert texts == ["answer 0", "answer 1", "answer 2"]
    assert provider.sent_every_request_through_its_client(server)


@pytest.mark.parametrize("provider, reply, error_type", [
    pytest.param(p, reply, error_type, id=f"{p.id}-{case}") for p in PROVIDERS for case, reply, error_type in p.malformed
], indirect=["provider"])
def test_malformed_body_stops_the_run_with_a_named_error(provider, reply, error_type):
    rec = Recorder()
    with serve(reply) as server:
        run = provider.run(Agent(provider.build(server, max_retries=0), **rec.providers), "Hi")
    assert run.stop is Stop.MODEL_ERROR and type(run.error).__name__ == error_type
    assert rec.runs()[0].chat_spans[0].attributes[N.ERROR_TYPE] == error_type
    if isinstance(run.error, MalformedResponseError):
        assert provider.required in str(run.error)


def test_api_key_never_reaches_spans_output_or_logs(provider, caplog):
    """The 401 body echoes the key, as a careless proxy might; it must still go nowhere."""
    caplog.set_level(logging.DEBUG)  # the SDK's and httpx's debug logs included
    rec = Recorder()
    leaky = provider.error(401, f"Incorrect API key provided: {provider.key}")
    with serve(leaky, provider.answer("fine")) as server:
        model = provider.build(server)
        agent = Agent(model, [add], capture_content=True, **rec.providers)
        failed = provider.run(agent, "Hi")
        logging.getLogger("test").exception("run failed", exc_info=failed.error)
        succeeded = provider.run(agent, "Hi again")
    sent = server.requests[0].headers
    assert provider.key in (sent.get("x-api-key"), sent.get("authorization", "").removeprefix("Bearer "))
    assert failed.stop is Stop.MODEL_ERROR and isinstance(failed.error, provider.sdk.AuthenticationError)
    assert rec.runs()[0].chat_spans[0].attributes[N.ERROR_TYPE] == "AuthenticationError"
    assert succeeded.ok and provider.sent_every_request_through_its_client(server)
    exported = "".join(span.to_json() for span in rec.spans())
    assert "AuthenticationError" in exported and "Hi again" in exported  # content capture was on
    for text in (exported, failed.output, succeeded.output, caplog.text, str(failed.error),
                 repr(failed.error.body), repr(model)):
        assert provider.key not in text


@pytest.mark.parametrize("provider", [p for p in PROVIDERS if p.run is run_async], ids=lambda p: p.id,
                         indirect=True)
def test_a_run_cancelled_in_the_model_call_ends_its_spans_and_the_adapter_still_serves(provider):
    """The client went away while the SDK awaited the server: ``CancelledError`` propagates, the
    chat span ends ``cancelled``, and the next run on the same loop and adapter is unharmed."""
    rec = Recorder()
    with serve(Reply(delay=1.0, body=b"{}"), provider.answer("after the cancel")) as server:
        agent = Agent(provider.build(server, max_retries=0), **rec.providers)

        async def cancel_then_run() -> Run:
            first = asyncio.ensure_future(agent.arun("Hi"))
            while not server.requests:  # the request is on the server: the SDK is awaiting the reply
                await asyncio.sleep(0.01)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            return await agent.arun("Hi again")

        run = asyncio.run(cancel_then_run())
    assert run.ok and run.output == "after the cancel"
    cancelled, answered = rec.runs()
    assert (cancelled.stop_reason, answered.stop_reason) == ("cancelled", "answered")
    assert cancelled.chat_spans[0].attributes[N.ERROR_TYPE] == "cancelled"
    assert provider.sent_every_request_through_its_client(server)


# --- the clients behind complete and acomplete ------------------------------------------


@pytest.mark.parametrize("provider", [OPENAI, OPENAI_RESPONSES, ANTHROPIC], ids=lambda p: p.id, indirect=True)
def test_the_async_client_is_built_per_event_loop_from_the_same_options(provider):
    with serve(provider.answer("first"), provider.answer("second")) as server:
        model = provider.build(server, max_retries=1, timeout=12.0)
        assert model.async_client is None  # nothing built until acomplete needs it
        complete_async(model, [{"role": "user", "content": "Hi"}])
        first = model.async_client
        complete_async(model, [{"role": "user", "content": "Hi"}])  # another asyncio.run: another loop
    assert first is not None and model.async_client is not first
    for client in (model.client, first, model.async_client):
        assert (client.base_url, client.max_retries, client.timeout) == (model.client.base_url, 1, 12.0)
    assert [r.headers["x-stainless-async"] for r in server.requests] == ["async:asyncio"] * 2


@pytest.mark.parametrize("provider", [OPENAI, OPENAI_RESPONSES, ANTHROPIC], ids=lambda p: p.id, indirect=True)
def test_ready_clients_sync_async_or_both(provider):
    """A ready async client is the caller's, bound to one event loop, so all calls share one."""
    hi = [{"role": "user", "content": "Hi"}]
    with serve(provider.answer("async"), provider.answer("sync in a thread"), provider.answer("both")) as server:
        sync_client, async_client = provider.clients(server)
        only_async = provider.adapter("m", async_client=async_client)
        only_sync = provider.adapter("m", sync_client)
        both = provider.adapter("m", sync_client, async_client=async_client)

        async def call_each() -> list[str]:
            return [(await model.acomplete(hi)).text for model in (only_async, only_sync, both)]

        assert asyncio.run(call_each()) == ["async", "sync in a thread", "both"]
        assert only_async.server_port == server.port and only_async.async_client is async_client
        with pytest.raises(TypeError, match="only an async_client"):
            only_async.complete(hi)
        with pytest.raises(TypeError, match="max_retries"):
            provider.adapter("m", async_client=async_client, max_retries=3)
    assert [r.headers["x-stainless-async"] for r in server.requests] == ["async:asyncio", "false", "async:asyncio"]
