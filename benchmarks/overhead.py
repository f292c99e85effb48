"""Per-step cost of tracing: how much does tracedagent add beyond what the OTel SDK must do?

The same 10-step agent (a zero-latency FakeModel, one tool call a step), measured six ways:

  (a) no SDK: the API's no-op providers - the cost of the loop itself;
  (b) the SDK: TracerProvider + BatchSpanProcessor + an exporter that discards;
  (c) the floor: the same 30 spans with the same attributes, emitted by a bare loop of
      OTel calls on the same SDK setup, with no agent at all;
  (e) the floor plus the loop's own bookkeeping between those calls (recording each turn,
      the repeat check, dispatch through the Registry, appending results, the budget
      checks), with no telemetry code: what a traced loop with free telemetry would cost;
  (f) (b) through ``arun``, with the model's ``acomplete`` and an async tool;
  (g) (a) through ``arun``: the async driver's own cost.

(b)/(c) is the harness's overhead over the SDK's own work (target <= 1.3); (b)/(a) is what
turning tracing on costs. (b)/(c) includes the loop's own work, (a), which the floor does
not do: (b-a)/(c) is the telemetry's share alone, and (b)/(e) is what tracedagent's telemetry
code adds over a loop whose telemetry were free. Metrics are off in (a)-(c) and (e) so that
they do the same span work; (d) adds the SDK MeterProvider for information. For counts that
the machine's load cannot move, see instructions.py.

How it measures: the SDK is set up as users get it (a BatchSpanProcessor with its default
queue and batch sizes, exporting from its own thread), and each measurement is a short turn
of --runs runs that leaves fewer spans queued than the default queue holds: the exporter
counts what it receives, and the figures are refused if a single span was dropped (a dropped
span costs next to nothing and would flatter the turn it fell in). Turns are short because
a shared machine's speed drifts from one tenth of a second to the next; the measures take
turns within each repeat, and each ratio is the median of the ratios within a repeat, shown
with the middle half of them. The async driver's targets (issue #32) are read off the cheapest
turn of each measure instead (a shared machine only ever adds time): (f)/(b) <= 1.15,
(g)/(a) <= 1.5, and (b)/(c) <= 1.15. Run: python benchmarks/overhead.py
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from typing import Callable

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import NoOpTracerProvider, SpanKind

from tracedagent import Agent, Budget, Completion, Registry, Stop, ToolCall, Usage, tool
from tracedagent._core._run import RunState, initial_messages

STEPS = 10
SPANS_PER_RUN = 1 + STEPS + STEPS + (STEPS - 1)  # run, steps, chat calls, tool calls
DEFAULT_QUEUE_SIZE = 2048  # BatchSpanProcessor's max_queue_size unless configured


class DiscardingExporter(SpanExporter):
    """Exports nowhere, counting what it was given so that a dropped span is noticed."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans):
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return "42"


class ZeroLatencyModel:
    """Like FakeModel, but with precomputed turns so the model costs next to nothing."""

    provider_name = "fake"
    model_name = "fake-model"

    def __init__(self) -> None:
        self.turns = [Completion(tool_calls=[ToolCall(f"c{i}", "lookup", {"q": f"q{i}"})],
                                 usage=Usage(100 + i, 10), model="fake-model", finish_reason="tool_calls")
                      for i in range(STEPS - 1)]
        self.turns.append(Completion(text="done", usage=Usage(200, 5), model="fake-model", finish_reason="stop"))
        self.i = 0

    def complete(self, messages, tools=None, max_output_tokens=None, temperature=None):
        turn = self.turns[self.i % STEPS]
        self.i += 1
        return turn

    async def acomplete(self, messages, tools=None, max_output_tokens=None, temperature=None):
        return self.complete(messages, tools, max_output_tokens, temperature)


@tool(name="lookup")
async def alookup(q: str) -> str:
    """Look something up."""
    return "42"


