"""The ``tracedagent`` command: a demo you can run without a server, and traces you can read.

* ``demo`` runs scripted agents, one per stop reason, prints what each did and its span
  tree, and writes every span to an OTLP/JSON file (Jaeger's UI uploads it on
  its Search page). Given a collector (``--otlp`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``) it sends spans
  and metrics there through ``tracedagent.configure`` and prints each run's Jaeger link;
  ``--runs``/``--concurrency`` turn it into a load generator.
* ``show FILE`` renders an OTLP/JSON file again.
* ``traces`` lists recent runs from Jaeger's HTTP API; ``trace ID`` renders one of them.
* ``replay`` turns a recorded run into a pytest regression test; ``diff`` shows where two
  runs of one task parted.
* ``doctor`` checks that the collector, Jaeger, Prometheus and Alertmanager answer, and says
  how to start what does not.
* ``stack FOLDER`` writes the Docker Compose stack (its compose file and every config it
  mounts, from package data) into a folder, for a user without the repository.

Built on click (one dependency-free library) and rich. Every expected failure - a file
that is not OTLP, a Jaeger that is not there, a trace that does not exist - becomes a
``CliError``: one line on stderr and exit status 1, never a traceback.

Traces, files, Jaeger's answers and even arguments may hold what a model or an attacker
chose, so nothing is printed as rich markup, and everything goes out through
``_render.text``/``printable``, which write control characters as escapes.
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path
from typing import Sequence

import click
from opentelemetry import metrics
from opentelemetry.sdk.environment_variables import OTEL_SDK_DISABLED
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from rich.console import Console, Group

from . import _doctor
from . import _eval_cmd
from . import _eval_demo
from . import _local_cmd
from . import _options
from . import _replay_cmd
from . import _stack
from .._core import _names as N
from .._core._budget import Stop
from .._export._configure import Telemetry, configure
from .._export._endpoints import export_target, shown_url, start_the_stack
from ._demo import SCENARIOS, Recording, Scenario, build_agent
from ._progress import run_with_progress
from .._traces._jaeger import JaegerClient, JaegerError
from ._listing import SHORT_ID_DIGITS, Listing
from .._agent._loop import Agent
from .._traces._otlp_json import OtlpJsonError, OtlpJsonWriter, read_file
from .._traces._recorded import ReplayError
from ._render import output_width, printable, runs_table, scenario_table, stop_counts_table, text, trace_tree
from .._traces._trace import Trace, group_traces
from .._core._run import Run
from .._version import __version__

__all__ = ["main", "cli"]

DEFAULT_OUT = Path("tracedagent-demo.otlp.json")


_console = Console(highlight=False, markup=False, emoji=False, width=output_width())


def _say(line: str) -> None:
    """One line of the command's own output; it may quote paths and names the user chose. Never
    wrapped: a URL or a path cut in two by a newline could not be copied or piped on."""
    _console.print(text(line, limit=None), soft_wrap=True)


class CliError(click.ClickException):
    """An expected failure: ``Error: MESSAGE`` on one line of stderr, exit status 1. The
    message may quote a file, or Jaeger's own words: it is made printable like the rest."""

    def format_message(self) -> str:
        return printable(self.message, limit=None)


def main() -> None:
    """The console script's entry point (``tracedagent`` and ``python -m tracedagent``)."""
    cli(prog_name="tracedagent")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="tracedagent")
def cli() -> None:
    """Agents that stop for named reasons, and the trace of every run.

    Start with `tracedagent demo`: no server needed.
    """


# --- demo --------------------------------------------------------------------------------

@cli.command(short_help="Run scripted agents, one per stop reason; show each run's trace.")
@click.option("--out", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=DEFAULT_OUT,
              show_default=True, help="Write every span here as OTLP/JSON (Jaeger's UI can upload it).")
@_options.otlp_options
@_options.jaeger_option
@_options.service_option("service.name of the spans")
@click.option("--only", multiple=True, metavar="NAME", type=click.Choice([s.name for s in SCENARIOS]),
              help="Run only this scenario (repeatable). See --list.")
@click.option("--list", "list_only", is_flag=True, help="List the scenarios and exit.")
@click.option("--runs", type=click.IntRange(min=1), metavar="N",
              help="Load mode: N runs in all, cycling through the scenarios; prints totals, not trees.")
