"""What a ``tools/call`` comes back as: the text the model is shown, or a named failure.

Every way a call to a server can fail is a ``ToolError`` subclass, so the registry turns it into
an ``error`` outcome the model sees (and may route around) with the class's name as
``error.type``; a call cut off by its timeout or the run's deadline is the registry's
``timeout``. Nothing a server does raises out of a run.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from .._core._tools import ToolError

__all__ = ["MCPToolError", "MCPRequestError", "MCPConnectionLost", "MCPUnavailable", "MCPInvalidReply",
           "result_text", "cut"]


class MCPToolError(ToolError):
    """The server ran the tool and it failed: a result with ``isError: true``. Its text is the
    message, which the model sees."""


class MCPRequestError(ToolError):
    """The server answered the request with a JSON-RPC error (an unknown tool, bad params, its
    own failure)."""

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code
        """The JSON-RPC error code (the span's ``rpc.response.status_code``)."""


class MCPConnectionLost(ToolError):
    """The connection ended while the call was in flight (a stdio server that exited, a closed
    HTTP session): whether the tool ran is unknown, so the call is not repeated. The next call
    connects again."""


class MCPUnavailable(ToolError):
    """No session could be had for the call: the server could not be started or reached, or its
    answers to ``initialize`` and ``tools/list`` could not be read (the cause says which)."""


class MCPInvalidReply(ToolError):
    """The server answered, but not with something the protocol allows: a line that is not
    JSON-RPC, a result of the wrong shape, nesting deeper than the SDK reads. Said at once, not
    after the call's timeout; what the reply held is not repeated (the message names only what
    was wrong with it)."""


def result_text(content: list[Any], structured: Any, *, max_length: int) -> str:
    """The model's view of a result. Structured content, when the server gives it, is the result
    (as JSON: the spec has servers repeat it as text only for older clients); otherwise the text
    blocks, in order. Any other block (an image, audio, a resource) is named with its type and size
    rather than dropped or pasted in. Bounded by ``max_length`` characters."""
    texts: list[str] = []
    others: list[str] = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(getattr(block, "text", ""))
        else:
            others.append(_summary(block, kind))
    if structured is not None:
        body = json.dumps(structured, ensure_ascii=False, default=str)
    else:
        body = "\n".join(texts)
    return cut("\n".join(part for part in [body, *others] if part), max_length)


def cut(text: str, max_length: int) -> str:
    """``text``, or its first ``max_length`` characters and a note of how long it was: what the
    model is shown of anything a server sends (a result, an error's message)."""
    if len(text) > max_length:
        return text[:max_length] + f"...[truncated: {len(text)} characters]"
    return text


def _summary(block: Any, kind: str | None) -> str:
    """``[image image/png, 33 bytes]``: what a block that is not text holds, without its data."""
    mime = getattr(block, "mime_type", None) or getattr(getattr(block, "resource", None), "mime_type", None)
    size = _size(block)
    parts = [str(kind or "content"), *([mime] if mime else []), *([f"{size} bytes"] if size is not None else [])]
    uri = getattr(block, "uri", None) or getattr(getattr(block, "resource", None), "uri", None)
    described = " ".join(parts[:2]) + (f", {parts[2]}" if len(parts) > 2 else "")
    return f"[{described}{f' at {uri}' if uri else ''}]"


def _size(block: Any) -> int | None:
    """Bytes a block carries (base64 data decoded), or ``None`` when it carries none inline."""
    resource = getattr(block, "resource", None)
    data = getattr(block, "data", None) or getattr(resource, "blob", None)
    if isinstance(data, str):
        try:
            return len(base64.b64decode(data, validate=True))
        except (binascii.Error, ValueError):
            return len(data)
    text = getattr(resource, "text", None)
    return len(text.encode()) if isinstance(text, str) else None
