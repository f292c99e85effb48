"""Experiments: every case of a dataset played ``repeat`` times through the testing toolkit's
``play`` / ``aplay`` (the run and the spans it emitted, kept by a ``Recorder``), each run graded
by every grader (``decide``: a raising grader is a failed grade), each grader run inside its
grade's span in the run's trace, and all of it gathered into a ``Report``.

``agent`` is an ``Agent``, or a factory called with each ``Case`` that makes a fresh one (for
per-case tools). ``max_cost`` bounds the whole experiment: once the runs' spend reaches it, no
new run starts and the report says how many were skipped (``Report.skipped``, ``cost_exhausted``).
An LLM judge's cost counts toward ``max_cost`` (it is the experiment's spend), though never
toward the graded run's own cost.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Protocol

from opentelemetry import metrics, trace

from .._agent._loop import Agent
from .._testing._played import Played, aplay, play, played
from .._testing._recorder import Recorder
from ._grade import GradedRun, decide
from ._report import CaseResult, GradeResult, Report, TrialResult
from ._telemetry import GradeTelemetry

from ._case import Case
from ._grade import Grader


class Dataset(Protocol):
    """What an experiment reads of a ``Dataset`` (``_dataset.py``, which calls this module)."""

    cases: list[Case]
    graders: list[Grader]
    name: str | None

    def case_names(self) -> list[str]: ...

__all__ = ["evaluate", "aevaluate", "grade_trial"]


def grade_trial(graders: list[Grader], graded: GradedRun, telemetry: GradeTelemetry) -> TrialResult:
    """``graded`` judged by every grader (each grade also reported in its trace): one trial.
    Live or recorded, a run is graded here, so the two give the same grades."""
    grades = []
    for g in graders:
        grade = telemetry.grade(g, graded, decide)
        usage = grade.usage
        grades.append(GradeResult(grader=g.name, passed=bool(grade.passed), score=grade.score, label=grade.label,
                                  explanation=grade.explanation, error=grade.error,
                                  input_tokens=usage.input_tokens if usage is not None else None,
                                  output_tokens=usage.output_tokens if usage is not None else None,
                                  cost=grade.cost))
    return TrialResult(trace_id=graded.trace_id, stop_reason=graded.stop_reason, grades=grades, steps=graded.steps,
                       tokens=graded.total_tokens, cost=graded.cost, latency=graded.duration)

AgentOrFactory = Any  # Agent | Callable[[Case], Agent]


def _play(agent: Agent, case: Case, recorder: Recorder) -> Played:
    """The case's task after its history, or for a case that resumes a recorded pause, that pause
    resumed with the recorded decisions."""
    if case.resumes:
        seen = len(recorder.spans())
        return played(agent.resume(*case.resumption(agent)), recorder, seen)
    return play(agent, case.task, case.history, recorder=recorder)


async def _aplay(agent: Agent, case: Case, recorder: Recorder) -> Played:
    if case.resumes:
        seen = len(recorder.spans())
        return played(await agent.aresume(*case.resumption(agent)), recorder, seen)
    return await aplay(agent, case.task, case.history, recorder=recorder)


class _Experiment:
    """One experiment's state: the recorder, where grades go, the spend so far."""

    def __init__(self, dataset: Dataset, agent: AgentOrFactory | None, *, repeat: int, concurrency: int,
                 max_cost: float | None, recorder: Recorder | None, tracer_provider: trace.TracerProvider | None,
                 meter_provider: metrics.MeterProvider | None,
                 on_trial: Callable[[TrialResult | None], None] | None = None) -> None:
        if repeat < 1 or concurrency < 1:
            raise ValueError(f"repeat ({repeat}) and concurrency ({concurrency}) are at least 1")
        if max_cost is not None and max_cost < 0:
            raise ValueError(f"max_cost ({max_cost}) is not negative")
        self.dataset, self.agent, self.repeat, self.concurrency, self.max_cost = dataset, agent, repeat, concurrency, max_cost
        self.owns_recorder = recorder is None
        self.recorder = recorder or Recorder()
        self.providers = (tracer_provider, meter_provider)
        self.on_trial = on_trial
        """Told of each trial as it ends (``None``: skipped by ``max_cost``): a progress bar."""
        self._telemetry: dict[int, GradeTelemetry] = {}
        self.spent = 0.0
        self.skipped = 0
        self.lock = threading.Lock()
        self.jobs = [(i, case) for i, case in enumerate(dataset.cases) for _ in range(repeat)]

    def __enter__(self) -> _Experiment:
        if self.owns_recorder:
            self.recorder.start()  # agents on the global providers are recorded while it runs
        return self

    def __exit__(self, *exc: object) -> None:
        if self.owns_recorder:
            self.recorder.stop()

    def agent_for(self, case: Case) -> Agent:
        if self.agent is None:  # a case made from a recorded run plays it again
            return case.replay_agent(**self.recorder.providers)
        agent = self.agent if isinstance(self.agent, Agent) else self.agent(case)
        if not isinstance(agent, Agent):
            raise TypeError(f"the agent factory returned {type(agent).__name__}, not an Agent")
        return agent

    def telemetry_for(self, agent: Agent) -> GradeTelemetry:
        """Grades go where the run's spans went: the providers given, else the agent's tracer
        provider (with the recorder's meter provider when it is the recorder's), else the global ones."""
        tracer_provider, meter_provider = self.providers
        if tracer_provider is None:
            tracer_provider = getattr(getattr(agent, "_telemetry", None), "tracer_provider", None)
            if meter_provider is None and tracer_provider is self.recorder.tracer_provider:
                meter_provider = self.recorder.meter_provider
        # the grade's log event goes where the recorder's spans go, else to the global LoggerProvider
        logger_provider = self.recorder.logger_provider if tracer_provider is self.recorder.tracer_provider else None
        key = id(tracer_provider)
        with self.lock:
            if key not in self._telemetry:
                self._telemetry[key] = GradeTelemetry(tracer_provider, meter_provider, logger_provider)
            return self._telemetry[key]

    def may_start(self) -> bool:
        with self.lock:
            if self.max_cost is not None and self.spent >= self.max_cost:
                self.skipped += 1
                return False
            return True

    def grade(self, case: Case, agent: Agent, played: Played) -> TrialResult:
        with self.lock:
            self.spent += played.run.cost or 0.0
        try:
            view = played.view
        except AssertionError as exc:  # the agent reports to providers this experiment does not record
            return TrialResult(trace_id=played.run.trace_id, stop_reason=played.run.stop.value, grades=[],
                               error=f"RunNotRecorded: {exc}")
        trial = grade_trial(self.dataset.graders, GradedRun(view, run=played.run, case=case), self.telemetry_for(agent))
        with self.lock:  # a judge's spend is the experiment's (max_cost), never the run's (trial.cost)
            self.spent += trial.judge_cost or 0.0
        return trial

    @staticmethod
    def failed(exc: Exception) -> TrialResult:
        return TrialResult(trace_id=None, stop_reason=None, grades=[], error=f"{type(exc).__name__}: {exc}")

    def done(self, trial: TrialResult | None) -> TrialResult | None:
        if self.on_trial is not None:
            self.on_trial(trial)
        return trial

    def run_one(self, case: Case) -> TrialResult | None:
        return self.done(self._run_one(case))

    def _run_one(self, case: Case) -> TrialResult | None:
        if not self.may_start():
            return None
        try:
            agent = self.agent_for(case)
            return self.grade(case, agent, _play(agent, case, self.recorder))
        except Exception as exc:  # the agent (or its factory) raised: that trial failed, the rest go on
            return self.failed(exc)

    async def arun_one(self, case: Case, gate: asyncio.Semaphore) -> TrialResult | None:
        return self.done(await self._arun_one(case, gate))

    async def _arun_one(self, case: Case, gate: asyncio.Semaphore) -> TrialResult | None:
        async with gate:
            if not self.may_start():
                return None
            try:
                agent = self.agent_for(case)
                played = await _aplay(agent, case, self.recorder)
                # graded in a worker thread (the context goes with it): an LLM judge's model call
                # waits there, never holding the event loop the other runs go on in
                return await asyncio.to_thread(self.grade, case, agent, played)
            except Exception as exc:
                return self.failed(exc)

    def report(self, results: list[TrialResult | None]) -> Report:
        names = self.dataset.case_names()
        trials: dict[int, list[TrialResult]] = {i: [] for i in range(len(self.dataset.cases))}
        for (i, _), result in zip(self.jobs, results):
            if result is not None:
                trials[i].append(result)
        cases = [CaseResult(name=names[i], task=case.task, trials=trials[i]) for i, case in enumerate(self.dataset.cases)]
        return Report(cases=cases, graders=[g.name for g in self.dataset.graders], repeat=self.repeat,
                      dataset=self.dataset.name, skipped=self.skipped, cost_exhausted=self.skipped > 0)