@click.option("--concurrency", type=click.IntRange(1, 64), default=1, show_default=True, metavar="K",
              help="Runs at a time.")
@click.option("--price-in", type=click.FloatRange(min=0), metavar="USD",
              help="USD per 1,000 input tokens, for scenarios without prices of their own (none are shipped).")
@click.option("--price-out", type=click.FloatRange(min=0), metavar="USD",
              help="USD per 1,000 output tokens, likewise.")
@click.option("--pace", type=click.FloatRange(min=0), default=1.0, show_default=True, metavar="FACTOR",
              help="Scale the simulated model and tool latencies; 0 runs without sleeping.")
@click.option("--local-model", is_flag=True, help="Instead: one real agent on a local model (tracedagent local).")
def demo(out: Path, otlp_endpoint: str | None, protocol: str | None, jaeger_url: str, service: str | None,
         only: Sequence[str], list_only: bool, runs: int | None, concurrency: int, price_in: float | None,
         price_out: float | None, pace: float, local_model: bool) -> None:
    """Run scripted agents, one per stop reason, and show the trace of each run.

    With --otlp URL (or OTEL_EXPORTER_OTLP_ENDPOINT) the spans and metrics also go to that
    collector, and each run's Jaeger link is printed.
    """
    chosen = [_local_cmd.SCENARIO] if local_model else [s for s in SCENARIOS if not only or s.name in only]
    if local_model and (missing := _local_cmd.local.missing()):
        raise CliError(missing)
    if list_only:
        _console.print(scenario_table(chosen))
        return
    load_mode = runs is not None
    total = len(chosen) if runs is None else runs
    service = _options.service_name(service)
    # A collector is used when one is named, by --otlp or by the variables configure() reads.
    try:
        sends = export_target("traces", endpoint=otlp_endpoint, protocol=protocol).endpoint_named
        if protocol and not sends:
            raise click.UsageError(f"--protocol needs a collector: give --otlp URL (or set {N.ENV_OTLP_ENDPOINT})")
        telemetry = configure(service_name=service, endpoint=otlp_endpoint, protocol=protocol,
                              set_global=False) if sends else None
    except ValueError as exc:  # a variable's endpoint that is not a URL (--otlp was checked already)
        raise CliError(str(exc)) from None
    if telemetry is not None:
        tracer_provider, meter_provider = telemetry.tracer_provider, telemetry.meter_provider
    else:  # embedded: nothing leaves the process but the file
        tracer_provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
        meter_provider = metrics.NoOpMeterProvider()
    try:
        writer = OtlpJsonWriter(out)
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}") from None
    recording = Recording(writer, keep_trees=not load_mode)
    tracer_provider.add_span_processor(recording)
    trace_ids: dict[int, str] = {}  # by place in the plan, for the trees and links; load mode keeps none

    server = _local_cmd.Started() if local_model else None  # started by its first agent, stopped below

    def make_agent(scenario: Scenario) -> Agent:
        if server is not None:
            return server.agent(tracer_provider=tracer_provider, meter_provider=meter_provider)
        return build_agent(scenario, pace=pace, price_in=price_in, price_out=price_out,
                           tracer_provider=tracer_provider, meter_provider=meter_provider)

    def finished(index: int, run: Run) -> None:
        if not load_mode:
            trace_ids[index] = run.trace_id

    started = time.perf_counter()
    try:
        count = run_with_progress(itertools.islice(itertools.cycle(chosen), total), total, concurrency, make_agent,
                                  finished, _console)
        seconds = time.perf_counter() - started  # the runs alone: not the final flush
    except BaseException:
        writer.discard()
        raise
    finally:
        _stop_telemetry(telemetry, tracer_provider)
        if server is not None:
            server.stop()
    writer.close()
    if recording.error is not None:
        raise CliError(f"could not record the spans in {out}: {recording.error}")

    jaeger = shown_url(jaeger_url).rstrip("/")  # links to print: the browser asks for credentials
    if load_mode:
        _console.print(stop_counts_table(recording.tally, title=f"{count} run{'s' if count != 1 else ''} by stop reason"))
    else:
        resumed = {run.resumed_from: tree for tree in recording.trees.values() for run in tree.runs()[:1]
                   if run.resumed_from}  # a paused run's resumption follows it
        _print_traces([tree for i in sorted(trace_ids) if trace_ids[i] in recording.trees
                       for tree in (recording.trees[trace_ids[i]], *filter(None, [resumed.get(trace_ids[i])]))],
                      title="What each agent did")
    if writer.spans == 0:  # a link would lead nowhere (and read .../trace/None)
        _say(f"No run recorded a span: tracing is off ({OTEL_SDK_DISABLED}=true, or a sampler that keeps "
             f"no trace), so there is nothing to show or link to.")
    elif telemetry is not None and not load_mode:
        _say("Each run in Jaeger:")
        for index, scenario in enumerate(chosen):
            if trace_ids[index] in recording.trees:  # a run the sampler dropped has no trace to link to
                _say(f"  {scenario.name:<20} {jaeger}/trace/{trace_ids[index]}")
    elif telemetry is not None:
        _say(f"In Jaeger: {jaeger}/search?service={service}")
    # Spans the collector accepted, not spans produced: an export that failed shows here.
    sent = f"; {telemetry.spans_exported} exported to {telemetry.endpoint}" if telemetry is not None else ""
    _say(f"{count} run{'s' if count != 1 else ''} in {seconds:.1f} s ({count / max(seconds, 1e-9):.1f} runs/s); "
         f"{writer.spans} spans written to {out}{sent}")
    if not load_mode and writer.spans:
        _say(f"See them again: `tracedagent show {out}`, or in Jaeger's UI (Search page, Upload tab).")
    if telemetry is not None and telemetry.spans_exported < writer.spans:
        raise CliError(f"only {telemetry.spans_exported} of {writer.spans} spans reached the collector "
                       f"at {telemetry.endpoint} ({telemetry.protocol}); `tracedagent doctor` checks the endpoints")


