"""What the loop asks of a model: one value instead of parameters threaded through every layer.

A driver hands the model a ``ModelRequest`` and gets a ``Completion`` back. New settings (an
output schema, a provider's own options) become fields here, so adding one touches the code
that sets it and the adapters that read it, and nothing in between.

A model written to the earlier signature, ``complete(messages, tools=None,
max_output_tokens=None, temperature=None[, timeout=None])`` (and the same ``acomplete``,
``stream``, ``astream``), keeps working: ``model_calls`` tells each of its methods apart once,
when the model is wrapped, and gives the old ones a shim that unpacks the request. The other
way round, ``as_request`` lets the library's own models (``FakeModel``, the adapters) still be
called the old way.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from ._output import OutputRequest
from ._records import Completion, Message

__all__ = ["ModelSettings", "ModelRequest", "Model", "ModelCalls", "model_calls", "takes_request", "as_request"]


@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    """How the agent asks the model to generate, the same for every call of a run."""

    max_output_tokens: int | None = None
    """The most tokens one answer may have (``gen_ai.request.max_tokens``); ``None``: the
    provider's default."""
    temperature: float | None = None
    """Sampling temperature (``gen_ai.request.temperature``); ``None``: the provider's default."""


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """One model call: the conversation so far, the tools on offer and the settings."""

    messages: Sequence[Message]
    """The whole conversation, resent each call (the endpoint is stateless)."""
    tools: list[dict[str, Any]] | None = None
    """The registry's tool schemas, or ``None`` for a request with no tool calling (not ``[]``:
    "zero tools" and "no tool calling" are different requests)."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    """Generation settings."""
    timeout: float | None = None
    """Seconds the run's budget has left for this call, or ``None`` for no time budget; a model
    that can bound its request passes it on, so no model is asked whether it takes a timeout."""
    output: OutputRequest | None = None
    """The JSON the answer must be (an agent with ``output_type``), for an adapter that asks its
    provider for it (``mode``: ``native`` structured output, a forced output ``tool``); ``None``:
    any text. An adapter that cannot ask for it ignores it: the answer is validated either way."""


@runtime_checkable
class Model(Protocol):
    """Anything that turns a ``ModelRequest`` into a ``Completion``.

    A model may also define ``async def acomplete(request)``, which ``Agent.arun`` awaits
    (without it, ``arun`` runs ``complete`` in a worker thread), and ``stream(request)`` /
    ``astream(request)``, which yield the turn in pieces (``_streaming.py``) for
    ``Agent.stream`` / ``astream``. A model that can bound its call passes ``request.timeout``
    on. A model written to the earlier signature, ``complete(messages, tools=None,
    max_output_tokens=None, temperature=None)`` (with an optional ``timeout`` keyword), still
    works: the agent adapts it (``model_calls``).

    Implementations may also expose ``provider_name`` (``gen_ai.provider.name``, e.g.
    ``"openai"``) and ``model_name`` (``gen_ai.request.model``), plus ``server_address``
    and ``server_port``; the telemetry reads them when present.
    """

    def complete(self, request: ModelRequest) -> Completion: ...


_OLD_PARAMETERS = frozenset({"messages", "tools", "max_output_tokens", "temperature"})


def takes_request(method: Callable[..., Any]) -> bool:
    """Whether a model's method takes a ``ModelRequest``: its first parameter is ``request``,
    or its one parameter is none of the earlier signature's. Anything else (``messages``,
    ``*args``, a signature that cannot be read) is called the earlier way, as it always was."""
    try:
        parameters = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):  # no signature to read (a builtin, a C extension)
        return False
    if not parameters:
        return False
    if parameters[0].name == "request" and parameters[0].kind is not inspect.Parameter.KEYWORD_ONLY:
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    others = [p for p in parameters if p not in positional]
    return (len(positional) == 1 and positional[0].name not in _OLD_PARAMETERS
            and all(p.kind is p.KEYWORD_ONLY and p.default is not p.empty for p in others))


def _adapted(method: Callable[..., Any] | None) -> Callable[[ModelRequest], Any] | None:
    """``method`` as a call that takes a request: itself, or a shim over the earlier signature
    (passing ``timeout`` only if the method has the parameter, as the agent always did)."""
    if method is None or takes_request(method):
        return method
    try:
        takes_timeout = "timeout" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        takes_timeout = False

    def earlier(request: ModelRequest) -> Any:
        settings = request.settings
        if takes_timeout and request.timeout is not None:
            return method(request.messages, tools=request.tools, max_output_tokens=settings.max_output_tokens,
                          temperature=settings.temperature, timeout=request.timeout)
        return method(request.messages, tools=request.tools, max_output_tokens=settings.max_output_tokens,
                      temperature=settings.temperature)

    return earlier


@dataclass(frozen=True, kw_only=True)
class ModelCalls:
    """A model's methods, each one taking a ``ModelRequest`` (``None``: the model lacks it)."""

    complete: Callable[[ModelRequest], Any]
    """Its ``complete``: the ``Completion`` (unchecked)."""
    acomplete: Callable[[ModelRequest], Any] | None
    """Its ``acomplete``: an awaitable of the ``Completion``."""
    stream: Callable[[ModelRequest], Any] | None
    """Its ``stream``: an iterable of chunks (``_streaming.ModelChunk``)."""
    astream: Callable[[ModelRequest], Any] | None
    """Its ``astream``: an async iterable of chunks."""


def model_calls(model: Any) -> ModelCalls:
    """The model's calls as the instrumented model makes them, each method's signature read
    once, here."""
    complete = _adapted(model.complete)
    assert complete is not None
    return ModelCalls(complete=complete, acomplete=_adapted(getattr(model, "acomplete", None)),
                      stream=_adapted(getattr(model, "stream", None)),
                      astream=_adapted(getattr(model, "astream", None)))


def as_request(request: ModelRequest | Sequence[Message], tools: list[dict[str, Any]] | None = None,
               max_output_tokens: int | None = None, temperature: float | None = None,
               timeout: float | None = None) -> ModelRequest:
    """What a library model was asked: the ``ModelRequest`` it was handed, or, called the
    earlier way (``complete(messages, tools, max_output_tokens, temperature[, timeout])``), the
    request those arguments make. Both at once is a ``TypeError``: which would win is a guess."""
    if isinstance(request, ModelRequest):
        if tools is not None or max_output_tokens is not None or temperature is not None or timeout is not None:
            raise TypeError("a model given a ModelRequest takes nothing else: its tools, settings and "
                            "timeout are the request's")
        return request
    return ModelRequest(messages=request, tools=tools,
                        settings=ModelSettings(max_output_tokens=max_output_tokens, temperature=temperature),
                        timeout=timeout)
