"""The OpenAI Responses API wire format, as a ``FakeServer`` speaks it to the real ``openai`` SDK.

Written from the API reference: a response object (``id``, ``object: "response"``, ``status``,
``incomplete_details``, ``model``, ``output`` items, ``usage`` with ``input_tokens_details`` and
``output_tokens_details``), and its streaming events (``event: <type>`` / ``data: {"type", ...,
"sequence_number"}``, ended by ``response.completed`` with no ``[DONE]``). The key, the errors and
the clients are the Chat Completions wire's (``_openai_wire``): one SDK, one error shape.
"""

from __future__ import annotations

import json

from _fake_servers import FakeServer, Reply, json_reply, sse_reply
from _openai_wire import FAKE_KEY, MODEL, RESPONSE_MODEL, clients_for, error, use_key
from tracedagent.models import OpenAIResponsesModel

__all__ = ["FAKE_KEY", "MODEL", "RESPONSE_MODEL", "use_key", "model_for", "clients_for", "error", "response",
           "message", "function_call", "answer", "calls", "events", "streamed_answer", "streamed_calls"]


def model_for(server: FakeServer, **options: object) -> OpenAIResponsesModel:
    return OpenAIResponsesModel(MODEL, base_url=f"{server.url}/v1", **options)


def message(text: str, *, id: str = "msg_1", refusal: bool = False) -> dict:
    part = {"type": "refusal", "refusal": text} if refusal else {"type": "output_text", "text": text,
                                                                   "annotations": []}
    return {"type": "message", "id": id, "status": "completed", "role": "assistant", "content": [part]}


def function_call(call_id: str, name: str, arguments: str | dict, *, id: str | None = None) -> dict:
    return {"type": "function_call", "id": id or f"fc_{call_id}", "call_id": call_id, "name": name,
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments), "status": "completed"}


def response(*output: dict, id: str = "resp_answer", status: str = "completed", incomplete: str | None = None,
             input_tokens: int = 20, output_tokens: int = 7, cached: int = 0, reasoning: int = 0,
             model: str = RESPONSE_MODEL) -> dict:
    """A response object with these output items."""
    return {"id": id, "object": "response", "created_at": 1700000000, "status": status, "error": None,
            "incomplete_details": {"reason": incomplete} if incomplete else None, "model": model,
            "output": list(output), "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached},
                      "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": reasoning},
                      "total_tokens": input_tokens + output_tokens}}


def answer(text: str = "The answer is 5.", *, id: str = "resp_answer", **options: object) -> Reply:
    return json_reply(response(message(text), id=id, **options))  # type: ignore[arg-type]


def calls(*tool_calls: tuple[str, str, str | dict], input_tokens: int = 30, output_tokens: int = 12,
          id: str = "resp_calls", **options: object) -> Reply:
    """A turn requesting ``(call_id, name, arguments)`` calls, in that order; string arguments are sent raw."""
    return json_reply(response(*(function_call(*c) for c in tool_calls), id=id, input_tokens=input_tokens,
                               output_tokens=output_tokens, **options))  # type: ignore[arg-type]


# --- streamed replies (``stream=True``): the API's semantic events -------------------------------------

def events(*payloads: dict | float, break_after: int | None = None) -> Reply:
    """The events (and pauses, in seconds) as server-sent events, each named by its ``type`` and
    numbered (``sequence_number``) as the API does."""
    pieces: list[bytes | float] = []
    for number, payload in enumerate(payloads):
        if isinstance(payload, float):
            pieces.append(payload)
            continue
        body = {**payload, "sequence_number": number}
        pieces.append(f"event: {payload['type']}\ndata: {json.dumps(body)}\n\n".encode())
    return sse_reply(*pieces, break_after=break_after)


def _started(id: str) -> dict:
    return {"type": "response.created", "response": {**response(id=id, status="in_progress"), "usage": None}}


def _text_events(pieces: tuple[str, ...] | list[str], output_index: int, item_id: str = "msg_1") -> list[dict]:
    item = {"type": "message", "id": item_id, "status": "in_progress", "role": "assistant", "content": []}
    where = {"item_id": item_id, "output_index": output_index, "content_index": 0}
    return [{"type": "response.output_item.added", "output_index": output_index, "item": item},
            *({"type": "response.output_text.delta", **where, "delta": p, "logprobs": []} for p in pieces),
            {"type": "response.output_text.done", **where, "text": "".join(pieces), "logprobs": []},
            {"type": "response.output_item.done", "output_index": output_index, "item": message("".join(pieces), id=item_id)}]


def _call_events(call_id: str, name: str, fragments: list[str], output_index: int) -> list[dict]:
    item = {**function_call(call_id, name, ""), "status": "in_progress"}
    where = {"item_id": item["id"], "output_index": output_index}
    return [{"type": "response.output_item.added", "output_index": output_index, "item": item},
            *({"type": "response.function_call_arguments.delta", **where, "delta": f} for f in fragments),
            {"type": "response.function_call_arguments.done", **where, "arguments": "".join(fragments)},
            {"type": "response.output_item.done", "output_index": output_index,
             "item": function_call(call_id, name, "".join(fragments))}]


def streamed_answer(*pieces: str, id: str = "resp_stream", break_after: int | None = None,
                    **options: object) -> Reply:
    """An answer streamed in these pieces of text, then ``response.completed`` with the usage."""
    whole = response(message("".join(pieces)), id=id, **options)  # type: ignore[arg-type]
    return events(_started(id), *_text_events(pieces, 0), {"type": "response.completed", "response": whole},
                  break_after=break_after)


def streamed_calls(text: list[str], *tool_calls: tuple[str, str, list[str]], id: str = "resp_calls",
                   input_tokens: int = 30, output_tokens: int = 12, **options: object) -> Reply:
    """Some text, then ``(call_id, name, argument fragments)`` calls, each its own output item."""
    output_events = _text_events(text, 0) if text else []
    for offset, (call_id, name, fragments) in enumerate(tool_calls):
        output_events += _call_events(call_id, name, fragments, offset + (1 if text else 0))
    items = ([message("".join(text))] if text else []) + [function_call(c, n, "".join(f)) for c, n, f in tool_calls]
    whole = response(*items, id=id, input_tokens=input_tokens, output_tokens=output_tokens, **options)  # type: ignore[arg-type]
    return events(_started(id), *output_events, {"type": "response.completed", "response": whole})
