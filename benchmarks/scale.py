"""Throughput and memory of each tier of the scale stack (docs/scale.md), and the sizing table.

Needs the scale stack running (`make stack-scale-up`); it sends to the gateway on 24317.

Two measurements:

  1. The pipeline. Agent processes (--workers, each its own OTLP pipeline, like agent
     processes in production) make --runs runs with FakeModel, a realistic mix: --answered
     percent answer after one tool call, the rest stop on a step budget after three. Every
     tier's spans in and out come from its own metrics (otelcol_receiver_accepted_spans,
     otelcol_exporter_sent_spans); its CPU time and memory from /proc. On one shared 2-core
     machine the agents and all tiers compete for the same cores, so the spans/s a tier
     SAW is bounded by the generator; what carries over to a bigger machine is the CPU time
     a tier spends per 1,000 spans, from which "spans/s per core" follows.
  2. The store. The ingester is stopped, --drain runs that all keep (step-budget stops)
     go into Kafka, the ingester starts again, and the time it takes to write them all to
     Cassandra gives the store tier's spans/s on its own (ingester + Cassandra).

Memory: each process's resident set (VmRSS) before, and the highest seen while it worked.
A sampler holds every span for decision_wait; its growth over the spans it held gives the
bytes per held span, which sizes a sampler's memory for a given rate.

The sizing table at the end is computed from these figures only.
Run: python benchmarks/scale.py [--runs 8000] [--workers 2] [--answered 90] [--drain 1500]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from tracedagent._core._deadline import Deadline

ROOT = Path(__file__).resolve().parent.parent
SCALE_SH = ROOT / "scripts" / "scale.sh"
RUN_DIR = Path.home() / ".cache" / "tracedagent" / "scale" / "run"
GATEWAY = "http://127.0.0.1:24317"
METRICS = {
    "gateway": "http://127.0.0.1:24888/metrics",
    "sampler-1": "http://127.0.0.1:24881/metrics",
    "sampler-2": "http://127.0.0.1:24882/metrics",
    "jaeger-ingester": "http://127.0.0.1:24883/metrics",
}
TIERS = ["gateway", "sampler-1", "sampler-2", "kafka", "jaeger-ingester", "cassandra", "jaeger-query"]
DECISION_WAIT = 10.0      # sampler.yaml's default
CLK_TCK = 100


# --- the agents ---------------------------------------------------------------------------

def agent_worker(args: tuple[int, int, int], results) -> None:
    """Make ``runs`` runs in this process; puts ``(seed, spans they made)`` on ``results``."""
    runs, answered_percent, seed = args
    from tracedagent import Agent, Budget, Registry, configure, tool
    from tracedagent.testing import FakeModel, tool_call

    @tool
    def lookup(n: int) -> str:
        """Look an order up.

        Args:
            n: The order number.
        """
        return f"order {n}: shipped"

    telemetry = configure(service_name="tracedagent-scale-bench", endpoint=GATEWAY, protocol="grpc",
                          metrics=False, set_global=False)
    registry = Registry([lookup])
    spans = 0
    for i in range(runs):
        if (i * 7919 + seed) % 100 < answered_percent:
            model, budget = FakeModel([tool_call("lookup", {"n": i}), "It shipped."]), Budget()
        else:
            model, budget = FakeModel([tool_call("lookup", {"n": i + k}) for k in range(10)]), Budget(max_steps=3)
        run = Agent(model, registry, budget=budget, name="bench", **telemetry.providers).run("where is my order?")
        spans += 1 + 2 * run.step_count + sum(len(s.tool_results) for s in run.steps)
        if i % 50 == 49:
            telemetry.force_flush(timeout=30)   # the SDK's queue (2,048 spans) never overflows
    telemetry.force_flush(timeout=30)
    telemetry.shutdown(timeout=10)
    results.put((seed, spans))


def make_runs(runs: int, workers: int, answered_percent: int) -> int:
    """``runs`` runs from ``workers`` agent processes (spawned: each a fresh interpreter with its
    own OTLP pipeline, as in production); the spans they made. Plain processes and a queue rather
    than a Pool: a Pool waits forever for the result of a worker that died, so a process that
    dies or outlives the benchmark's deadline ends the benchmark with a message instead."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    per = [runs // workers + (1 if w < runs % workers else 0) for w in range(workers)]
    processes = [context.Process(target=agent_worker, args=((n, answered_percent, w), results), daemon=True)
                 for w, n in enumerate(per)]
    for process in processes:
        process.start()
    spans: dict[int, int] = {}   # by worker; a worker is its seed
    try:
        while len(spans) < workers:
            try:
                worker, made = results.get(timeout=1)
                spans[worker] = made
                continue
            except queue.Empty:
                pass
            # A result is in the pipe before its process exits (the queue's feeder is joined at
            # exit), so one that exited and sent none after a last look never will. One that
            # crashed on its way out after sending is not a failure: its runs were made.
            dead = [w for w, p in enumerate(processes) if w not in spans and p.exitcode is not None]
            if dead and not _one_more(results, spans):
                fail(f"agent process {dead[0]} exited with code {processes[dead[0]].exitcode} before reporting its runs")
            if DEADLINE.passed():
                fail(f"{workers - len(spans)} of {workers} agent processes had not finished their runs")
    finally:
        exited_by = time.monotonic() + 15
        for process in processes:
            process.join(timeout=max(0.0, exited_by - time.monotonic()))
            if process.is_alive():   # SIGKILL: one stuck with a Python SIGTERM handler may never run it
                progress(f"agent process {process.pid} had not exited 15 s after its runs; killing it")
                process.kill()
                process.join()
    return sum(spans.values())


