"""Side by side: what tracing costs in tracedagent and in three other agent libraries.

The same task in each library: a run of 10 steps, one tool call a step (nine calls of a
`lookup` tool, then the answer), driven by each library's own scripted model with no latency:

  tracedagent    tracedagent.testing.FakeModel
  pydantic-ai    pydantic_ai.models.function.FunctionModel, traced by its own OTel instrumentation
  openai-agents  a fake agents.Model, traced by its own tracing, bridged to OTel by
                 openinference-instrumentation-openai-agents
  smolagents     a scripted smolagents.Model, traced by openinference-instrumentation-smolagents

Every library traces into the same SDK setup, the one users get: a TracerProvider with a
default BatchSpanProcessor, exporting from its own thread to an exporter that discards what
it is given and counts it. The figures are refused if a single span was dropped. Metrics are
off everywhere: this compares spans.

It prints, in sections:

  1. µs per step untraced, traced, and traced with content capture on, and each peer's
     ratio to tracedagent: the median of the per-turn ratios with their middle half.
     The measures take turns (as in overhead.py) because a shared machine's speed drifts
     within a second; each turn is about --turn seconds of runs, never more spans than the
     SDK's default queue holds, and the queue is drained between turns.
  2. Spans and attribute bytes per run (as the OTLP exporter encodes them), content capture
     off and on. Each library is asked to leave content out its own way; what it still
     records is what it records.
  3. Growth: µs and OTLP bytes per step at 1, 10, 100 and 1,000 steps, untraced and traced.
     A library stops growing when its next size would cost more than --growth-budget
     seconds; the script says so.
  4. Export throughput to the real collector (OTLP/gRPC, `tracedagent.configure()` with its
     defaults): runs/s and spans/s delivered with nothing dropped, at paced loads, then
     unpaced from 1, 2 and 4 threads, up to the first load at which spans were lost. Skipped,
     with the reason, when no collector answers.

It draws µs per step against steps for every library into --plot (docs/peers.png).

Run: pip install -e . --group bench && python benchmarks/peers.py   (3-4 minutes; --quick: a tiny run, for the smoke test)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import logging
import os
import platform
import socket
import statistics
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Callable, Iterator
from urllib.parse import urlsplit

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

import tracedagent
from tracedagent import Agent, Budget, Completion, Registry, ToolCall, Usage
from tracedagent.testing import FakeModel

try:  # the bench extra: the library itself never needs these
    import agents as openai_agents
    import matplotlib
    import pydantic_ai
    import smolagents
    from agents.tracing import generation_span
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
    from openinference.instrumentation import TraceConfig
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.usage import RequestUsage, UsageLimits
    from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole
    from smolagents.monitoring import LogLevel, TokenUsage
except ImportError as missing:
    sys.exit(f"benchmarks/peers.py needs the bench group: pip install -e . --group bench (pip 25.1+) ({missing})")

STEPS = 10
GROWTH_STEPS = (1, 10, 100, 1000)
DEFAULT_QUEUE_SIZE = 2048  # BatchSpanProcessor's max_queue_size unless configured
PROMPT, ANSWER, MODEL = "go", "done", "fake-model"
NO_METRICS = NoOpMeterProvider()
LOOP = asyncio.new_event_loop()  # the async libraries' runs, all on one loop, as a server would


def lookup(q: str) -> str:
    """Look something up.

    Args:
        q: What to look up.
    """
    return "42"


async def lookup_async(q: str) -> str:
    """Look something up.

    Args:
        q: What to look up.
    """
    return lookup(q)  # the async libraries get async tools: they run a sync one in a worker thread


# --- the scripts: turn i of a run of `steps` calls lookup(q=f"q{i}"), the last turn answers ---

class Script:
    """Which turn comes next, for models that are called again for every run: the runs of a
    turn share one model, and ``calls`` lets the caller check that every run took every step."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.calls = 0

    def next_turn(self) -> int:
        """The index of this call's turn within its run."""
        self.calls += 1
        return (self.calls - 1) % self.steps

    def answers(self, turn: int) -> bool:
        return turn == self.steps - 1


