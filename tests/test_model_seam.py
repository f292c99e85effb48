"""The model seam: a model takes a ``ModelRequest``; one written to the earlier signature
(``complete(messages, tools=None, max_output_tokens=None, temperature=None[, timeout=None])``,
the same for ``acomplete``, ``stream``, ``astream``) keeps working through a shim chosen once,
when the agent is built; and the instrumented model is itself a ``Model``."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from tracedagent import Agent, Budget, Completion, Model, ModelRequest, ModelSettings, Stop, TurnEnd, Usage
from tracedagent._core import _request
from tracedagent._core._request import as_request, model_calls, takes_request
from tracedagent.testing import FakeModel, Recorder


def tool_free(text: str = "done") -> Completion:
    return Completion(text=text, usage=Usage(10, 2), finish_reason="stop")


class Earlier:
    """Today's signature, every method, with or without a ``timeout`` keyword."""

    def __init__(self, *, timeout: bool) -> None:
        self.seen: list[dict[str, Any]] = []
        self.takes_timeout = timeout

    def _saw(self, method: str, messages: Any, tools: Any, max_output_tokens: Any, temperature: Any,
             **rest: Any) -> None:
        self.seen.append({"method": method, "messages": len(messages), "tools": tools,
                          "max_output_tokens": max_output_tokens, "temperature": temperature, **rest})


class EarlierNoTimeout(Earlier):
    def complete(self, messages, tools=None, max_output_tokens=None, temperature=None):
        self._saw("complete", messages, tools, max_output_tokens, temperature)
        return tool_free()

    async def acomplete(self, messages, tools=None, max_output_tokens=None, temperature=None):
        self._saw("acomplete", messages, tools, max_output_tokens, temperature)
        return tool_free()

    def stream(self, messages, tools=None, max_output_tokens=None, temperature=None):
        self._saw("stream", messages, tools, max_output_tokens, temperature)
        yield "do"
        yield "ne"
        yield TurnEnd(usage=Usage(10, 2))

    async def astream(self, messages, tools=None, max_output_tokens=None, temperature=None):
        self._saw("astream", messages, tools, max_output_tokens, temperature)
        yield "do"
        yield "ne"
        yield TurnEnd(usage=Usage(10, 2))


class EarlierWithTimeout(Earlier):
    def complete(self, messages, tools=None, max_output_tokens=None, temperature=None, timeout=None):
        self._saw("complete", messages, tools, max_output_tokens, temperature, timeout=timeout)
        return tool_free()

    async def acomplete(self, messages, tools=None, max_output_tokens=None, temperature=None, timeout=None):
        self._saw("acomplete", messages, tools, max_output_tokens, temperature, timeout=timeout)
        return tool_free()

    def stream(self, messages, tools=None, max_output_tokens=None, temperature=None, timeout=None):
        self._saw("stream", messages, tools, max_output_tokens, temperature, timeout=timeout)
        yield "done"
        yield TurnEnd(usage=Usage(10, 2))

    async def astream(self, messages, tools=None, max_output_tokens=None, temperature=None, timeout=None):
        self._saw("astream", messages, tools, max_output_tokens, temperature, timeout=timeout)
        yield "done"
        yield TurnEnd(usage=Usage(10, 2))


async def _drain(stream: Any) -> Any:
    async with stream:
        async for _ in stream:
            pass
    return stream.run


def drive(agent: Agent, driver: str) -> Any:
    if driver == "run":
        return agent.run("hi")
    if driver == "arun":
        return asyncio.run(agent.arun("hi"))
    if driver == "stream":
        with agent.stream("hi") as stream:
            for _ in stream:
                pass
        return stream.run
    return asyncio.run(_drain(agent.astream("hi")))


METHOD = {"run": "complete", "arun": "acomplete", "stream": "stream", "astream": "astream"}


@pytest.mark.parametrize("driver", ["run", "arun", "stream", "astream"])
@pytest.mark.parametrize("kind", [EarlierNoTimeout, EarlierWithTimeout])
@pytest.mark.parametrize("time_budget", [None, 30.0])
def test_a_model_written_to_the_earlier_signature_gets_its_arguments_as_before(driver, kind, time_budget) -> None:
    rec = Recorder()
    model = kind(timeout=kind is EarlierWithTimeout)
    agent = Agent(model, budget=Budget(max_seconds=time_budget), max_output_tokens=64, temperature=0.25,
                  **rec.providers)
    run = drive(agent, driver)
    assert run.stop is Stop.ANSWERED and run.output == "done"
    [seen] = model.seen
    assert seen["method"] == METHOD[driver]
    assert (seen["messages"], seen["tools"], seen["max_output_tokens"], seen["temperature"]) == (1, None, 64, 0.25)
    if kind is EarlierWithTimeout:  # the time left, only when there is a time budget (as before)
        assert (seen["timeout"] is None) == (time_budget is None)
        assert time_budget is None or 0 < seen["timeout"] <= time_budget
    else:
        assert "timeout" not in seen
    [chat] = [s for s in rec.spans() if s.name.startswith("chat")]
    assert chat.attributes["gen_ai.request.max_tokens"] == 64
    assert chat.attributes["gen_ai.request.temperature"] == 0.25