def _one_more(results: Any, spans: dict[int, int]) -> bool:
    """Whether a result came within 2 s more (it was on its way as its process exited)."""
    try:
        worker, made = results.get(timeout=2)
    except queue.Empty:
        return False
    spans[worker] = made
    return True


# --- what the tiers report ----------------------------------------------------------------

def pid(service: str) -> int:
    return int((RUN_DIR / f"{service}.pid").read_text().split()[0])


def cpu_seconds(service: str) -> float:
    fields = Path(f"/proc/{pid(service)}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK    # utime + stime


def rss_mib(service: str) -> float:
    status = Path(f"/proc/{pid(service)}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024


def metric(service: str, name: str, **labels: str) -> float:
    """Sum of a counter's or gauge's samples with these labels (the collectors' releases differ
    in whether counters end in _total)."""
    with urllib.request.urlopen(METRICS[service], timeout=5) as response:
        text = response.read().decode()
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"{name}(?:_total)?(?:{{(.*)}})? (\S+)$", line)
        if match and all(f'{k}="{v}"' in (match.group(1) or "") for k, v in labels.items()):
            total += float(match.group(2))
    return total


def counters() -> dict[str, float]:
    return {
        "gateway.in": metric("gateway", "otelcol_receiver_accepted_spans"),
        "samplers.in": sum(metric(s, "otelcol_receiver_accepted_spans") for s in ("sampler-1", "sampler-2")),
        "samplers.kept": sum(metric(s, "otelcol_exporter_sent_spans", exporter="kafka")
                             for s in ("sampler-1", "sampler-2")),
        "ingester.stored": metric("jaeger-ingester", "otelcol_exporter_sent_spans"),
    }


def kept_by_samplers() -> float:
    return sum(metric(s, "otelcol_exporter_sent_spans", exporter="kafka") for s in ("sampler-1", "sampler-2"))


def stored_by_ingester() -> float:
    try:
        return metric("jaeger-ingester", "otelcol_exporter_sent_spans")
    except OSError:
        return 0.0      # starting: its metrics endpoint is not up yet


HEAP = "otelcol_process_runtime_heap_alloc_bytes"
SAMPLERS = ("sampler-1", "sampler-2")


class PeakMemory:
    """Samples every tier's RSS, and the samplers' live Go heap, every 0.25 s in a thread; keeps
    the highest. The heap is what grows with the spans held: a Go process's RSS stays at its
    high-water mark, so it shows the largest load the process ever had, not this one."""

    def __init__(self) -> None:
        self.peak = {tier: rss_mib(tier) for tier in TIERS}
        self.heap0 = {s: metric(s, HEAP) for s in SAMPLERS}
        self.heap = dict(self.heap0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.25):
            for tier in TIERS:
                try:
                    self.peak[tier] = max(self.peak[tier], rss_mib(tier))
                except (OSError, ValueError):
                    pass      # a tier being restarted
            for sampler in SAMPLERS:
                try:
                    self.heap[sampler] = max(self.heap[sampler], metric(sampler, HEAP))
                except OSError:
                    pass

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


_T0 = time.monotonic()


def progress(message: str) -> None:
    """A line on stderr with the seconds since the start: what a run that takes too long was doing."""
    print(f"[{time.monotonic() - _T0:6.1f} s] {message}", file=sys.stderr, flush=True)


DEADLINE = Deadline.after(3600.0)
"""The whole benchmark's time (--within): every wait below ends by it, so a stack that stops
answering fails the benchmark with what it was waiting for, never a hang."""


def fail(message: str) -> None:
    progress(f"failed: {message}")
    sys.exit(f"scale.py: {message}")


def wait_until(condition, what: str, timeout: float) -> bool:
    """Poll ``condition()`` every 0.5 s until it holds; False once ``timeout`` passes (the figures
    then show the shortfall). The benchmark's deadline passing fails it."""
    end = time.monotonic() + timeout
    while not condition():
        if DEADLINE.passed():
            fail(f"the benchmark's deadline passed waiting for {what}")
        if time.monotonic() >= end:
            progress(f"gave up waiting for {what} after {timeout:.0f} s")
            return False
        time.sleep(0.5)
    return True


def wait_until_stable(read, what: str, quiet: float = 3.0, timeout: float = 300.0) -> float:
    """Poll ``read()`` until it has not changed for ``quiet`` seconds; the time it last changed."""
    last, changed = read(), time.monotonic()
    end = min(time.monotonic() + timeout, DEADLINE.at)
    while time.monotonic() < end:
        time.sleep(0.5)
        value = read()
        if value != last:
            last, changed = value, time.monotonic()
        elif time.monotonic() - changed >= quiet:
            return changed
    fail(f"{what} did not settle within {timeout:.0f} s (or the benchmark's deadline)")


def scale(*args: str) -> None:
    try:
        done = subprocess.run([str(SCALE_SH), *args], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        fail(f"scale.sh {' '.join(args)} did not finish in 300 s")
    if done.returncode:
        fail(f"scale.sh {' '.join(args)} failed:\n{done.stderr}")


# --- the two measurements -----------------------------------------------------------------

def pipeline(runs: int, workers: int, answered: int) -> dict:
    before, cpu0, rss0 = counters(), {t: cpu_seconds(t) for t in TIERS}, {t: rss_mib(t) for t in TIERS}
    with PeakMemory() as memory:
        start = time.monotonic()
        progress(f"pipeline: {runs} runs from {workers} agent processes")
        made = make_runs(runs, workers, answered)
        sent = time.monotonic() - start
        progress(f"pipeline: {made} spans sent in {sent:.1f} s; waiting for the samplers' decisions")
        time.sleep(DECISION_WAIT + 2)                        # every trace decided by now
        wait_until_stable(kept_by_samplers, "the samplers")
        kept = kept_by_samplers() - before["samplers.kept"]
        progress(f"pipeline: samplers kept {kept:.0f}; waiting for the ingester to store them")
        wait_until(lambda: stored_by_ingester() - before["ingester.stored"] >= kept,
                   "the ingester to store every span kept", timeout=120)
        progress(f"pipeline: ingester stored {stored_by_ingester() - before['ingester.stored']:.0f}")
    after, cpu1 = counters(), {t: cpu_seconds(t) for t in TIERS}
    delta = {k: after[k] - before[k] for k in after}
    return {"made": made, "seconds": sent, "delta": delta, "cpu": {t: cpu1[t] - cpu0[t] for t in TIERS},
            "rss0": rss0, "peak": memory.peak, "heap0": memory.heap0, "heap": memory.heap}


def drain(runs: int, workers: int) -> dict:
    """The restarted ingester's counters start at 0; its rate is timed from its first stored span
    to its last, so its own start and the Kafka group join are not counted."""
    progress("store: stopping the ingester")
    scale("stop", "jaeger-ingester")
    try:
        before = kept_by_samplers()
        made = make_runs(runs, workers, answered_percent=0)      # none answer: the samplers keep all
        progress(f"store: {made} spans sent; waiting for the samplers to put them in Kafka")
        wait_until(lambda: kept_by_samplers() - before >= made, "the samplers to put every span in Kafka",
                   timeout=DECISION_WAIT + 60)
        backlog = kept_by_samplers() - before
    finally:
        scale("up")
    progress("store: the ingester started again")
    cpu0 = {t: cpu_seconds(t) for t in ("jaeger-ingester", "cassandra")}
    wait_until(lambda: stored_by_ingester() > 0, "the restarted ingester's first stored span", timeout=120)
    first = stored_by_ingester()
    started = time.monotonic()
    progress(f"store: the ingester's first {first:.0f} stored; waiting for it to catch up")
    done_at = wait_until_stable(stored_by_ingester, "the ingester's catch-up")
    progress("store: caught up")
    stored = stored_by_ingester()
    cpu = {t: cpu_seconds(t) - cpu0[t] for t in cpu0}
    return {"backlog": backlog, "stored": stored, "seconds": done_at - started, "rate": (stored - first) / (done_at - started),
            "cpu": cpu}


# --- report -------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=2, help="agent processes")
    parser.add_argument("--answered", type=int, default=90, help="percent of runs that answer")
    parser.add_argument("--drain", type=int, default=1500, help="runs piled up in Kafka for the store measurement")
    parser.add_argument("--within", type=float, default=3600.0,
                        help="seconds the whole benchmark may take; a wait still going then fails it")
    args = parser.parse_args()
    global DEADLINE
    DEADLINE = Deadline.after(args.within)
    try:
        for tier in TIERS:
            pid(tier)
        counters()
    except (OSError, ValueError) as exc:
        sys.exit(f"the scale stack is not running ({exc}); start it with: make stack-scale-up")

    p = pipeline(args.runs, args.workers, args.answered)
    d = drain(args.drain, args.workers)
    dl, cpu = p["delta"], p["cpu"]
    kept_share = dl["samplers.kept"] / dl["samplers.in"]

    print(f"pipeline: {args.runs} runs ({args.answered}% answered) from {args.workers} agent processes, "
          f"{p['made']} spans in {p['seconds']:.1f} s = {p['made'] / p['seconds']:.0f} spans/s offered")
    print(f"  gateway accepted {dl['gateway.in']:.0f}, samplers accepted {dl['samplers.in']:.0f}, "
          f"kept {dl['samplers.kept']:.0f} ({100 * kept_share:.1f}%), stored {dl['ingester.stored']:.0f}")
    rows = [  # tier, spans it handled, CPU seconds
        ("gateway", dl["gateway.in"], cpu["gateway"]),
        ("samplers (2)", dl["samplers.in"], cpu["sampler-1"] + cpu["sampler-2"]),
        ("kafka", dl["samplers.kept"], cpu["kafka"]),
        ("jaeger-ingester", dl["ingester.stored"], cpu["jaeger-ingester"]),
        ("cassandra", dl["ingester.stored"], cpu["cassandra"]),
    ]
    print(f"\n{'tier':<16} {'spans':>8} {'spans/s seen':>13} {'CPU ms/1k spans':>16} {'spans/s per core':>17}")
    per_core = {}
    for tier, spans, seconds in rows:
        ms = 1000 * seconds / spans * 1000 if spans else float("nan")
        per_core[tier] = 1e6 / ms if spans and ms else float("nan")
        print(f"{tier:<16} {spans:>8.0f} {spans / p['seconds']:>13.0f} {ms:>16.1f} {per_core[tier]:>17.0f}")

    print(f"\nstore on its own: {d['backlog']:.0f} spans held in Kafka while the ingester was stopped; "
          f"{d['stored']:.0f} written to Cassandra in {d['seconds']:.1f} s = {d['rate']:.0f} spans/s "
          f"(ingester {d['cpu']['jaeger-ingester']:.1f} CPU s, cassandra {d['cpu']['cassandra']:.1f} CPU s)")

    print(f"\n{'process':<16} {'RSS idle MiB':>13} {'RSS peak MiB':>13}")
    for tier in TIERS:
        print(f"{tier:<16} {p['rss0'][tier]:>13.0f} {p['peak'][tier]:>13.0f}")
    # Spans one sampler held at once: all it received, if they all came within decision_wait.
    held = dl["samplers.in"] / 2 * min(1.0, DECISION_WAIT / p["seconds"])
    growth = max(p["heap"][s] - p["heap0"][s] for s in SAMPLERS)
    bytes_per_span = growth / held if held else float("nan")
    print(f"sampler memory: ~{held:.0f} spans held per sampler at the peak; live Go heap "
          f"+{growth / 2**20:.0f} MiB = ~{bytes_per_span:.0f} bytes per held span")

    sizing(per_core, kept_share, bytes_per_span, p["rss0"], p["made"] / args.runs)
    return 0


def sizing(per_core: dict, kept_share: float, bytes_per_span: float, rss0: dict, spans_per_run: float) -> None:
    """For M spans/s in total, what each tier needs, at 60% of a core per process (headroom for
    bursts) and with memory for the spans a sampler holds over decision_wait, twice over.
    Cassandra is given in cores (one node or many), from its CPU time per stored span."""
    print(f"\nsizing (from the figures above; {100 * kept_share:.1f}% of spans kept as measured; "
          "60% of a core per process; sampler memory x2 for bursts):")
    print(f"{'spans/s M':>10} {'runs/s':>7} {'gateways':>9} {'samplers':>9} {'MiB/sampler':>12} {'num_traces':>11} "
          f"{'kept/s':>8} {'ingesters':>10} {'cassandra cores':>16}")
    for m in (500, 2_000, 10_000, 50_000, 200_000):
        gateways = max(1, math.ceil(m / (0.6 * per_core["gateway"])))
        samplers = max(2, math.ceil(m / (0.6 * per_core["samplers (2)"])))
        per_sampler = m / samplers
        mib = rss0["sampler-1"] + 2 * per_sampler * DECISION_WAIT * bytes_per_span / 2**20
        traces = math.ceil(2 * per_sampler / spans_per_run * DECISION_WAIT)
        kept = m * kept_share
        ingesters = max(1, math.ceil(kept / (0.6 * per_core["jaeger-ingester"])))
        cassandra = kept / per_core["cassandra"]
        print(f"{m:>10} {m / spans_per_run:>7.0f} {gateways:>9} {samplers:>9} {mib:>12.0f} {traces:>11} "
              f"{kept:>8.0f} {ingesters:>10} {cassandra:>16.1f}")
    print("agent processes: N processes at M/N spans/s each need the SDK's span queue "
          "(OTEL_BSP_MAX_QUEUE_SIZE, default 2048) >= 2 x (M/N) x the export delay (OTEL_BSP_SCHEDULE_DELAY, 5 s)")


if __name__ == "__main__":
    sys.exit(main())