def checked(library: str, ok: bool) -> None:
    if not ok:
        raise SystemExit(f"{library}: a run did not do the scripted task; its figures would mean nothing")


# --- each library: build(steps, tracer provider or None, content) -> measure(runs) -> seconds ---

Measure = Callable[[int], float]


class Replay:
    """A tracedagent ``Model`` that replays a script and records nothing. FakeModel keeps a copy
    of the conversation from every call (tests read them), so its calls grow with the run; the
    growth section measures tracedagent with this model too, to tell the loop from its test double."""

    provider_name = "fake"

    def __init__(self, script: list[Completion], model_name: str) -> None:
        self.script, self.model_name, self.calls = script, model_name, 0

    def complete(self, messages, tools=None, max_output_tokens=None, temperature=None) -> Completion:
        self.calls += 1
        return self.script[self.calls - 1]


def tracedagent_build(steps: int, provider: TracerProvider | None, content: bool, model=FakeModel) -> Measure:
    usage = Usage(input_tokens=100, output_tokens=10)  # given, so FakeModel does not estimate tokens
    script: list = [Completion(tool_calls=[ToolCall(f"c{i}", "lookup", {"q": f"q{i}"})], usage=usage,
                               finish_reason="tool_calls") for i in range(steps - 1)]
    script.append(Completion(text=ANSWER, usage=usage, finish_reason="stop"))
    registry = Registry([tracedagent.tool(lookup)])
    budget = Budget(max_steps=steps)
    tracer_provider = provider or NoOpTracerProvider()

    def measure(runs: int) -> float:
        agents = [Agent(model(script, model_name=MODEL), registry, budget=budget, capture_content=content,
                        tracer_provider=tracer_provider, meter_provider=NO_METRICS) for _ in range(runs)]
        started = time.perf_counter()
        done = [agent.run(PROMPT) for agent in agents]
        elapsed = time.perf_counter() - started
        checked("tracedagent", all(run.ok and run.step_count == steps and run.output == ANSWER for run in done))
        return elapsed

    return measure


def pydantic_ai_build(steps: int, provider: TracerProvider | None, content: bool) -> Measure:
    script = Script(steps)

    async def respond(messages, info) -> ModelResponse:
        turn = script.next_turn()
        parts = ([TextPart(ANSWER)] if script.answers(turn)
                 else [ToolCallPart("lookup", {"q": f"q{turn}"}, tool_call_id=f"c{turn}")])
        return ModelResponse(parts=parts, usage=RequestUsage(input_tokens=100, output_tokens=10))

    agent = pydantic_ai.Agent(FunctionModel(respond, model_name=MODEL), name="agent",
                              tools=[pydantic_ai.Tool(lookup_async, name="lookup")])
    agent.instrument = (InstrumentationSettings(tracer_provider=provider, meter_provider=NO_METRICS,
                                                include_content=content) if provider else False)
    limits = UsageLimits(request_limit=None)  # its default stops a run at 50 requests

    async def timed(runs: int) -> float:
        started = time.perf_counter()
        for _ in range(runs):
            result = await agent.run(PROMPT, usage_limits=limits)
        elapsed = time.perf_counter() - started
        checked("pydantic-ai", result.output == ANSWER)
        return elapsed

    return counted("pydantic-ai", script, lambda runs: LOOP.run_until_complete(timed(runs)))