def _stop_telemetry(telemetry: Telemetry | None, tracer_provider: TracerProvider) -> None:
    """Flush and shut down what the demo started (``Telemetry.spans_exported`` then says
    how much of it the collector accepted)."""
    if telemetry is None:
        tracer_provider.shutdown()
        return
    telemetry.force_flush(5.0)
    telemetry.shutdown()


def _print_traces(traces: Sequence[Trace], *, title: str) -> None:
    """The summary table, then one span tree per trace: ``demo``, ``show`` and ``trace`` alike."""
    runs = [run for trace in traces for run in trace.runs()]
    if runs:
        _console.print(runs_table(runs, title=title))
    _console.print(Group(*(tree for trace in traces for tree in ("", trace_tree(trace)))))
    _console.print()


# --- show --------------------------------------------------------------------------------

@cli.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--trace", "trace_id", metavar="ID", help="Only this trace.",
              callback=lambda ctx, param, value: None if value is None else _options.trace_id(value))
def show(file: Path, trace_id: str | None) -> None:
    """Render an OTLP/JSON trace file (such as the one `demo` writes)."""
    try:
        traces = group_traces(read_file(file))
    except OtlpJsonError as exc:
        raise CliError(str(exc)) from None
    if trace_id is not None:
        traces = [t for t in traces if t.trace_id == trace_id.zfill(32)]
        if not traces:
            raise CliError(f"{file}: no trace {trace_id}")
    _print_traces(traces, title=f"{file}: {len(traces)} trace{'s' if len(traces) != 1 else ''}")


# --- traces / trace ----------------------------------------------------------------------

@cli.command(short_help="List recent runs from Jaeger.")
@_options.jaeger_option
@_options.service_option("service.name to search")
@click.option("--stop", "stop_reason", metavar="REASON",
              type=click.Choice([s.value for s in Stop], case_sensitive=False),
              help="Only runs that ended this way: " + ", ".join(s.value for s in Stop) + ".")
@click.option("--agent", metavar="NAME", help="Only runs of this agent (gen_ai.agent.name).")
@click.option("--conversation", metavar="ID",
              help="Only the runs of this conversation (gen_ai.conversation.id), oldest first.")
@click.option("--since", "since_window", default="1h", show_default=True, metavar="SPAN",
              callback=lambda ctx, param, value: (value, _options.since(value)),
              help="How far back to look: 30m, 1h, 2d ...")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True, metavar="N",
              help="Traces at most.")
@click.option("--full-ids", is_flag=True,
              help=f"Show whole trace ids (by default their first {SHORT_ID_DIGITS} hex digits).")
