"""Running ``tracedagent demo``'s scenarios (``_scenarios.py``): each as an ``Agent`` whose
``FakeModel`` plays the scenario's script; model calls and tools sleep a little so that the
timings in a trace waterfall look like a real agent's.

The rest of the module records what the runs emit: ``Recording`` is an SDK span processor
that hands on each trace as soon as its root span ends, writes it to the OTLP/JSON file
and keeps what the terminal shows - decoded back from that same JSON, so what you see is
what the file holds.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import functools
import os
import secrets
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, as_completed, wait
from typing import Any, Callable, Iterable

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from .._agent._loop import Agent
from .._core import _names as N
from .._traces._otlp_json import OtlpJsonWriter, decode, encode
from ._render import StopTally
from .._traces._trace import Trace
from .._core._run import Run
from ._scenarios import SCENARIOS, SYSTEM_PROMPT, Scenario
from .._testing._fake import FakeModel, ScriptItem
from .._core._tools import Tool
from .._typed._tools import Registry, tool

__all__ = ["Scenario", "SCENARIOS", "build_agent", "run_scenario", "run_plan", "Recording"]


# --- building and running ------------------------------------------------------------

_DEMO_KEY = secrets.token_urlsafe(32)
"""What the demo's agents sign their checkpoints with when ``TRACEDAGENT_CHECKPOINT_KEY`` is not
set: a key of this process's own, as an application has one (the demo resumes the checkpoint's text)."""

MIN_DEADLINE_PACE = 0.1
"""The slowest a scenario with a time budget is sped up to: flat out (pace 0) its deadline
would be 0 s, and the run would stop before showing the deadline cut a call off."""


def build_agent(scenario: Scenario, *, pace: float = 1.0, price_in: float | None = None,
                price_out: float | None = None, tracer_provider: trace.TracerProvider | None = None,
                meter_provider: metrics.MeterProvider | None = None, capture_content: bool | None = None) -> Agent:
    """A fresh agent for one run of ``scenario`` (a ``FakeModel`` plays its script once).

    ``pace`` multiplies the simulated latencies (0 runs flat out). ``price_in``/``price_out``
    price a scenario that states no prices of its own. ``capture_content`` is the ``Agent``'s
    (``None``: the environment decides).
    """
    budget = scenario.budget
    if (price_in or price_out) and not (budget.price_per_1k_input or budget.price_per_1k_output):
        budget = dataclasses.replace(budget, price_per_1k_input=price_in or 0.0, price_per_1k_output=price_out or 0.0)
    if budget.max_seconds is not None:  # the deadline keeps its place among the paced latencies
        pace = max(pace, MIN_DEADLINE_PACE)
        budget = dataclasses.replace(budget, max_seconds=budget.max_seconds * pace)
    # A streamed call's text comes in chunks of 8 characters, 10 ms apart (at pace 1).
    model = FakeModel([_fresh(item) for item in scenario.script], latency=scenario.model_latency * pace,
                      chunk_size=8, chunk_delay=0.01 * pace)
    tools = [_slowed(tool(fn), scenario.tool_latency * pace) for fn in scenario.tools]
    tools += [build_agent(sub, pace=pace, price_in=price_in, price_out=price_out, tracer_provider=tracer_provider,
                          meter_provider=meter_provider, capture_content=capture_content).as_tool(description=sub.story)
              for sub in scenario.sub_agents]
    return Agent(model, Registry(tools, policy=scenario.policy), budget=budget, system_prompt=SYSTEM_PROMPT,
                 name=scenario.name, description=scenario.story, tracer_provider=tracer_provider,
                 checkpoint_key=None if os.environ.get(N.ENV_CHECKPOINT_KEY) else _DEMO_KEY,
                 meter_provider=meter_provider,
                 capture_content=capture_content, output_type=scenario.output_type)


def run_scenario(agent: Agent, scenario: Scenario, on_text: Callable[[str], None] | None = None) -> Run:
    """One run of ``scenario`` with the driver it demonstrates. A run that paused for approval is
    resumed with the scenario's decisions (a trace of its own, linked to the paused run's);
    the paused run is returned, as it is the scenario's. A streamed run hands each chunk of its
    text to ``on_text`` as it arrives."""
    if scenario.driver == "arun":
        run = asyncio.run(agent.arun(scenario.task, scenario.history))
        if scenario.decisions and run.paused is not None:
            asyncio.run(agent.aresume(run.checkpoint(), scenario.decisions))
        return run
    if scenario.driver == "stream":
        with agent.stream(scenario.task, scenario.history) as stream:
            for event in stream:
                if event.type == "text_delta":
                    if on_text is not None:
                        on_text(event.text)
                    if scenario.reader_leaves:
                        break  # leaving the block closes the stream: the run ends cancelled
        return stream.run
    run = agent.run(scenario.task, scenario.history)
    if scenario.decisions and run.paused is not None:
        agent.resume(run.checkpoint(), scenario.decisions)
    return run


def _fresh(item: ScriptItem) -> ScriptItem:
    """A new exception per run: raising one instance again and again would grow its traceback."""
    return copy.copy(item) if isinstance(item, BaseException) else item


def _slowed(t: Tool, seconds: float) -> Tool:
    """The tool, taking ``seconds`` as a real one would: awaiting, so that ``arun`` can cancel it."""
    if seconds <= 0:
        return t

    @functools.wraps(t.fn)
    async def slow(**arguments: Any) -> Any:
        await asyncio.sleep(seconds)
        return t.fn(**arguments)

    return dataclasses.replace(t, fn=slow)


def run_plan(plan: Iterable[Scenario], *, concurrency: int, make_agent: Callable[[Scenario], Agent],
             on_finished: Callable[[int, Run], None] = lambda index, run: None,
             on_text: Callable[[Scenario, str], None] | None = None) -> int:
    """Run each scenario of ``plan`` once, ``concurrency`` at a time, handing each ``Run`` to
    ``on_finished(index, run)`` as it ends (in the thread that ran it), and each chunk of a
    streamed run's text to ``on_text(scenario, chunk)``; returns how many ran.

    Nothing here keeps a ``Run``, and at most ``2 * concurrency`` runs wait in the queue, so a
    load of 20,000 runs takes no more memory than one of 20. Threads suffice: the runs wait
    on (simulated) I/O, and agents share nothing.
    """

    def one(index: int, scenario: Scenario) -> None:
        text = None if on_text is None else functools.partial(on_text, scenario)
        on_finished(index, run_scenario(make_agent(scenario), scenario, text))

    count = 0
    if concurrency <= 1:
        for count, scenario in enumerate(plan, 1):
            one(count - 1, scenario)
        return count
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="tracedagent-demo")
    pending: set[Future[None]] = set()
    try:
        for count, scenario in enumerate(plan, 1):
            if len(pending) >= 2 * concurrency:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    future.result()  # a failure in a run's thread is raised here
            # Each run in the context of the caller (a raw submit would start from an empty one).
            pending.add(pool.submit(contextvars.copy_context().run, one, count - 1, scenario))
        for future in as_completed(pending):
            future.result()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
    return count


# --- recording what the runs emit ----------------------------------------------------

class Recording(SpanProcessor):
    """Collects each trace whole, writes it to the OTLP/JSON file, keeps what to print.

    Add it to an SDK ``TracerProvider``: when a root span ends (a run's ``invoke_agent``
    span, as nothing wraps the demo's runs) its trace is complete, so it is encoded once,
    written, and decoded back into the ``Trace`` the terminal renders. ``keep_trees=False``
    keeps only the tally of stop reasons, so a long load-generating demo runs in constant
    memory.
    """

    def __init__(self, writer: OtlpJsonWriter, *, keep_trees: bool = True) -> None:
        self.writer = writer
        self.keep_trees = keep_trees
        self.trees: dict[str, Trace] = {}
        """Traces by trace id (when ``keep_trees``)."""
        self.tally = StopTally()
        """Every run's stop reason and agent, counted."""
        self.error: Exception | None = None
        """The first failure to write or read back a trace (the file then lacks it)."""
        self._open: dict[int, list[ReadableSpan]] = {}
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            spans = self._open.setdefault(span.context.trace_id, [])
            spans.append(span)
            # A span under a remote parent is written alone: a resume's ``tracedagent.resume``
            # span, added to the paused run's trace after that trace was written.
            if span.parent is not None and not span.parent.is_remote:
                return
            del self._open[span.context.trace_id]
        try:
            document = encode(spans)
            self.writer.write(document)
            finished = Trace(decode(document, source="the demo's spans"))
        except Exception as exc:  # reported by the CLI once the runs are over
            self.error = self.error or exc
            return
        with self._lock:
            for run in finished.runs():
                self.tally.add(run)
            if self.keep_trees:  # a late span joins its trace's tree, as `tracedagent show` reads the file
                earlier = self.trees.get(finished.trace_id) if span.parent is not None else None
                self.trees[finished.trace_id] = finished if earlier is None else Trace([*earlier.spans, *finished.spans])

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