class ScriptedAgentsModel(openai_agents.Model):
    """openai-agents' fake Model. It opens a generation span as the SDK's own models do (with
    the conversation and the reply when the run includes sensitive data): openai-agents
    leaves the model call's span to the Model."""

    def __init__(self, script: Script) -> None:
        self.script = script

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
        turn = self.script.next_turn()
        with generation_span(model=MODEL, disabled=tracing.is_disabled()) as span:
            if self.script.answers(turn):
                output = [ResponseOutputMessage(id=f"m{turn}", type="message", role="assistant", status="completed",
                                                content=[ResponseOutputText(type="output_text", text=ANSWER,
                                                                            annotations=[])])]
            else:
                output = [ResponseFunctionToolCall(type="function_call", id=f"f{turn}", call_id=f"c{turn}",
                                                   name="lookup", arguments=f'{{"q": "q{turn}"}}')]
            if tracing.include_data():
                span.span_data.input = input if isinstance(input, list) else [{"role": "user", "content": input}]
                span.span_data.output = [item.model_dump() for item in output]
            span.span_data.usage = {"input_tokens": 100, "output_tokens": 10}
        usage = openai_agents.Usage(requests=1, input_tokens=100, output_tokens=10, total_tokens=110)
        return openai_agents.ModelResponse(output=output, usage=usage, response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the benchmark does not stream")


def openai_agents_build(steps: int, provider: TracerProvider | None, content: bool) -> Measure:
    script = Script(steps)
    agent = openai_agents.Agent(name="agent", model=ScriptedAgentsModel(script),
                                tools=[openai_agents.function_tool(lookup_async, name_override="lookup")])
    config = openai_agents.RunConfig(tracing_disabled=provider is None, trace_include_sensitive_data=content,
                                     workflow_name="agent")

    async def timed(runs: int) -> float:
        started = time.perf_counter()
        for _ in range(runs):
            result = await openai_agents.Runner.run(agent, PROMPT, max_turns=steps, run_config=config)
        elapsed = time.perf_counter() - started
        checked("openai-agents", result.final_output == ANSWER)
        return elapsed

    def measure(runs: int) -> float:
        with instrumented(OpenAIAgentsInstrumentor(), provider, content):
            return LOOP.run_until_complete(timed(runs))

    return counted("openai-agents", script, measure)


class ScriptedSmolModel(smolagents.Model):
    """A scripted smolagents model: every turn is a tool call, the answer a call of its
    final_answer tool, as smolagents' ToolCallingAgent expects."""

    def __init__(self, script: Script) -> None:
        super().__init__(model_id=MODEL)
        self.script = script

    def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs):
        turn = self.script.next_turn()
        name, arguments = ("final_answer", {"answer": ANSWER}) if self.script.answers(turn) else \
            ("lookup", {"q": f"q{turn}"})
        call = ChatMessageToolCall(id=f"c{turn}", type="function",
                                   function=ChatMessageToolCallFunction(name=name, arguments=arguments))
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call],
                           token_usage=TokenUsage(input_tokens=100, output_tokens=10))


# OpenInference wraps `generate` of the model classes smolagents exports; a model class of
# one's own gets LLM spans only once it is among them.
smolagents.ScriptedSmolModel = ScriptedSmolModel


def smolagents_build(steps: int, provider: TracerProvider | None, content: bool) -> Measure:
    script = Script(steps)
    agent = smolagents.ToolCallingAgent(tools=[smolagents.tool(lookup)], model=ScriptedSmolModel(script),
                                        max_steps=steps, verbosity_level=LogLevel.OFF)

    def measure(runs: int) -> float:
        with instrumented(SmolagentsInstrumentor(), provider, content):
            started = time.perf_counter()
            for _ in range(runs):
                output = agent.run(PROMPT)
            elapsed = time.perf_counter() - started
        checked("smolagents", output == ANSWER)
        return elapsed

    return counted("smolagents", script, measure)


@contextmanager
def instrumented(instrumentor, provider: TracerProvider | None, content: bool) -> Iterator[None]:
    """An OpenInference instrumentor switched on for one turn (outside its timed part) when
    there is a provider: it patches the library's classes, which untraced turns must not see."""
    if provider is None:
        yield
        return
    instrumentor.instrument(tracer_provider=provider, config=TraceConfig(hide_inputs=not content,
                                                                           hide_outputs=not content))
    try:
        yield
    finally:
        instrumentor.uninstrument()