def traces(jaeger_url: str, service: str | None, stop_reason: str | None, agent: str | None,
           conversation: str | None, since_window: tuple[str, float], limit: int, full_ids: bool) -> None:
    """List recent runs from Jaeger: stop reason, steps, tokens, cost, duration.

    The table fits the terminal: the start time, agent and stop reason wrap, and a column
    that still does not fit is left out with a line that says so.
    """
    since, window = since_window
    service = _options.service_name(service)
    tags = {**({N.STOP_REASON: stop_reason.lower()} if stop_reason else {}),
            **({N.GEN_AI_AGENT_NAME: agent} if agent else {}),
            **({N.GEN_AI_CONVERSATION_ID: conversation} if conversation else {})}
    try:
        found = JaegerClient(jaeger_url).search(service=service, limit=limit, since_seconds=window, tags=tags)
    except JaegerError as exc:
        raise CliError(str(exc)) from None
    runs = sorted((run for spans in found if spans for run in Trace(spans).runs()
                   if (not stop_reason or run.stop_reason == stop_reason.lower()) and (not agent or run.agent == agent)
                   and (not conversation or run.conversation_id == conversation)),
                  key=lambda r: r.start_ns, reverse=not conversation)  # a conversation reads in order
    filters = ", ".join(f"{k}={v}" for k, v in (("stop", stop_reason), ("agent", agent),
                                                ("conversation", conversation)) if v)
    if not runs:
        _say(f"No runs of service {service!r} in the last {since}" + (f" ({filters})" if filters else "")
             + f" at {shown_url(jaeger_url)}.")
        return
    _console.print(Listing(runs, full_ids=full_ids,
                           title=f"Runs of {service!r}, last {since}" + (f", {filters}" if filters else "")))
    _say("Render one with `tracedagent trace ID`" + ("." if full_ids else " (whole ids: `--full-ids`)."))


@cli.command("trace")
@click.argument("trace_id", metavar="ID", callback=lambda ctx, param, value: _options.trace_id(value))
@_options.jaeger_option
def trace_command(trace_id: str, jaeger_url: str) -> None:
    """Render one trace from Jaeger as a span tree."""
    try:
        spans = JaegerClient(jaeger_url).trace(trace_id)
    except JaegerError as exc:
        raise CliError(str(exc)) from None
    _print_traces(group_traces(spans), title=f"Trace {trace_id}")


# --- replay / diff -----------------------------------------------------------------------

@cli.command(short_help="Turn a recorded run into a pytest regression test.")
@click.argument("source", metavar="TRACE_ID|FILE")
@click.option("--trace", "trace_id", metavar="ID", help="The trace, when FILE holds several.",
              callback=lambda ctx, param, value: None if value is None else _options.trace_id(value))
@click.option("--agent", metavar="NAME", help="Replay this (sub-)agent's run instead of the top one.")
@_options.jaeger_option
@click.option("--real-tools", metavar="MODULE:REGISTRY",
              help="Replay the recorded model turns against your real tools (a tracedagent Registry).")
@click.option("--output-type", metavar="MODULE:NAME",
              help="A typed run's output type, when its trace does not say where it lives.")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path),
              help="The test to write (default tests/test_replay_<agent>.py); the recording goes beside it.")
def replay(source: str, trace_id: str | None, agent: str | None, jaeger_url: str, real_tools: str | None,
           output_type: str | None, out: Path | None) -> None:
    """Write a pytest file that replays a recorded run: its model turns played back, its tools
    stubbed with their recorded results (or --real-tools), checked step by step.

    SOURCE is an OTLP/JSON file (`demo --out`) or a trace id in Jaeger. The run must have been
    recorded with content capture on (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true).
    """
    try:
        recording = _replay_cmd.load_recording(source, trace_id=trace_id, agent=agent, jaeger=jaeger_url)
        out = out or _replay_cmd.default_test_path(recording)
        data = _replay_cmd.write_test(recording, out, real_tools=real_tools, output_type=output_type)
    except ReplayError as exc:
        raise CliError(str(exc)) from None
    _say(f"Wrote {out} and {data}: the run of {recording.agent} ({recording.stop_reason}, "
         f"{recording.step_count} steps). Run it with `python -m pytest {out}`.")


