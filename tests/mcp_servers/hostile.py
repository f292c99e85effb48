"""An MCP server that misbehaves on purpose, for tracedagent's tests: JSON-RPC over stdio by hand
(no SDK, which would not send what this one sends).

Run as a real subprocess: ``python tests/mcp_servers/hostile.py [--deep-schema N]``. It answers
``initialize``, ``ping`` and ``tools/list`` correctly (``--deep-schema N``: one tool's input
schema is nested N levels deep), and its tools answer the ways a broken or hostile server can:

- ``not_an_object``: a reply whose ``result`` is a string (not JSON-RPC's shape);
- ``cut_short``: a reply cut off in the middle (not JSON at all, its id readable);
- ``wrong_result``: well-formed JSON-RPC whose result is not a tool result;
- ``deep_result``: a result nested deeper than the SDK reads;
- ``stray_line``: a line that is not JSON and names no request (a log line on stdout), then
  the answer;
- ``huge_error``: a JSON-RPC error whose message is ``length`` characters;
- ``flood``: ``count`` ``notifications/tools/list_changed`` in a row, then the answer;
- ``listings``: how many ``tools/list`` requests this process has answered.
"""

from __future__ import annotations

import argparse
import json
import sys

OBJECT = {"type": "object", "properties": {}}
TOOLS = ["not_an_object", "cut_short", "wrong_result", "deep_result", "stray_line", "listings"]


def deep(levels: int) -> dict:
    schema: dict = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def send(out, message: dict | str) -> None:
    out.write((message if isinstance(message, str) else json.dumps(message)) + "\n")


def tools(deep_schema: int) -> list[dict]:
    listed = [{"name": name, "description": name, "inputSchema": OBJECT} for name in TOOLS]
    listed.append({"name": "huge_error", "description": "a long error",
                   "inputSchema": {"type": "object", "properties": {"length": {"type": "integer"}}}})
    listed.append({"name": "flood", "description": "many list_changed",
                   "inputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}}})
    if deep_schema:
        listed.append({"name": "deep", "description": "a deep schema", "inputSchema": deep(deep_schema)})
    return listed


def call(out, rid, name: str, arguments: dict, listings: int) -> None:
    def result(text: str) -> dict:
        return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}

    if name == "not_an_object":
        send(out, {"jsonrpc": "2.0", "id": rid, "result": "nothing like a result"})
    elif name == "cut_short":
        send(out, json.dumps(result("cut"))[:40])
    elif name == "wrong_result":
        send(out, {"jsonrpc": "2.0", "id": rid, "result": {"content": "not a list"}})
    elif name == "deep_result":
        send(out, {"jsonrpc": "2.0", "id": rid, "result": {"content": [], "structuredContent": deep(300)}})
    elif name == "stray_line":
        send(out, "hostile server: a log line on stdout")
        send(out, result("after the stray line"))
    elif name == "huge_error":
        send(out, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32050, "message": "E" * arguments["length"]}})
    elif name == "flood":
        notification = json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        out.write((notification + "\n") * arguments["count"])
        send(out, result("flooded"))
    elif name == "listings":
        send(out, result(str(listings)))
    else:
        send(out, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"no tool {name}"}})


def serve(deep_schema: int) -> None:
    out = sys.stdout
    listings = 0
    for line in sys.stdin:
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if rid is None:  # a notification: initialized, cancelled
            continue
        if method == "initialize":
            send(out, {"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "hostile", "version": "0"}}})
        elif method == "tools/list":
            listings += 1
            send(out, {"jsonrpc": "2.0", "id": rid, "result": {"tools": tools(deep_schema)}})
        elif method == "tools/call":
            call(out, rid, message["params"]["name"], message["params"].get("arguments") or {}, listings)
        elif method == "ping":
            send(out, {"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            send(out, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "unknown method"}})
        out.flush()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--deep-schema", type=int, default=0, help="one tool's schema nested this deep")
    serve(parser.parse_args().deep_schema)