def counted(library: str, script: Script, measure: Measure) -> Measure:
    """``measure``, refusing a turn in which some run did not take every step of the script."""

    def wrapped(runs: int) -> float:
        before = script.calls
        elapsed = measure(runs)
        checked(library, script.calls - before == runs * script.steps)
        return elapsed

    return wrapped


@dataclass(frozen=True)
class Library:
    name: str
    build: Callable[[int, TracerProvider | None, bool], Measure]
    packages: tuple[str, ...]
    """Distributions whose versions the figures are for."""
    content_by_default: bool
    """Whether it records prompts, arguments and results unless told not to."""


LIBRARIES = (
    Library("tracedagent", tracedagent_build, ("tracedagent",), False),
    Library("pydantic-ai", pydantic_ai_build, ("pydantic-ai-slim",), True),
    Library("openai-agents", openai_agents_build,
            ("openai-agents", "openinference-instrumentation-openai-agents"), True),
    Library("smolagents", smolagents_build, ("smolagents", "openinference-instrumentation-smolagents"), True),
)
# Growth only: tracedagent with a model that records nothing (see Replay).
REPLAYED = Library("tracedagent/replay", lambda *args: tracedagent_build(*args, model=Replay), ("tracedagent",),
                   False)
MODES = ("untraced", "traced", "content")  # content: traced with content capture on


# --- the SDK setup, and what a run's spans weigh ---

class CountingExporter(SpanExporter):
    """Exports nowhere, counting what it was given so that a dropped span is noticed."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans):
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


class TracedSDK:
    """The SDK as users get it (a default BatchSpanProcessor), counting what should arrive."""

    def __init__(self) -> None:
        self.exporter = CountingExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(BatchSpanProcessor(self.exporter))
        self.emitted = 0

    def check_nothing_dropped(self) -> None:
        self.provider.force_flush()
        if self.exporter.exported != self.emitted:
            raise SystemExit(f"the SDK dropped {self.emitted - self.exporter.exported} of {self.emitted} spans: "
                             "figures refused")


@dataclass(frozen=True)
class Weight:
    spans: int
    attribute_bytes: int
    """The spans' attributes (events' included), keys and values, as OTLP/protobuf encodes them."""
    otlp_bytes: int
    """The whole OTLP request for the run's spans."""


