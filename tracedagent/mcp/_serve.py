"""An agent served as an MCP tool: the other way round from ``MCPServer``.

``serve_agent(agent, description=...)`` returns the ``mcp`` SDK's own server with one tool, named
after the agent, taking ``{"task": "..."}``. The SDK's server opens a server span for each request
from the trace context in its ``params._meta`` and keeps it current while the tool runs, so the
agent's run (an ``arun``) is a child of the caller's tool span, in the caller's trace.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["serve_agent"]


class _Agent(Protocol):
    """What is served: an ``Agent`` (the integration does not import the agent wing)."""

    @property
    def name(self) -> str: ...

    async def arun(self, task: str) -> Any: ...


def serve_agent(agent: _Agent, *, description: str, name: str | None = None) -> Any:
    """An ``mcp.server.mcpserver.MCPServer`` serving ``agent`` as one tool; run it with its
    ``run()`` (stdio) or ``run("streamable-http", host=..., port=...)``. A run that answers is the
    tool's result; any other stop is a tool error (``isError``) naming the stop reason, so the
    caller's model can tell an answer from a give-up."""
    from mcp.server.mcpserver import MCPServer as SdkServer
    from mcp.server.mcpserver.exceptions import ToolError as SdkToolError

    tool_name = name or agent.name

    async def delegate(task: str) -> str:
        run = await agent.arun(task)
        if not run.ok:
            raise SdkToolError(f"the agent {tool_name!r} stopped without an answer ({run.stop.value}): {run.output}")
        return run.output

    server = SdkServer(tool_name)
    server.add_tool(delegate, name=tool_name, description=description, structured_output=False)
    return server
