"""Sub-agents: an ``Agent`` as a ``Tool`` that another agent's model calls.

The sub-agent's run happens inside its caller's ``execute_tool`` span, so a team is one
trace; ``current_run`` (set by the calling run) bounds it by what the caller has left and
counts its usage in the caller's totals. How its stop reaches the caller:

* it answered: the call's outcome is ``ok`` and the result is the answer;
* it stopped on a budget, a loop, no progress or a model error: outcome ``error``, and the
  model is told which stop reason, so it can route around it;
* it hit a fatal tool error: the caller's call is ``fatal`` too, so the whole team stops
  (``fatal_is_fatal=False`` makes it an ``error`` the caller's model sees instead);
* it paused for approval: the caller's call is ``pending`` and the caller pauses too, so the
  whole team waits; resuming the caller resumes the sub-agent (``resuming_tool``).

Called from a streamed run (``Agent.stream`` / ``astream``), the sub-agent's run is streamed too
(``astream``) and its events go to the streamed run's consumer (``_events.event_sink``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Protocol

from opentelemetry import trace

from .._core import _names as N
from .._core._budget import Budget, Stop
from .._core._events import event_sink
from .._core._run import Run, current_run
from .._instrumentation._telemetry import guard
from .._core._checkpoint import Checkpoint
from .._core._decisions import Decision
from .._core._tools import FatalToolError, Paused, Tool, ToolError


class _Runs(Protocol):
    """What a sub-agent's tool needs of its ``Agent``: ``arun``, ``aresume`` for a paused run, and
    ``astream`` under a stream."""

    async def arun(self, task: str, *, budget: Budget | None = None) -> Run: ...

    async def aresume(self, checkpoint: Checkpoint, decisions: Mapping[str, Decision]) -> Run: ...

    def astream(self, task: str, *, budget: Budget | None = None) -> Any: ...

__all__ = ["agent_tool", "answer", "SubAgentTool", "resuming_tool"]

TASK_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["task"],
               "properties": {"task": {"type": "string", "description": "What the sub-agent should do."}}}


@dataclass(frozen=True, kw_only=True)
class SubAgentTool(Tool):
    """A sub-agent as a tool. Its run inherits the calling run's deadline and ends itself
    there, recorded as ``time_budget_exhausted`` and counted in the caller's totals, so the
    caller's ``arun`` does not cut the call from outside (which would cancel the run instead)."""

    ends_itself_at_deadline: ClassVar[bool] = True
    forwards_events: ClassVar[bool] = True
    """Under a streamed run, its sub-agent's events reach the stream's consumer as they happen."""

    runs: Any = None
    """The agent whose run this tool is. A driver may run it its own way: ``tracedagent.temporal``
    runs it as a child workflow, with ``budget`` and ``answer`` as here."""
    budget: Budget | None = None
    """The budget ``as_tool`` was given (``None``: the sub-agent's own)."""
    fatal_is_fatal: bool = True
    """Whether the sub-agent's ``fatal_tool_error`` ends the caller's run too."""

    def answer(self, run: Run) -> str:
        """What the calling model is shown of the sub-agent's run (see ``answer``)."""
        return answer(self.name, run, self.fatal_is_fatal)


def answer(name: str, run: Run, fatal_is_fatal: bool) -> str:
    """The sub-agent's answer (a typed one as its JSON text), or the ``ToolError``
    (``FatalToolError``) saying why it stopped."""
    if run.ok:
        return run.output if isinstance(run.output, str) else run.text
    if run.stop is Stop.APPROVAL_REQUIRED:  # the caller's call waits too, and so does the caller
        raise Paused(run)
    if run.stop is Stop.TOOL_FATAL and fatal_is_fatal:
        raise FatalToolError(f"sub-agent {name} stopped: {run.stop.value}")
    raise ToolError(f"sub-agent {name} stopped ({run.stop.value}): {run.output}")


def agent_tool(agent: _Runs, *, name: str, description: str, budget: Budget | None,
               fatal_is_fatal: bool = True) -> Tool:
    """See ``Agent.as_tool``."""

    async def delegate(task: str) -> str:
        sink = event_sink.get()
        if sink is None or sink[0] is not current_run.get():
            run = await agent.arun(task, budget=budget)
        else:  # a streamed run's tool: its consumer sees this run's events too
            forward = sink[1]
            async with agent.astream(task, budget=budget) as stream:
                async for event in stream:
                    forward(event)
            run = stream.run
        with guard("marking the sub-agent's stop"):  # the current span is the caller's execute_tool span
            trace.get_current_span().set_attribute(N.SUB_AGENT_STOP_REASON, run.stop.value)
        return answer(name, run, fatal_is_fatal)

    return SubAgentTool(name=name, description=description, parameters=TASK_SCHEMA, fn=delegate, runs=agent,
                        budget=budget, fatal_is_fatal=fatal_is_fatal)


def resuming_tool(sub: SubAgentTool, checkpoint: Checkpoint, decisions: Mapping[str, Decision]) -> Tool:
    """The sub-agent call of a paused team, as resuming dispatches it: the sub-agent's paused run
    resumed with its share of the decisions, its end told to the caller as ``delegate`` tells it."""

    async def resume(**_: Any) -> str:  # the call's arguments were the task, which the checkpoint holds
        run = await sub.runs.aresume(checkpoint, decisions)
        with guard("marking the sub-agent's stop"):
            trace.get_current_span().set_attribute(N.SUB_AGENT_STOP_REASON, run.stop.value)
        return sub.answer(run)

    return SubAgentTool(name=sub.name, description=sub.description, parameters={"type": "object"}, fn=resume,
                        runs=sub.runs, budget=sub.budget, fatal_is_fatal=sub.fatal_is_fatal)