def weigh(library: Library, steps: int, content: bool) -> Weight:
    """One traced run's spans, kept in memory and encoded as the OTLP exporter would."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    library.build(steps, provider, content)(1)
    spans = exporter.get_finished_spans()
    request = encode_spans(spans)
    encoded = [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
    attributes = sum(kv.ByteSize() for span in encoded
                     for kv in itertools.chain(span.attributes, *(event.attributes for event in span.events)))
    return Weight(len(spans), attributes, request.ByteSize())


# --- timing in turns ---

def runs_per_turn(measure: Measure, spans_per_run: int, turn_seconds: float) -> int:
    """Enough runs to last about ``turn_seconds``, but never more spans than the default queue
    holds (at least one run). Two single runs first: the first one warms caches up."""
    measure(1)
    one = measure(1)
    return max(1, min(int(turn_seconds / one), DEFAULT_QUEUE_SIZE // max(1, spans_per_run)))


def take_turns(measures: dict[str, Measure], runs: dict[str, int], steps: int, repeats: int,
               sdk: TracedSDK, spans: dict[str, int]) -> dict[str, list[float]]:
    """µs/step of each measure in each repeat, the measures taking turns in an order that
    rotates between repeats, so the measures of one repeat ran under the same load."""
    us: dict[str, list[float]] = {name: [] for name in measures}
    names = list(measures)
    gc.collect()
    gc.freeze()  # what exists now is never garbage of a turn: collections between turns skip it
    for repeat in range(repeats):
        for name in names[repeat % len(names):] + names[:repeat % len(names)]:
            sdk.provider.force_flush()
            gc.collect()
            gc.disable()  # as timeit does: collections would time the heap, not the code
            try:
                elapsed = measures[name](runs[name])
            finally:
                gc.enable()
            sdk.emitted += spans[name] * runs[name]
            us[name].append(elapsed / (runs[name] * steps) * 1e6)
    gc.unfreeze()
    return us


def spread(ratios: list[float]) -> str:
    """The median with the middle half: a noisy machine shows as a wide range, not a wrong figure."""
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return f"{median:5.2f} [{q1:.2f}-{q3:.2f}]"


def side_by_side(args, sdk: TracedSDK) -> None:
    """Sections 1 and 2."""
    weights = {(lib.name, mode): weigh(lib, STEPS, content=mode == "content")
               for lib in LIBRARIES for mode in MODES[1:]}
    measures, runs, spans = {}, {}, {}
    for lib in LIBRARIES:
        for mode in MODES:
            key = f"{lib.name}/{mode}"
            measures[key] = lib.build(STEPS, None if mode == "untraced" else sdk.provider, mode == "content")
            spans[key] = 0 if mode == "untraced" else weights[lib.name, mode].spans
            runs[key] = runs_per_turn(measures[key], spans[key], args.turn)
            sdk.emitted += 2 * spans[key]
    us = take_turns(measures, runs, STEPS, args.repeats, sdk, spans)
    sdk.check_nothing_dropped()

    print(f"1. µs per step, {STEPS}-step runs; {args.repeats} turns of each measure, about {args.turn * 1000:.0f} ms "
          "each, interleaved;")
    print("   medians, and each peer's ratio to tracedagent: the median of the per-turn ratios [middle half]")
    print(f"   {'':14} {'untraced':>9} {'traced':>9} {'+content':>9} {'tracing adds':>13}   "
          f"{'traced / tracedagent':>22}   {'+content / tracedagent':>22}   {'untraced / tracedagent':>22}")
    for lib in LIBRARIES:
        row = [statistics.median(us[f"{lib.name}/{mode}"]) for mode in MODES]
        ratios = ["" if lib.name == "tracedagent" else
                  spread([a / b for a, b in zip(us[f"{lib.name}/{mode}"], us[f"tracedagent/{mode}"])])
                  for mode in ("traced", "content", "untraced")]
        print(f"   {lib.name:14} {row[0]:9.1f} {row[1]:9.1f} {row[2]:9.1f} {row[1] - row[0]:13.1f}   {ratios[0]:>22}   "
              f"{ratios[1]:>22}   {ratios[2]:>22}")
    print(f"   (runs per turn: " + ", ".join(f"{key} {n}" for key, n in runs.items() if key.endswith("/traced"))
          + f"; {sdk.exporter.exported} spans exported, none dropped)")
    print()
    print(f"2. Spans and bytes per {STEPS}-step run (OTLP/protobuf), content capture off / on "
          "(each library's default marked *)")
    print(f"   {'':14} {'spans':>11} {'attribute bytes':>17} {'OTLP bytes':>17}")
    for lib in LIBRARIES:
        off, on = weights[lib.name, "traced"], weights[lib.name, "content"]
        mark = (" ", "*") if lib.content_by_default else ("*", " ")
        print(f"   {lib.name:14} {off.spans:>5} / {on.spans:<4} {off.attribute_bytes:>7}{mark[0]}/ "
              f"{on.attribute_bytes:<7}{mark[1]} {off.otlp_bytes:>7} / {on.otlp_bytes:<7}")
    print()


# --- growth ---

def seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


@dataclass
class Growth:
    steps: list[int]
    untraced: list[float]
    traced: list[float]
    """µs per step, content off."""
    bytes_per_step: list[float]
    stopped: str = ""
    next_run_seconds: tuple[int, float] | None = None
    """Where it stopped: the next size, and how long one run of it would take."""


def grow(args, sdk: TracedSDK) -> dict[str, Growth]:
    """Section 3: each library at each size in GROWTH_STEPS, untraced and traced in turns,
    until its next size would cost more than the budget."""
    grown: dict[str, Growth] = {}
    for lib in (LIBRARIES[0], REPLAYED, *LIBRARIES[1:]):
        growth = grown[lib.name] = Growth([], [], [], [])
        for steps in args.growth_steps:
            if len(growth.steps) >= 2 and lib.packages != ("tracedagent",):
                # a run's cost at the next size if the cost per step keeps growing in a straight
                # line through the last two sizes, for the runs one size takes (weigh, warm up, turns)
                (n1, n2), (t1, t2) = growth.steps[-2:], growth.traced[-2:]
                per_step = t2 + max(0.0, (t2 - t1) / (n2 - n1)) * (steps - n2)
                run_seconds = per_step * steps / 1e6
                if run_seconds * (1 + 2 * (2 + args.growth_repeats)) > args.growth_budget:
                    growth.stopped = (f"stopped after {n2} steps: a {steps}-step run would take about "
                                      f"{seconds(run_seconds)}, and a size takes {1 + 2 * (2 + args.growth_repeats)} "
                                      f"runs (budget: {args.growth_budget:.0f} s)")
                    growth.next_run_seconds = (steps, run_seconds)
                    break
            weight = weigh(lib, steps, content=False)
            measures = {"untraced": lib.build(steps, None, False), "traced": lib.build(steps, sdk.provider, False)}
            spans = {"untraced": 0, "traced": weight.spans}
            runs = {name: runs_per_turn(m, spans[name], args.turn * 2) for name, m in measures.items()}
            sdk.emitted += 2 * weight.spans
            us = take_turns(measures, runs, steps, args.growth_repeats, sdk, spans)
            sdk.check_nothing_dropped()
            growth.steps.append(steps)
            growth.untraced.append(statistics.median(us["untraced"]))
            growth.traced.append(statistics.median(us["traced"]))
            growth.bytes_per_step.append(weight.otlp_bytes / steps)

    print(f"3. Growth: µs per step traced and untraced, and OTLP bytes per step traced, content off; "
          f"{args.growth_repeats} turns each")
    print(f"   {'steps':28}" + "".join(f"{n:>10}" for n in args.growth_steps))
    for name, growth in grown.items():
        for label, figures, unit in (("traced", growth.traced, ""), ("untraced", growth.untraced, ""),
                                     ("bytes", growth.bytes_per_step, " B")):
            print(f"   {name if label == 'traced' else '':18}{label:>10}"
                  + "".join(f"{figure:>8.0f}{unit:2}" for figure in figures))
        if growth.stopped:
            print(f"   {'':28}{growth.stopped}")
    print()
    return grown


# --- export throughput to the real collector ---

def collector_down(endpoint: str) -> str | None:
    """Why nothing can be sent to ``endpoint``, or None if something listens there."""
    url = urlsplit(endpoint)
    try:
        socket.create_connection((url.hostname, url.port or 4317), timeout=1).close()
    except OSError as error:
        return f"no collector at {endpoint} ({error.strerror or error}); start one with `make stack-up`"
    return None


@dataclass(frozen=True)
class Load:
    label: str
    runs: int
    seconds: float
    emitted: int
    delivered: int
    warnings: list[str]
    """What the SDK and tracedagent logged meanwhile: why spans were lost, if they were."""

    @property
    def dropped(self) -> int:
        return self.emitted - self.delivered

    @property
    def why(self) -> str:
        if any("Queue full" in message for message in self.warnings):
            return "the SDK queue was full"
        return self.warnings[0] if self.warnings else "nothing was logged"


class Warnings(logging.Handler):
    """Keeps the warnings logged under the given loggers (instead of printing them)."""

    def __init__(self, *loggers: str) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.loggers = [logging.getLogger(name) for name in loggers]

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> list[str]:
        for logger in self.loggers:
            logger.addHandler(self)
        return self.messages

    def __exit__(self, *exc) -> None:
        for logger in self.loggers:
            logger.removeHandler(self)


def offer_load(endpoint: str, rate: float | None, threads: int, seconds: float) -> Load:
    """10-step runs for ``seconds`` at ``rate`` runs/s (None: as fast as ``threads`` threads
    go), through a pipeline of configure()'s own, flushed and shut down after."""
    telemetry = tracedagent.configure(endpoint=endpoint, service_name="tracedagent-bench-peers", metrics=False,
                                      set_global=False)
    build = lambda: tracedagent_build(STEPS, telemetry.tracer_provider, False)  # noqa: E731
    counts = [0] * threads
    deadline = time.perf_counter() + seconds

    def produce(index: int) -> None:
        measure = build()
        started = time.perf_counter()
        while time.perf_counter() < deadline:
            ahead = 0.0 if rate is None else started + counts[index] / rate - time.perf_counter()
            if ahead > 0:  # only then: a sleep, even of 0 s, hands the export thread the GIL
                time.sleep(ahead)
            measure(1)
            counts[index] += 1

    workers = [threading.Thread(target=produce, args=(i,)) for i in range(threads)]
    with Warnings("opentelemetry", "tracedagent") as warnings:
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        elapsed = time.perf_counter() - started
        telemetry.shutdown(timeout=30)
    runs = sum(counts)
    label = f"{rate:.0f} runs/s" if rate else f"unpaced, {threads} thread{'s' if threads > 1 else ''}"
    return Load(label, runs, elapsed, runs * SPANS_PER_TRACEDAGENT_RUN, telemetry.spans_exported, warnings)


