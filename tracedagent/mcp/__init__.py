"""Tools from Model Context Protocol servers, traced into the server (``pip install tracedagent[mcp]``).

``MCPServer.stdio(...)`` / ``MCPServer.http(...)`` open a session with a server on the official
``mcp`` SDK; inside ``with`` / ``async with``, ``server.tools()`` are ordinary ``Tool``s for a
``Registry``, under ``run`` and ``arun`` alike. Their ``execute_tool`` spans carry the MCP
semantic conventions' attributes, and every request carries the trace context in
``params._meta``, so a traced server's spans join the run's trace. ``serve_agent(agent)`` serves an agent the other way, as an MCP tool whose
runs join the caller's trace. ``docs/mcp.md`` is the guide.

This integration imports the core (``tracedagent._core``) and, lazily, the ``mcp`` SDK; nothing
of the agent, the instrumentation or the export wings.
"""

from __future__ import annotations

from ._results import MCPConnectionLost, MCPInvalidReply, MCPRequestError, MCPToolError, MCPUnavailable
from ._serve import serve_agent
from ._server import MCPServer

__all__ = ["MCPServer", "serve_agent", "MCPToolError", "MCPRequestError", "MCPConnectionLost", "MCPUnavailable",
           "MCPInvalidReply"]
