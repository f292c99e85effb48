"""What crosses Temporal: the loop's records as plain JSON data, and back.

Temporal stores every activity's input and result, and the workflow's, in the run's history;
its data converter writes JSON. The records are written out field by field here (never
pickled, never guessed from type hints), so that what a worker on another machine reads back
is exactly what the loop recorded, and a ``Run`` comes back to the caller whole.

An exception cannot cross: a model's failure travels as its class name and its message, with
credential shapes blanked (the message is stored in Temporal's history), and comes back as a
``RemoteError`` whose class has the original's name, so that ``error.type`` and the stopped
run's sentence say what they would have said in ``run``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from .._core._attributes import check_attributes
from .._core._budget import Budget, Stop
from .._core._checkpoint import Checkpoint, budget_from
from .._core._messages import check_messages
from .._core._output import OutputSpec
from .._core._payloads import payload_size
from .._core._provider_messages import loop_messages
from .._core._records import Completion, ToolCall, ToolOutcome, ToolResult, Usage, error_type, message_of
from .._core._run import Run, Step
from .._core._secrets import Redactor
from .._core._tools import Approved

__all__ = ["RemoteError", "request_from_data", "completion_to_data", "completion_from_data", "result_to_data", "result_from_data",
           "run_to_data", "run_from_data", "budget_to_data", "budget_from_data", "error_to_data",
           "error_from_data", "call_to_data", "call_from_data", "run_within", "CUT"]

_redact = Redactor()


class RemoteError(Exception):
    """An exception raised on another worker, by its class name and (redacted) message. Each
    name gets a subclass of that name, so ``type(error).__name__`` is the original's."""


_remote_classes: dict[str, type[RemoteError]] = {}


def error_to_data(exc: BaseException) -> dict[str, str]:
    return {"type": error_type(exc), "message": _redact(message_of(exc))}


def error_from_data(data: dict[str, str]) -> RemoteError:
    name = str(data.get("type") or "Exception")
    cls = _remote_classes.get(name)
    if cls is None:
        cls = _remote_classes[name] = type(name, (RemoteError,), {"__qualname__": name, "__module__": __name__})
    return cls(str(data.get("message", "")))


def call_to_data(call: ToolCall) -> dict[str, Any]:
    data = {"id": call.id, "name": call.name, "arguments": call.arguments}
    if isinstance(call, Approved):  # a person approved it: the activity dispatches it without asking
        data["approved"] = True
    return data


def call_from_data(data: dict[str, Any]) -> ToolCall:
    kind = Approved if data.get("approved") else ToolCall
    return kind(id=data["id"], name=data["name"], arguments=data["arguments"])


def completion_to_data(completion: Completion) -> dict[str, Any]:
    return {"text": completion.text, "tool_calls": [call_to_data(c) for c in completion.tool_calls],
            "usage": dataclasses.asdict(completion.usage), "model": completion.model,
            "finish_reason": completion.finish_reason, "response_id": completion.response_id,
            "provider_data": completion.provider_data}


def completion_from_data(data: dict[str, Any]) -> Completion:
    # As the loop's records make them: a turn's calls in a list, none as Completion's default ().
    calls = [call_from_data(c) for c in data["tool_calls"]]
    return Completion(text=data["text"], tool_calls=calls or (),
                      usage=Usage(**data["usage"]), model=data["model"], finish_reason=data["finish_reason"],
                      response_id=data["response_id"], provider_data=data["provider_data"])


def result_to_data(result: ToolResult) -> dict[str, Any]:
    return {"call_id": result.call_id, "name": result.name, "content": result.content,
            "outcome": result.outcome.value, "error_type": result.error_type}


def result_from_data(data: dict[str, Any]) -> ToolResult:
    return ToolResult(call_id=data["call_id"], name=data["name"], content=data["content"],
                      outcome=ToolOutcome(data["outcome"]), error_type=data["error_type"])


def budget_to_data(budget: Budget) -> dict[str, Any]:
    return dataclasses.asdict(budget)


def budget_from_data(data: dict[str, Any]) -> Budget:
    return budget_from(data, "request")


