"""``Case``: one task of a dataset, and what to expect of it - or a recorded run made a case."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .._agent._loop import Agent
from .._core._records import Message
from .._core._tools import Registry
from .._core._checkpoint import Checkpoint
from .._core._decisions import Decision
from .._testing._replay import Replay, _repaused
from .._testing._stubs import stub_registry
from .._traces._recorded import Recording

__all__ = ["Case"]


@dataclass(frozen=True, kw_only=True)
class Case:
    """One task to run, and what to expect of it."""

    task: str
    """What the agent is asked."""
    name: str | None = None
    """How reports name the case (default: ``case-N``, its place in the dataset)."""
    expected_output: Any = None
    """What ``output_equals`` / ``output_contains`` compare with when not given their own."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Anything else (a tag, a difficulty) a grader or a report reader may use."""
    recording: Recording | None = None
    """The recorded run this case was made from (``from_recorded``): its history goes before the
    task, its tool results are served for the recorded arguments (``tools()``), and with no agent
    given, its model turns are played back too (``replay_agent()``)."""

    @classmethod
    def from_recorded(cls, recording: Recording, *, name: str | None = None, expected_output: Any = None) -> Case:
        """A recorded run as a case: its task, and its tool results to serve (``tools()``)."""
        return cls(task=recording.task, name=name or f"{recording.agent} {recording.trace_id}",
                   expected_output=expected_output, recording=recording,
                   metadata={"trace_id": recording.trace_id, "agent": recording.agent,
                             "stop_reason": recording.stop_reason})

    @property
    def history(self) -> list[Message]:
        """The messages before the task: the recorded run's, else none."""
        return list(self.recording.history) if self.recording is not None else []

    @property
    def resumes(self) -> bool:
        """Made from a run that resumed a pause: it has no task of its own (its conversation is all
        history), and playing it resumes that pause again with the recorded decisions (``resumption``)."""
        return self.recording is not None and self.recording.resumed is not None

    def resumption(self, agent: Agent) -> tuple[Checkpoint, dict[str, Decision]]:
        """For a case that ``resumes``: the recorded pause made again as ``agent``'s checkpoint, and
        the decisions the person gave, for ``agent.resume(*case.resumption(agent))``. The turns
        before the pause are the paused run's (another trace): only the resumed part is played."""
        if self.recording is None or self.recording.resumed is None:
            raise ValueError(f"case {self.name or self.task!r} does not resume a recorded pause")
        return _repaused(agent, self.recording)

    def tools(self) -> Registry:
        """Stub tools giving the recorded results for the recorded arguments; a call with other
        arguments is that call's ``error`` outcome (no recorded result), never a guess."""
        if self.recording is None:
            raise ValueError(f"case {self.name or self.task!r} was not made from a recorded run: it has no tools to serve")
        return stub_registry(self.recording)

    def replay_agent(self, **options: Any) -> Agent:
        """An agent that plays the recorded run again: its model turns, budget, system prompt and
        stub tools (``Replay.agent``); ``options`` go to ``Agent`` (``**recorder.providers``)."""
        if self.recording is None:
            raise ValueError(f"case {self.name or self.task!r} was not made from a recorded run: give an agent")
        return Replay(self.recording).agent(**options)
