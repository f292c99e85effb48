"""One run of an agent with the spans it emitted: what replay re-runs, and what an evaluation grades.

``play(agent, task, recorder=...)`` (``aplay`` under ``arun``) runs an agent on a task and
returns a ``Played``: the ``Run`` the agent returned and the spans the run emitted, read from a
``Recorder`` the agent reports to, with ``view``, the run as its spans tell it (a ``RunView``).
``Replay.play()`` gives the same for a recorded run, its model turns played back and its tools
stubbed. A grader then reads one shape whether the run was live or recorded: an evaluation
runs each case of a dataset through one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import format_trace_id

from .._core._records import Message
from .._core._run import Run
from ._recorder import Recorder
from ._views import RunView, is_run_span

if TYPE_CHECKING:
    from .._agent._loop import Agent

__all__ = ["Played", "play", "aplay", "played"]


@dataclass(frozen=True, kw_only=True)
class Played:
    """A run an agent made, and the spans it emitted."""

    run: Run
    """What the agent returned."""
    spans: tuple[ReadableSpan, ...]
    """The spans of the run's trace that ended while it ran, in the order they ended: its run
    span, its steps', model calls' and tool calls' spans, and its sub-agents' runs."""

    @property
    def view(self) -> RunView:
        """The run as its spans tell it (what a dashboard sees): its ``invoke_agent`` span, the
        outermost one played, and the spans under it. ``AssertionError`` when none was recorded."""
        __tracebackhide__ = True
        ended = {span.context.span_id for span in self.spans}
        top = [span for span in self.spans if is_run_span(span)
               and (span.parent is None or span.parent.span_id not in ended)]
        if not top:
            raise AssertionError("no run span of this run was recorded: build the agent with **recorder.providers, "
                                 "or start the recorder to record agents that use the global providers")
        return RunView(top[-1], self.spans)


def play(agent: Agent, task: str, history: Sequence[Message] | None = None, *, recorder: Recorder) -> Played:
    """``agent.run(task, history)``, and the spans it emitted as ``recorder`` kept them: the
    agent reports to it (built with ``**recorder.providers``, or on the global providers while
    ``recorder`` is started)."""
    seen = len(recorder.spans())
    return played(agent.run(task, history), recorder, seen)


async def aplay(agent: Agent, task: str, history: Sequence[Message] | None = None, *,
                recorder: Recorder) -> Played:
    """``play`` through ``agent.arun``: cases played side by side in one recorder each get their
    own spans (a run's trace is its own)."""
    seen = len(recorder.spans())
    return played(await agent.arun(task, history), recorder, seen)


def played(run: Run, recorder: Recorder, seen: int = 0) -> Played:
    """``run`` with the spans of its trace that ``recorder`` kept after the first ``seen``."""
    trace_id = run.trace_id
    spans = recorder.spans()[seen:] if trace_id is not None else []
    return Played(run=run, spans=tuple(s for s in spans if format_trace_id(s.context.trace_id) == trace_id))
