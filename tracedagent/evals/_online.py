"""Online grading: an agent's live runs graded as they end, off the runs' own time.

``Agent(graders=OnlineGrading([...]))`` makes this the agent's ``RunEnded``: the run span's
observer (``_instrumentation/_observer.RunScope``, the one place every driver's run ends: run,
arun, stream, astream, resume, aresume) tells it of each run that returned, after the run span
has ended. On the run's thread it only decides which graders grade this run (each grader's
``sample``, drawn from one random source you may seed) and puts the run on a bounded queue;
a daemon thread grades it (``grade_trial``, as ``evaluate`` does: a raising grader is a failed
grade) and reports each grade as ``evaluate`` reports it (an ``evaluate {grader}`` span under
the run's span, in its trace, with the ``gen_ai.evaluation.result`` event, and the metrics).
A full queue drops the run's grading, counted (``counts.dropped``, the
``tracedagent.evaluation.dropped`` metric) and logged once: grading never makes a run wait.
A forked child starts with an empty queue: the parent's queued runs are graded once, by the parent.

Online, a run's spans have been exported: the graded view is built from the ``Run`` and its
ended run span (``LiveRunView``), and a grader asking for the spans under it gets
``SpansNotKept``. Every built-in grader works online (they read the run span's facts and the
``Run``); a run whose span is not recorded (no SDK, or the sampler left it out) is not graded.
A Temporal workflow's runs are not graded online (a workflow does no I/O): grade their traces.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import random
import threading
import weakref
from dataclasses import dataclass, replace
from typing import Any, Iterable

from opentelemetry import _logs, metrics, trace
from opentelemetry.sdk.trace import ReadableSpan

from .._core import _names as N
from .._core._run import Run
from .._testing._views import RunView
from .._version import __version__
from ._experiment import grade_trial
from ._grade import GradedRun, Grader, SpansNotKept, as_grader
from ._telemetry import GradeTelemetry

__all__ = ["OnlineGrading", "OnlineCounts", "LiveRunView", "sampled"]

_log = logging.getLogger(__name__)

AT_EXIT_TIMEOUT = 5.0
"""Seconds the interpreter's exit waits for pending grades (each ``OnlineGrading``)."""


def sampled(g: Any, rate: float) -> Grader:
    """``g`` grading online only a share ``rate`` of runs (``sampled(llm_judge(...), 0.1)``); an
    evaluation still grades every run with it."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"a sample rate is in [0, 1], not {rate!r}")
    return replace(as_grader(g), sample=float(rate))


class LiveRunView(RunView):
    """A run graded online: the facts of its ended run span (what ``evaluate`` reads too) and
    its ``Run``; the spans under the run span were exported and are not here."""

    def __init__(self, span: ReadableSpan, run: Run) -> None:
        self.span = span
        self.run = run

    def _gone(self, *args: Any, **kwargs: Any) -> Any:
        raise SpansNotKept("a run graded online keeps only its run span: the spans under it were exported "
                           "(grade them with evaluate() or from the trace: grade_recorded)")

    spans = children = _gone  # type: ignore[assignment]
    tree = _gone  # type: ignore[assignment]
    descendants = step_spans = chat_spans = tool_spans = sub_runs = property(_gone)  # type: ignore[assignment]

    @property
    def tool_outcomes(self) -> list[tuple[str, str]]:
        """``(tool, outcome)`` per dispatched call, from the ``Run``'s results (what its tool spans say)."""
        return [(r.name, r.outcome.value) for step in self.run.steps for r in step.tool_results]


class LiveGradedRun(GradedRun):
    """A ``GradedRun`` of a live run without a case: its task is read from the ``Run``."""

    @property
    def task(self) -> str:
        """The last user message before the run's own first model turn (after any history)."""
        messages, run = self.run.messages, self.run
        assistant = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        own = sum(1 for step in run.steps if not step.resumed)
        before = assistant[len(assistant) - own] if 0 < own <= len(assistant) else len(messages)
        for message in reversed(messages[:before]):
            if message.get("role") == "user":
                return str(message.get("content"))
        raise LookupError("the run has no user message")


@dataclass(kw_only=True)
class OnlineCounts:
    """What online grading did so far (a snapshot: ``OnlineGrading.counts``)."""

    graded: int = 0
    """Grades made (a failed or raising grader's grade included)."""
    unsampled: int = 0
    """Grades not made because the grader's sample left the run out (not failures)."""
    dropped: int = 0
    """Runs whose grading the full queue dropped."""
    unrecorded: int = 0
    """Runs not graded because their span was not recorded (no SDK, or sampled out)."""


