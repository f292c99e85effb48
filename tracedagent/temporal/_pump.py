"""The Temporal workflow's loop: a pump of the run machine, over an executor seam.

``pump`` performs what the ``RunMachine`` asks - call the model, dispatch a turn's calls
(``_acalls.turn``: concurrently or one after another, as ``arun``), wait for a person's
decisions, run the decided calls - through an ``Executor``: in the workflow
(``_workflow._Activities``) the model and each tool call are activities, a hosted sub-agent's
run a child workflow, the wait the ``decide`` update. Every decision (the answer, the turn's
checks, which calls wait, the budgets, a pause, what a failed call means) is the machine's;
so a test drives this loop with fake activities and no server (tests/test_temporal_pump.py).

Nothing here imports Temporal's SDK: replay safety is the executor's (activities and child
workflows in the same order, the workflow's time and random) and the observer's (spans ended
only when not replaying).
"""

from __future__ import annotations

from typing import Mapping, Protocol

from .._agent._acalls import decided_turn, turn
from .._core._checkpoint import Checkpoint
from .._core._decisions import Decision
from .._core._machine import CallModel, Decided, DecidedCall, Dispatch, RunMachine, Wait
from .._core._records import Completion, ToolCall, ToolResult
from .._core._request import ModelRequest
from .._core._run import Run

__all__ = ["Executor", "pump"]


class Executor(Protocol):
    """How a workflow performs the machine's requests. Each method raises only when the run
    itself is interrupted (the workflow cancelled, its worker gone): what a model or a tool did
    is a value."""

    async def model(self, request: ModelRequest) -> Completion | Exception:
        """The model's turn, or how the call failed (``DeadlineExceeded``: cut by the run's deadline)."""

    async def tool(self, call: ToolCall) -> ToolResult:
        """One call's result, whatever the tool did (a hosted sub-agent: its run's answer or stop)."""

    async def decided(self, decided: DecidedCall) -> ToolResult:
        """A call a person decided on: an approved one run as ``tool`` runs a call; a denied one's
        result (``decided.denied``, what the model is shown) in a span of its own."""

    async def wait(self, checkpoint: Checkpoint) -> Mapping[str, Decision] | None:
        """A person's checked decisions on ``checkpoint.pending``, or ``None`` once the driver
        waits no longer (its approval timeout)."""


async def pump(machine: RunMachine, run: Executor, *, parallel: bool, concurrency: int | None) -> Run:
    """The run, from its first model call to its stop: ``AgentRun``'s loop."""
    action = machine.start()
    while True:
        if isinstance(action, CallModel):
            answer = await run.model(action.request)
            action = machine.model_failed(answer) if isinstance(answer, Exception) else machine.model_returned(answer)
        elif isinstance(action, Dispatch):
            results = await turn(run.tool, machine, action.calls, parallel=parallel, concurrency=concurrency)
            action = machine.tools_done(results)
        elif isinstance(action, Wait):
            decisions = await run.wait(action.checkpoint)
            action = machine.wait_over() if decisions is None else machine.decided(decisions)
        elif isinstance(action, Decided):  # one after another, as a resumed run's
            action = machine.tools_done(await decided_turn(run.decided, machine, action.calls))
        else:
            return action.run