def sdk_provider(exporter: SpanExporter) -> TracerProvider:
    """The SDK as users get it: a BatchSpanProcessor with its default queue and batch sizes."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def agent_runs(tracer_provider, meter_provider, runs: int) -> float:
    agent = Agent(ZeroLatencyModel(), Registry([lookup]), budget=Budget(max_steps=STEPS),
                  tracer_provider=tracer_provider, meter_provider=meter_provider)
    started = time.perf_counter()
    for _ in range(runs):
        run = agent.run("go")
    elapsed = time.perf_counter() - started
    assert run.step_count == STEPS and run.ok
    return elapsed


def agent_aruns(tracer_provider, meter_provider, runs: int) -> float:
    """(f): the same runs through ``arun``, one after another in one event loop, with the
    model's ``acomplete`` and an async tool (a sync one would cost a thread hop a call)."""
    agent = Agent(ZeroLatencyModel(), Registry([alookup]), budget=Budget(max_steps=STEPS),
                  tracer_provider=tracer_provider, meter_provider=meter_provider)

    async def all_runs() -> float:
        started = time.perf_counter()
        for _ in range(runs):
            run = await agent.arun("go")
        elapsed = time.perf_counter() - started
        assert run.step_count == STEPS and run.ok
        return elapsed

    return asyncio.run(all_runs())


# The attributes an agent run's spans carry, as constants: the floor computes nothing.
_RUN_START = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "agent",
             "gen_ai.provider.name": "fake", "gen_ai.request.model": "fake-model",
             "tracedagent.budget.max_steps": STEPS, "tracedagent.budget.repeat_limit": 3,
             "tracedagent.budget.max_tool_calls_per_step": 64, "tracedagent.driver": "run"}
_RUN_END = {"tracedagent.stop_reason": "answered", "tracedagent.steps": STEPS,
           "gen_ai.usage.input_tokens": 1245, "gen_ai.usage.output_tokens": 95,
           "tracedagent.usage.total_input_tokens": 1245, "tracedagent.usage.total_output_tokens": 95,
           "tracedagent.tools.requested": ["lookup"] * 9, "tracedagent.tools.executed": ["lookup"] * 9,
           "tracedagent.tools.blocked": []}
_CHAT_START = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "fake", "gen_ai.request.model": "fake-model"}
_CHAT_END = {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10,
            "gen_ai.response.model": "fake-model", "gen_ai.response.finish_reasons": ["tool_calls"]}
_STEP_END = {"tracedagent.step.input_tokens": 100, "tracedagent.step.output_tokens": 10,
            "tracedagent.tools.requested": ["lookup"], "tracedagent.tools.executed": ["lookup"],
            "tracedagent.tools.blocked": []}
_FLOOR_ATTRIBUTES = (_RUN_START, _RUN_END, _CHAT_START, _CHAT_END, _STEP_END)


def _span_calls(tracer):
    """The floor's two moves: start a span as the current one, and end it."""

    def child(name, kind, attributes):
        span = tracer.start_span(name, kind=kind, attributes=attributes)
        return span, otel_context.attach(trace.set_span_in_context(span))

    def close(span, token):
        otel_context.detach(token)
        span.end()

    return child, close