def evaluate(dataset: Dataset, agent: AgentOrFactory | None = None, *, repeat: int = 1, concurrency: int = 1,
             max_cost: float | None = None, recorder: Recorder | None = None,
             tracer_provider: trace.TracerProvider | None = None,
             meter_provider: metrics.MeterProvider | None = None,
             on_trial: Callable[[TrialResult | None], None] | None = None) -> Report:
    """Play each case ``repeat`` times (``concurrency`` runs at a time, each in a thread of its
    own) and grade every run (``agent`` ``None``: each case made from a recorded run plays it
    again, ``Case.replay_agent``); never raises for a run or a grader (their failures are failed trials
    and grades). ``recorder``: the one the agent reports to (``Agent(**recorder.providers)``);
    by default a fresh one records the global providers while the experiment runs. ``on_trial``
    is told of each trial as it ends, in the thread that ran it (``None``: skipped by ``max_cost``)."""
    experiment = _Experiment(dataset, agent, repeat=repeat, concurrency=concurrency, max_cost=max_cost,
                             recorder=recorder, tracer_provider=tracer_provider, meter_provider=meter_provider,
                             on_trial=on_trial)
    with experiment:
        if concurrency == 1:
            results = [experiment.run_one(case) for _, case in experiment.jobs]
        else:
            # each run in the caller's context (its current span, its baggage), as with concurrency 1
            contexts = [contextvars.copy_context() for _ in experiment.jobs]
            with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="tracedagent-eval") as pool:
                results = list(pool.map(lambda context, case: context.run(experiment.run_one, case), contexts,
                                        [case for _, case in experiment.jobs]))
    return experiment.report(results)


async def aevaluate(dataset: Dataset, agent: AgentOrFactory | None = None, *, repeat: int = 1, concurrency: int = 1,
                    max_cost: float | None = None, recorder: Recorder | None = None,
                    tracer_provider: trace.TracerProvider | None = None,
                    meter_provider: metrics.MeterProvider | None = None,
                    on_trial: Callable[[TrialResult | None], None] | None = None) -> Report:
    """``evaluate`` through ``Agent.arun``: ``concurrency`` runs at a time on this event loop."""
    experiment = _Experiment(dataset, agent, repeat=repeat, concurrency=concurrency, max_cost=max_cost,
                             recorder=recorder, tracer_provider=tracer_provider, meter_provider=meter_provider,
                             on_trial=on_trial)
    gate = asyncio.Semaphore(concurrency)
    with experiment:
        results = await asyncio.gather(*(experiment.arun_one(case, gate) for _, case in experiment.jobs))
    return experiment.report(list(results))