class Current:
    """A model written to the request: every method takes one ``ModelRequest``."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> Completion:
        self.requests.append(request)
        return tool_free()

    async def acomplete(self, request: ModelRequest) -> Completion:
        self.requests.append(request)
        return tool_free()

    def stream(self, request: ModelRequest):
        self.requests.append(request)
        yield "done"

    async def astream(self, request: ModelRequest):
        self.requests.append(request)
        yield "done"


@pytest.mark.parametrize("driver", ["run", "arun", "stream", "astream"])
def test_a_model_written_to_the_request_gets_one_request_with_settings_and_the_time_left(driver) -> None:
    model = Current()
    run = drive(Agent(model, budget=Budget(max_seconds=30), max_output_tokens=64, temperature=0.25), driver)
    assert run.ok
    [request] = model.requests
    assert isinstance(request, ModelRequest) and request.messages[0] == {"role": "user", "content": "hi"}
    assert request.settings == ModelSettings(max_output_tokens=64, temperature=0.25)
    assert request.tools is None and 0 < request.timeout <= 30


def test_settings_changed_on_the_agent_reach_the_next_request() -> None:
    model = Current()
    agent = Agent(model, max_output_tokens=64)
    agent.temperature = 0.5
    agent.run("hi")
    assert model.requests[0].settings == ModelSettings(max_output_tokens=64, temperature=0.5)
    assert model.requests[0].timeout is None  # no time budget: no timeout


def test_each_method_is_read_once_when_the_agent_is_built_never_per_call(monkeypatch) -> None:
    read: list[Any] = []
    real = inspect.signature
    monkeypatch.setattr(_request.inspect, "signature", lambda f, *a, **k: read.append(f) or real(f, *a, **k))
    model = EarlierWithTimeout(timeout=True)
    agent = Agent(model, budget=Budget(max_seconds=30))
    built = len(read)
    assert built > 0
    agent.run("one")
    asyncio.run(agent.arun("two"))
    assert len(read) == built and len(model.seen) == 2


@pytest.mark.parametrize("method, expected", [
    (lambda self, request: None, True),
    (lambda self, req: None, True),  # one parameter, named otherwise
    (lambda self, request, *, extra=None: None, True),
    (lambda self, messages, tools=None, max_output_tokens=None, temperature=None: None, False),
    (lambda self, messages: None, False),
    (lambda self, *args, **kwargs: None, False),  # could be either: called as it always was
    (lambda self, req, tools=None: None, False),
    (lambda self: None, False),
])
def test_which_signatures_take_a_request(method, expected) -> None:
    class M:
        complete = method
    assert takes_request(M().complete) is expected


def test_a_method_without_a_readable_signature_is_called_the_earlier_way() -> None:
    class Unreadable:
        __signature__ = "not a signature"  # inspect.signature raises TypeError

        def __call__(self, *args: Any) -> Any: ...

    assert takes_request(Unreadable()) is False


def test_the_library_models_take_a_request_and_still_the_earlier_arguments() -> None:
    fake = FakeModel(["a", "b"])
    assert takes_request(fake.complete) and takes_request(fake.acomplete)
    assert takes_request(fake.stream) and takes_request(fake.astream)
    messages = [{"role": "user", "content": "hi"}]
    assert fake.complete(ModelRequest(messages=messages, settings=ModelSettings(temperature=0.1))).text == "a"
    assert fake.complete(messages, None, 32, 0.2).text == "b"  # the earlier way
    assert [(c["max_output_tokens"], c["temperature"]) for c in fake.calls] == [(None, 0.1), (32, 0.2)]


def test_a_request_and_earlier_arguments_together_are_refused() -> None:
    request = ModelRequest(messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(TypeError, match="takes nothing else"):
        as_request(request, temperature=0.5)
    assert as_request(request) is request


def test_the_instrumented_model_is_itself_a_model() -> None:
    rec = Recorder()
    agent = Agent(EarlierNoTimeout(timeout=False), **rec.providers)
    instrumented = agent._model
    assert isinstance(instrumented, Model) and takes_request(instrumented.complete)
    request = ModelRequest(messages=[{"role": "user", "content": "hi"}])
    assert instrumented.complete(request).text == "done"
    assert asyncio.run(instrumented.acomplete(request)).text == "done"
    assert len([s for s in rec.spans() if s.name.startswith("chat")]) == 2
    calls = model_calls(instrumented)  # wrapping it again finds its request-taking methods as they are
    assert calls.complete == instrumented.complete and calls.stream is None