def floor_runs(tracer_provider, runs: int) -> float:
    """The same span tree and attributes as an agent run, straight through the OTel API."""
    tracer = tracer_provider.get_tracer("tracedagent")
    run_start, run_end, chat_start, chat_end, step_end = _FLOOR_ATTRIBUTES

    child, close = _span_calls(tracer)

    started = time.perf_counter()
    for _ in range(runs):
        run_span, run_token = child("invoke_agent agent", SpanKind.INTERNAL, run_start)
        for i in range(STEPS):
            step, step_token = child("step", SpanKind.INTERNAL, {"tracedagent.step.index": i})
            chat, chat_token = child("chat fake-model", SpanKind.CLIENT, chat_start)
            otel_context.detach(chat_token)
            chat.set_attributes(chat_end)
            chat.end()
            if i < STEPS - 1:
                tool_span, tool_token = child("execute_tool lookup", SpanKind.INTERNAL, {
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.id": f"c{i}", "gen_ai.tool.type": "function"})
                tool_span.set_attribute("tracedagent.tool.outcome", "ok")
                close(tool_span, tool_token)
            step.set_attributes(step_end)
            close(step, step_token)
        run_span.set_attributes(run_end)
        close(run_span, run_token)
    return time.perf_counter() - started


def floor_with_loop_runs(tracer_provider, runs: int) -> float:
    """(c) with the loop's own bookkeeping done between the same OTel calls, through the
    loop's own functions (``RunState``, ``Registry``), so it follows any change to them."""
    tracer = tracer_provider.get_tracer("tracedagent")
    registry = Registry([lookup])
    budget = Budget(max_steps=STEPS)
    run_start, run_end, chat_start, chat_end, step_end = _FLOOR_ATTRIBUTES

    child, close = _span_calls(tracer)

    model = ZeroLatencyModel()
    started = time.perf_counter()
    for _ in range(runs):
        state = RunState(budget, initial_messages(None, None, "go"))
        run = None
        run_span, run_token = child("invoke_agent agent", SpanKind.INTERNAL, run_start)
        for i in range(STEPS):
            step_span, step_token = child("step", SpanKind.INTERNAL, {"tracedagent.step.index": i})
            chat, chat_token = child("chat fake-model", SpanKind.CLIENT, chat_start)
            completion = model.complete(state.messages, registry.schemas() or None)
            otel_context.detach(chat_token)
            chat.set_attributes(chat_end)
            chat.end()
            step = state.record(i, completion)
            if not completion.wants_tools:
                run = state.finish(Stop.ANSWERED)
            elif not state.check_turn(completion.tool_calls):
                for call in completion.tool_calls:
                    tool_span, tool_token = child("execute_tool lookup", SpanKind.INTERNAL, {
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                        "gen_ai.tool.call.id": call.id, "gen_ai.tool.type": "function"})
                    result = registry.dispatch(call)
                    otel_context.detach(tool_token)
                    tool_span.set_attribute("tracedagent.tool.outcome", "ok")
                    tool_span.end()
                    state.append(step, result)
                state.over_budget()
            step_span.set_attributes(step_end)
            close(step_span, step_token)
        run_span.set_attributes(run_end)
        close(run_span, run_token)
    assert run is not None and run.ok
    return time.perf_counter() - started


def per_step_us(measures: dict[str, Callable[[int], float]], runs: int, repeats: int,
                flush: Callable[[], object]) -> dict[str, list[float]]:
    """µs/step of each measure in each repeat. Within a repeat the measures take turns, in an
    order that rotates from one repeat to the next, so that two measures of the same repeat
    ran under the same load: their ratio is what the figures are made of. The span queue is
    drained before every turn."""
    times: dict[str, list[float]] = {name: [] for name in measures}
    for name, measure in measures.items():
        measure(max(1, runs // 10))  # warm up
    names = list(measures)
    for repeat in range(repeats):
        for name in names[repeat % len(names):] + names[: repeat % len(names)]:
            flush()
            gc.collect()
            gc.disable()  # as timeit does: collections would time the heap, not the code
            try:
                times[name].append(measures[name](runs) / (runs * STEPS) * 1e6)
            finally:
                gc.enable()
    return times


def ratio(us: dict[str, list[float]], x: str, y: str) -> str:
    """The median of x/y over the repeats, with the middle half of them: a noisy machine
    shows as a wide range rather than as a wrong figure."""
    q1, median, q3 = statistics.quantiles([a / b for a, b in zip(us[x], us[y])], n=4)
    return f"{median:.2f} [{q1:.2f}-{q3:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="runs per turn (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=61, help="turns of each measure (default: %(default)s)")
    args = parser.parse_args()
    if args.repeats < 2:
        parser.error("--repeats must be at least 2: the ratios are medians over the repeats")
    if args.runs * SPANS_PER_RUN > DEFAULT_QUEUE_SIZE:
        parser.error(f"--runs {args.runs} would queue more spans a turn than the SDK's default queue holds")

    noop_tracer, noop_meter = NoOpTracerProvider(), NoOpMeterProvider()
    exporter = DiscardingExporter()
    sdk = sdk_provider(exporter)
    sdk_meter = MeterProvider(metric_readers=[InMemoryMetricReader()])
    us = per_step_us({
        "a": lambda n: agent_runs(noop_tracer, noop_meter, n),
        "b": lambda n: agent_runs(sdk, noop_meter, n),
        "c": lambda n: floor_runs(sdk, n),
        "d": lambda n: agent_runs(sdk, sdk_meter, n),
        "e": lambda n: floor_with_loop_runs(sdk, n),
        "f": lambda n: agent_aruns(sdk, noop_meter, n),
        "g": lambda n: agent_aruns(noop_tracer, noop_meter, n),
    }, args.runs, args.repeats, flush=sdk.force_flush)
    sdk.shutdown()
    emitted = SPANS_PER_RUN * 5 * (args.runs * args.repeats + max(1, args.runs // 10))  # (b)-(f), with warm-up
    if exporter.exported != emitted:
        raise SystemExit(f"the SDK dropped {emitted - exporter.exported} of {emitted} spans: figures refused")
    a, b, c, d, e, f, g = (statistics.median(us[name]) for name in "abcdefg")
    low = {name: min(times) for name, times in us.items()}

    print(f"{STEPS}-step runs x {args.runs}, {args.repeats} repeats; medians per step, and of the "
          f"ratios within each repeat [middle half]:")
    print(f"  (a) no SDK (no-op providers)            {a:8.1f} us/step")
    print(f"  (b) SDK + BatchSpanProcessor + discard  {b:8.1f} us/step")
    print(f"  (c) floor: bare OTel calls, same spans  {c:8.1f} us/step")
    print(f"  (d) (b) plus the SDK MeterProvider      {d:8.1f} us/step")
    print(f"  (e) floor + the loop's own bookkeeping  {e:8.1f} us/step")
    print(f"  (f) (b) through arun (async model, tool) {f:8.1f} us/step")
    print(f"  (g) (a) through arun                    {g:8.1f} us/step")
    print(f"  (b)/(c) = {ratio(us, 'b', 'c')}  (target <= 1.3: the harness adds little beyond the SDK's own work)")
    print(f"  (b-a)/(c) = {(b - a) / c:.2f}         (the harness's telemetry alone, the loop's own work (a) taken out)")
    print(f"  (e)/(c) = {ratio(us, 'e', 'c')}  (the best (b)/(c) a loop doing this bookkeeping could reach)")
    print(f"  (b)/(e) = {ratio(us, 'b', 'e')}  (what tracedagent's telemetry code adds over free telemetry)")
    print(f"  (b)/(a) = {ratio(us, 'b', 'a')}  (what turning tracing on costs the loop)")
    print(f"  (d)/(b) = {ratio(us, 'd', 'b')}  (what metrics add)")
    print(f"  (f)/(c) = {ratio(us, 'f', 'c')}  (target <= 1.3: arun over the same SDK floor)")
    print(f"  (f)/(b) = {ratio(us, 'f', 'b')}  (arun against run, per step)")
    print(f"  (g)/(a) = {ratio(us, 'g', 'a')}  (arun against run, untraced)")
    print(f"cheapest of the {args.repeats} turns of each (a shared machine only ever adds time):")
    print(f"  run  untraced (a) {low['a']:6.1f}  traced (b) {low['b']:6.1f}  floor (c) {low['c']:6.1f} us/step")
    print(f"  arun untraced (g) {low['g']:6.1f}  traced (f) {low['f']:6.1f} us/step")
    print(f"  cheapest (f)/(b) = {low['f'] / low['b']:.2f}  (target <= 1.15: arun traced against run traced)")
    print(f"  cheapest (g)/(a) = {low['g'] / low['a']:.2f}  (target <= 1.5: arun untraced against run untraced)")
    print(f"  cheapest (b)/(c) = {low['b'] / low['c']:.2f}  (target <= 1.15: run traced against the floor)")


if __name__ == "__main__":
    main()