def request_from_data(request: Any) -> dict[str, Any]:
    """A run request (``_client._request``'s shape), checked before anything runs: one written
    by hand or by another client that lacks a field or holds a wrong type is ``ValueError``
    (or ``TypeError``) with what is wrong, never a workflow task failing on every retry."""
    if not isinstance(request, dict):
        raise TypeError(f"a {type(request).__name__}, not an object")
    for key in ("agent", "task"):
        if not isinstance(request.get(key), str):
            raise ValueError(f"{key!r} is {type(request.get(key)).__name__}, not a string")
    history = loop_messages(request.get("history") or [])  # a provider's shapes, converted first
    check_messages(history, "history")  # MalformedMessage, a ValueError: which message, which field
    timeout = request.get("approval_timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or timeout < 0):
        raise ValueError(f"'approval_timeout' is {timeout!r}, not a number of seconds")
    conversation_id, carrier = request.get("conversation_id"), request.get("traceparent") or {}
    if conversation_id is not None and not isinstance(conversation_id, str):
        raise ValueError("'conversation_id' is not a string")
    if not isinstance(carrier, dict) or not all(isinstance(v, str) for v in carrier.values()):
        raise ValueError("'traceparent' is not a map of strings")
    budget = None if request.get("budget") is None else budget_from(request["budget"], "request", defaults=True)
    # Your own attributes (``attributes=``), checked as ``Agent.run`` checks them (``BadAttributes``,
    # a ValueError); a request without them - one started before they existed - has none.
    # JSON has no tuples: a sequence value comes back a list, and is a tuple again here.
    attributes = check_attributes(request.get("attributes"))
    return {"agent": request["agent"], "task": request["task"], "history": history, "budget": budget,
            "approval_timeout": timeout, "conversation_id": conversation_id, "traceparent": carrier,
            "attributes": attributes}


def run_to_data(run: Run) -> dict[str, Any]:
    """A ``Run`` as JSON. A typed answer (``Agent(output_type=...)``) crosses as its text, which
    ``run_from_data`` validates again with the output type the client names (``typed``)."""
    typed = run.ok and not isinstance(run.output, str)
    output = run.text if typed else run.output
    return {"output": output, "typed": typed, "text": None if run.text == output else run.text,  # not twice
            "output_retries": run.output_retries, "stop": run.stop.value, "step_count": run.step_count,
            "steps": [{"index": s.index, "completion": completion_to_data(s.completion),
                       "tool_results": [result_to_data(r) for r in s.tool_results],
                       # which calls waited, and whether the run paused on them: their fate (pending)
                       "waiting": [[i, why] for i, why in s.waiting.items()], "paused": s.paused,
                       "resumed": s.resumed} for s in run.steps],
            "messages": run.messages, "input_tokens": run.input_tokens, "output_tokens": run.output_tokens,
            "cost": run.cost, "trace_id": run.trace_id,
            "error": None if run.error is None else error_to_data(run.error),
            "sub_runs": [run_to_data(r) for r in run.sub_runs], "conversation_id": run.conversation_id,
            "paused": None if run.paused is None else run.paused.dumps()}


def run_from_data(data: dict[str, Any], output: OutputSpec | None = None) -> Run:
    """The ``Run`` of ``run_to_data``; a typed answer decoded with ``output`` (the output type's spec,
    ``output_spec``), else left as its JSON text. A text that does not validate as the type the
    client names is a ``ValueError``: the worker's agent has another output type."""
    value = data["output"]
    if data.get("typed") and output is not None:
        check = output.validate(value)
        if check.problem is not None:
            raise ValueError(f"the run's answer is not a {output.name} ({check.problem}): the worker's "
                             f"agent has another output type")
        value = check.value
    text = data.get("text")  # None (or absent: a worker before typed output) when it is the output
    return Run(output=value, text=data["output"] if text is None else text, output_retries=data.get("output_retries", 0),
               stop=Stop(data["stop"]), step_count=data["step_count"],
               steps=[Step(index=s["index"], completion=completion_from_data(s["completion"]),
                           tool_results=[result_from_data(r) for r in s["tool_results"]],
                           waiting={int(i): why for i, why in s.get("waiting", ())}, paused=s.get("paused", False),
                           resumed=s.get("resumed", False)) for s in data["steps"]],
               messages=data["messages"], input_tokens=data["input_tokens"], output_tokens=data["output_tokens"],
               cost=data["cost"], trace_id=data["trace_id"],
               error=None if data["error"] is None else error_from_data(data["error"]),
               sub_runs=[run_from_data(r) for r in data["sub_runs"]], conversation_id=data["conversation_id"],
               paused=Checkpoint.loads(data["paused"]) if data.get("paused") else None)


CUT = "cut"
"""The key of a run's data that lists what ``run_within`` left out to fit the payload limit."""


def run_within(data: dict[str, Any], limit: int) -> dict[str, Any]:
    """A run's data (``run_to_data``) cut to fit in ``limit`` bytes, the workflow's result: a
    larger one the server would refuse, terminating the workflow (no ``Run`` for its caller).
    What the caller decides on stays - the stop, output, counts, tokens, cost, trace id and
    every call's name, arguments and outcome; what is left out goes in this order, each only if
    still needed, and is named in ``data["cut"]``: ``"messages"`` (the conversation, the run's
    and its sub-runs'), ``"contents"`` (the model's texts and provider data, the tools'
    results: each a marker with its size), then ``"steps"`` and ``"sub_runs"``, then
    ``"paused"`` (a paused run's checkpoint, which holds the conversation: no resume)."""
    if payload_size(data) <= limit:
        return data
    data, cut = dict(data), []
    for what, trim in (("messages", _without_messages), ("contents", _without_contents),
                       ("steps", lambda d: {**d, "steps": [], "sub_runs": []}), ("paused", lambda d: {**d, "paused": None})):
        data = trim(data)
        cut.append(what)
        if payload_size({**data, CUT: cut}) <= limit:
            break
    return {**data, CUT: cut}


def _without_messages(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "messages": [], "sub_runs": [_without_messages(r) for r in data["sub_runs"]]}


def _marker(value: Any) -> Any:
    return value if not value else f"[cut: {payload_size(value):,} bytes]"


def _without_contents(data: dict[str, Any]) -> dict[str, Any]:
    steps = [{**step, "completion": {**step["completion"], "text": _marker(step["completion"]["text"]),
                                     "provider_data": None},
              "tool_results": [{**r, "content": _marker(r["content"])} for r in step["tool_results"]]}
             for step in data["steps"]]
    return {**data, "steps": steps, "sub_runs": [_without_contents(r) for r in data["sub_runs"]]}