SPANS_PER_TRACEDAGENT_RUN = 1 + STEPS + STEPS + (STEPS - 1)  # run, steps, chat calls, tool calls


def throughput(args) -> None:
    """Section 4."""
    print(f"4. Export throughput to the real collector ({args.endpoint}, OTLP/gRPC; configure(set_global=False, "
          f"metrics=False): default BatchSpanProcessor queue {DEFAULT_QUEUE_SIZE}); {STEPS}-step tracedagent runs, "
          f"{args.load_seconds:g} s per load")
    reason = collector_down(args.endpoint)
    if reason:
        print(f"   skipped: {reason}")
        print()
        return
    print(f"   load average now {os.getloadavg()[0]:.1f}")
    results: list[Load] = []

    def offer(rate: float | None, threads: int) -> Load:
        load = offer_load(args.endpoint, rate, threads, args.load_seconds)
        results.append(load)
        print(f"   {load.label:22} {load.runs / load.seconds:7.0f} runs/s {load.delivered / load.seconds:8.0f} spans/s "
              f"delivered   {load.delivered}/{load.emitted} spans"
              + (f", {load.dropped} DROPPED: {load.why}" if load.dropped else ""))
        return load

    for rate in args.rates:
        load = offer(rate, 1)
        if load.dropped or load.runs / load.seconds < 0.9 * rate:
            break  # dropping already, or one producer goes no faster: more threads next
    for threads in (1, 2, 4):
        if results[-1].dropped:
            break
        offer(None, threads)
    clean = [load for load in results if not load.dropped]
    if clean:
        best = max(clean, key=lambda load: load.runs / load.seconds)
        print(f"   nothing dropped up to {best.runs / best.seconds:.0f} runs/s, {best.delivered / best.seconds:.0f} "
              f"spans/s ({best.label})")
    dropping = [load for load in results if load.dropped]
    if dropping:
        first = dropping[0]
        print(f"   spans were first dropped at {first.runs / first.seconds:.0f} runs/s, "
              f"{first.emitted / first.seconds:.0f} spans/s offered ({first.label}): {first.why}")
    else:
        print("   nothing was dropped at any load offered")
    print()