@cli.command(short_help="Show where two runs of one task diverged.")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option("--file", "file", type=click.Path(dir_okay=False, path_type=Path),
              help="Look the trace ids A and B up in this OTLP/JSON file, not in Jaeger.")
@_options.jaeger_option
def diff(a: str, b: str, file: Path | None, jaeger_url: str) -> None:
    """Two runs side by side: stop reasons, steps, tokens, cost, tools, and the first step
    at which they differ. A and B are trace ids (in Jaeger, or in --file) or OTLP/JSON files."""
    try:
        runs = [_replay_cmd.load_recording(str(file) if file else x, trace_id=x if file else None, agent=None,
                                           jaeger=jaeger_url, require_content=False) for x in (a, b)]
    except ReplayError as exc:
        raise CliError(str(exc)) from None
    _console.print(_replay_cmd.diff_view(*runs))


# --- doctor ------------------------------------------------------------------------------

@cli.command(short_help="Check that the collector, Jaeger, Prometheus and Alertmanager answer.")
@_options.otlp_options
@click.option("--collector-health", metavar="URL", envvar=N.ENV_COLLECTOR_HEALTH_URL,
              default=N.DEFAULT_COLLECTOR_HEALTH_URL, show_default=True, callback=_options.url,
              help=f"The collector's health_check extension (env {N.ENV_COLLECTOR_HEALTH_URL}).")
@_options.jaeger_option
@click.option("--prometheus", "prometheus_url", metavar="URL", envvar=N.ENV_PROMETHEUS_URL,
              default=N.DEFAULT_PROMETHEUS_URL, show_default=True, callback=_options.url,
              help=f"Prometheus (env {N.ENV_PROMETHEUS_URL}).")
@click.option("--alertmanager", "alertmanager_url", metavar="URL", envvar=N.ENV_ALERTMANAGER_URL,
              default=N.DEFAULT_ALERTMANAGER_URL, show_default=True, callback=_options.url,
              help=f"Alertmanager (env {N.ENV_ALERTMANAGER_URL}).")
@click.option("--temporal", envvar=N.ENV_TEMPORAL_ADDRESS, default=None, metavar="HOST:PORT",
              help=f"Temporal's frontend, checked only when named (env {N.ENV_TEMPORAL_ADDRESS}).")
@click.option("--timeout", type=click.FloatRange(0.1, 60), default=N.DOCTOR_TIMEOUT, show_default=True,
              metavar="SECONDS", help="How long each check may take (they all run at once).")
def doctor(otlp_endpoint: str | None, protocol: str | None, collector_health: str, jaeger_url: str,
           prometheus_url: str, alertmanager_url: str, temporal: str | None, timeout: float) -> None:
    """Check that every endpoint the telemetry goes to answers; say how to start what does not.

    The OTLP endpoints are the ones `tracedagent.configure()` would export to (from --otlp and
    --protocol, else OTEL_EXPORTER_OTLP_*); with none named, both local defaults (gRPC 4317,
    HTTP 4318) are checked. Exit status 0 when everything is reachable, 1 otherwise.
    """
    try:
        checks = _doctor.plan(otlp=otlp_endpoint, protocol=protocol, collector_health=collector_health,
                              jaeger=jaeger_url, prometheus=prometheus_url, alertmanager=alertmanager_url,
                              temporal=temporal)
    except ValueError as exc:  # a variable's OTLP endpoint that is not a URL (the options were checked)
        raise CliError(str(exc)) from None
    started = time.perf_counter()
    outcomes = _doctor.run(checks, timeout=timeout)
    seconds = time.perf_counter() - started
    _console.print(_doctor.table(checks, outcomes))
    if temporal:
        for line in _doctor.temporal_queries(temporal):
            _console.print(line, markup=False, highlight=False, soft_wrap=True)
    down = sum(not outcome.reachable for outcome in outcomes)
    if not down:
        _say(f"All {len(checks)} endpoints are reachable ({seconds:.1f} s).")
        return
    _say(f"{down} of {len(checks)} endpoints unreachable ({seconds:.1f} s). Start the local stack with "
         f"{start_the_stack()}.")
    sys.exit(1)


cli.add_command(_stack.stack)
cli.add_command(_local_cmd.local_group)
cli.add_command(_eval_cmd.eval_group)
_eval_cmd.eval_group.add_command(_eval_demo.demo_cmd)  # `eval demo`: `eval run` on the shipped dataset