class OnlineGrading:
    """The graders an agent grades its live runs with, and the thread that grades them.

    ``graders``: ``Grader`` objects or plain callables (``sampled(g, rate)`` for a share of
    runs). ``max_pending``: runs waiting to be graded before more are dropped. ``rng``: the
    random source sampling draws from (seed it for tests). ``tracer_provider`` /
    ``meter_provider`` / ``logger_provider``: where grades go (default: the global ones, as
    ``configure()`` sets), the last for the grades' ``gen_ai.evaluation.result`` log records.
    """

    def __init__(self, graders: Iterable[Any], *, max_pending: int = 1000, rng: random.Random | None = None,
                 tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: metrics.MeterProvider | None = None,
                 logger_provider: _logs.LoggerProvider | None = None) -> None:
        self.graders = [as_grader(g) for g in graders]
        for g in self.graders:
            if not 0.0 <= g.sample <= 1.0:
                raise ValueError(f"grader {g.name}'s sample rate is in [0, 1], not {g.sample!r}")
        if max_pending < 1:
            raise ValueError(f"max_pending is at least 1, not {max_pending}")
        self._draw = (rng or random.Random()).random
        self._queue: queue.Queue[tuple[Run, ReadableSpan, list[Grader]] | None] = queue.Queue(max_pending)
        self._providers = (tracer_provider, meter_provider, logger_provider)
        self._telemetry: GradeTelemetry | None = None  # made by the worker, on its first run
        self._dropped = metrics.get_meter(N.TRACER_NAME, __version__, meter_provider).create_counter(
            N.METRIC_EVALUATION_DROPPED, unit="{run}", description="Runs whose online grading was dropped: its queue was full.")
        self._counts = OnlineCounts()
        self._pending = 0
        self._idle = threading.Condition()
        self._worker: threading.Thread | None = None
        atexit.register(_flush_at_exit, weakref.ref(self))
        _LIVE.add(self)  # a forked child resets it (_after_fork)

    def _after_fork(self) -> None:
        """In a forked child: the parent's queued runs are the parent's to grade (graded here too
        they would be graded twice), and its locks may have been held by a thread the child lacks."""
        self._queue = queue.Queue(self._queue.maxsize)
        self._idle = threading.Condition()
        self._pending = 0
        self._worker = None

    @property
    def counts(self) -> OnlineCounts:
        with self._idle:
            return replace(self._counts)

    # --- on the run's thread: choose, queue, return ----------------------------------------
    def run_ended(self, run: Run, span: trace.Span) -> None:
        """The ``RunEnded`` seam: called after ``run``'s span ended; returns at once."""
        if not isinstance(span, ReadableSpan) or span.end_time is None:
            with self._idle:
                self._counts.unrecorded += 1
            return
        chosen = [g for g in self.graders if g.sample >= 1.0 or self._draw() < g.sample]
        with self._idle:
            self._counts.unsampled += len(self.graders) - len(chosen)
            if not chosen:
                return
            try:
                self._queue.put_nowait((run, span, chosen))
            except queue.Full:
                self._drop(span)
                return
            self._pending += 1
            if self._worker is None or not self._worker.is_alive():  # the first run, or a forked process
                self._worker = threading.Thread(target=self._work, name="tracedagent-online-grading", daemon=True)
                self._worker.start()

    def _drop(self, span: ReadableSpan) -> None:
        """The queue is full: the run is not graded, counted and logged (the first time), never waited for."""
        if not self._counts.dropped:
            _log.warning("tracedagent: online grading's queue is full (%d runs): runs are dropped ungraded "
                         "(counted in tracedagent.evaluation.dropped)", self._queue.maxsize)
        self._counts.dropped += 1
        try:
            self._dropped.add(1, {N.GEN_AI_AGENT_NAME: str((span.attributes or {}).get(N.GEN_AI_AGENT_NAME, ""))})
        except Exception:  # noqa: BLE001 - telemetry never fails a run
            _log.debug("could not count a dropped grading", exc_info=True)

    # --- on the worker: grade --------------------------------------------------------------
    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            run, span, chosen = item
            try:
                if self._telemetry is None:
                    self._telemetry = GradeTelemetry(*self._providers)
                grade_trial(chosen, LiveGradedRun(LiveRunView(span, run), run=run), self._telemetry)
            except Exception:  # noqa: BLE001 - grade_trial makes a raising grader a failed grade; this is a bug
                _log.warning("tracedagent: online grading of trace %s failed", run.trace_id, exc_info=True)
            finally:
                with self._idle:
                    self._counts.graded += len(chosen)
                    self._pending -= 1
                    self._idle.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued run is graded (at most ``timeout`` seconds); whether they were."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Grade what is queued (``flush``), then stop the thread; a later run starts a new one.
        ``False`` when the queue was not graded in time: a queue still full (a grader that never
        returns) keeps its thread, never blocks ``close`` past ``timeout``."""
        flushed = self.flush(timeout)
        with self._idle:
            worker, self._worker = self._worker, None
        if worker is not None:  # it ends after what is queued (outside the lock: the worker takes it to go on)
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                with self._idle:
                    self._worker = self._worker or worker
                return False
        return flushed

    def __repr__(self) -> str:
        return f"<OnlineGrading graders={[g.name for g in self.graders]} {self.counts}>"


_LIVE: weakref.WeakSet[OnlineGrading] = weakref.WeakSet()
"""Every ``OnlineGrading`` alive: one fork hook for them all (a hook cannot be unregistered)."""


def _forked() -> None:
    for grading in list(_LIVE):
        grading._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _flush_at_exit(ref: weakref.ref[OnlineGrading]) -> None:
    """At the interpreter's exit, pending grades get ``AT_EXIT_TIMEOUT`` seconds to be made."""
    grading = ref()
    if grading is not None:
        grading.flush(AT_EXIT_TIMEOUT)