# --- the picture ---

def plot(grown: dict[str, Growth], path: Path) -> None:
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(9, 4.8), dpi=110)
    for (name, growth), colour in zip(grown.items(), ("tab:green", "tab:olive", "tab:blue", "tab:orange", "tab:red")):
        stopped = (f"\n  ({growth.next_run_seconds[0]} steps not run: about {seconds(growth.next_run_seconds[1])} "
                   "a run)" if growth.next_run_seconds else "")
        axes.plot(growth.steps, growth.traced, "o-", color=colour, label=f"{name}, traced{stopped}")
        axes.plot(growth.steps, growth.untraced, "o--", color=colour, alpha=0.5, label=f"{name}, untraced")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xticks(GROWTH_STEPS, [str(n) for n in GROWTH_STEPS])
    axes.set_xlabel("steps per run (one tool call a step)")
    axes.set_ylabel("µs per step (log)")
    axes.set_title(f"Per-step cost against run length: SDK + BatchSpanProcessor, content off "
                   f"(Python {platform.python_version()}, {os.cpu_count()} cores)", fontsize=9)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    print(f"Plot: {path}")


def versions() -> Iterator[str]:
    yield f"Python {platform.python_version()}, {os.cpu_count()} cores"
    for lib in LIBRARIES:
        yield " + ".join(f"{package} {version(package)}" for package in lib.packages)
    yield f"opentelemetry-sdk {version('opentelemetry-sdk')}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=61, help="turns of each measure (default: %(default)s)")
    parser.add_argument("--turn", type=float, default=0.08, help="seconds per turn (default: %(default)s)")
    parser.add_argument("--growth-repeats", type=int, default=7, help="turns per size (default: %(default)s)")
    parser.add_argument("--growth-budget", type=float, default=40.0,
                        help="seconds a peer may take at one size (default: %(default)s)")
    parser.add_argument("--load-seconds", type=float, default=2.0, help="seconds per load (default: %(default)s)")
    parser.add_argument("--endpoint", default="http://127.0.0.1:4317", help="the collector (default: %(default)s)")
    parser.add_argument("--plot", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "peers.png",
                        help="where the PNG goes (default: docs/peers.png)")
    parser.add_argument("--quick", action="store_true", help="a tiny run that checks everything works")
    args = parser.parse_args()
    args.growth_steps = GROWTH_STEPS
    args.rates = (100, 141, 200, 283, 400, 566)  # doubling every other step
    if args.quick:
        args.repeats, args.turn, args.growth_repeats, args.growth_steps = 2, 0.005, 1, (1, 10, 100)
        args.growth_budget, args.rates, args.load_seconds = 0.5, (100,), 0.3  # the peers stop after 10 steps
    if args.repeats < 2 or args.growth_repeats < 1:
        parser.error("--repeats must be at least 2 (the ratios are medians over them), --growth-repeats at least 1")

    print("; ".join(versions()))
    print(f"Load average at the start: {os.getloadavg()[0]:.1f} (the machine may be shared; the ratios are "
          "medians of turns taken under the same load)")
    print()
    took = [time.perf_counter()]
    sdk = TracedSDK()
    side_by_side(args, sdk)
    took.append(time.perf_counter())
    grown = grow(args, sdk)
    sdk.provider.shutdown()
    took.append(time.perf_counter())
    throughput(args)
    took.append(time.perf_counter())
    plot(grown, args.plot)
    print(f"Load average at the end: {os.getloadavg()[0]:.1f}. Took {time.perf_counter() - took[0]:.0f} s "
          "(sections 1-2, 3, 4: " + ", ".join(f"{b - a:.0f} s" for a, b in zip(took, took[1:])) + ").")


if __name__ == "__main__":
    main()
