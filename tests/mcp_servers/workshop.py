"""A small MCP server for tracedagent's tests, on the official ``mcp`` SDK's own server.

Run as a real subprocess: ``python tests/mcp_servers/workshop.py`` serves stdio,
``--http PORT`` serves streamable HTTP on 127.0.0.1. With ``OTEL_EXPORTER_OTLP_ENDPOINT`` set it
traces itself (the SDK's server spans, plus one span of its own inside ``lookup``) and exports
to that collector, so a test can see its spans join the caller's trace.

Its tools are the cases a client must name: a plain answer, structured content, an image, an
``isError`` result, a JSON-RPC error, a call that never answers or answers late (``nap``), a
process that dies mid-call, a tool list that changes, and an input schema that uses the
keywords a client's check must honour (``book``: ``minimum``, ``pattern``, ``$ref``, ``oneOf``). (``hostile.py`` is the server that
breaks the protocol itself.)
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
from typing import Annotated, Literal, Union

from pydantic import BaseModel, Field

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import ImageContent, TextContent

server = MCPServer("workshop")


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def lookup(order_id: str) -> dict:
    """Look an order up (traced on the server side when tracing is on)."""
    from opentelemetry import trace

    with trace.get_tracer("workshop").start_as_current_span("workshop.lookup") as span:
        span.set_attribute("workshop.order_id", order_id)
        return {"order_id": order_id, "status": "shipped"}


@server.tool()
def overloaded() -> str:
    """Always answers with JSON-RPC error -32000, the code the SDK also uses for a closed connection."""
    raise MCPError(code=-32000, message="too busy, try later")


@server.tool()
def picture() -> list:
    """A one-pixel picture and a caption."""
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 24).decode()
    return [TextContent(type="text", text="a pixel"), ImageContent(type="image", data=png, mimeType="image/png")]


@server.tool()
def refuse(reason: str) -> str:
    """Always fails as a tool (isError: true)."""
    raise ToolError(f"refused: {reason}")


@server.tool()
def reject() -> str:
    """Always answers with a JSON-RPC error."""
    raise MCPError(code=-32042, message="the workshop is closed")


@server.tool()
async def hang(started: str = "") -> str:
    """Never answers; first writes the file ``started`` names, if any, so a test knows the call arrived."""
    if started:
        with open(started, "w") as marker:
            marker.write(str(os.getpid()))
    await asyncio.Event().wait()
    return "unreachable"


@server.tool()
async def nap(seconds: float) -> str:
    """Answers after ``seconds``."""
    await asyncio.sleep(seconds)
    return "rested"


class Guest(BaseModel):
    name: Annotated[str, Field(min_length=1)]


class Card(BaseModel):
    kind: Literal["card"]
    number: str


class Cash(BaseModel):
    kind: Literal["cash"]
    amount: float


@server.tool()
def book(seats: Annotated[int, Field(ge=1)], code: Annotated[str, Field(pattern=r"^[A-Z]{3}$")], guest: Guest,
         payment: Annotated[Union[Card, Cash], Field(discriminator="kind")]) -> str:
    """Book seats; its input schema has a minimum, a pattern, a $ref and a oneOf."""
    return f"booked {seats} on {code} for {guest.name} by {payment.kind}"


@server.tool()
def die() -> str:
    """Ends the server's process in the middle of the call."""
    os._exit(3)


@server.tool()
def traceparent(ctx: Context) -> str:
    """The ``traceparent`` this call's ``params._meta`` carried ("" if none)."""
    meta = ctx.request_context.meta or {}
    return str(meta.get("traceparent", "") if isinstance(meta, dict) else getattr(meta, "traceparent", ""))


@server.tool()
def pid() -> int:
    """The server process's id."""
    return os.getpid()


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool ``extra`` and tells the client its tool list changed."""
    def extra(n: int) -> int:
        """Doubles n."""
        return 2 * n

    server.add_tool(extra, name="extra")
    await ctx.session.send_tool_list_changed()
    return "grown"


def _trace_to_collector() -> None:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "workshop")}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(insecure=True)))
    trace.set_tracer_provider(provider)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, help="serve streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--echo-as", help="serve echo under this name too (a hostile server's long name)")
    options = parser.parse_args()
    if options.echo_as:
        server.add_tool(echo, name=options.echo_as)
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        _trace_to_collector()
    if options.http:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        server.run()
