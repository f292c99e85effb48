"""How long a process takes to exit once its work is done, with and without ``configure()``.

Each scenario is a fresh interpreter that sets up telemetry (or not), ends N spans, prints
``done`` and returns from its script. The figure is the wall time from that ``done`` line
to the process having exited: the wait the telemetry adds at exit, plus interpreter
teardown (the "no telemetry" row). "extra" subtracts that row.

Collector states, all on 127.0.0.1:
  down  - nothing listens on the port (connection refused);
  hung  - a socket listens but never accepts or answers (a wedged collector, a firewall);
  up    - a real OTLP receiver (tests/otlp_receivers.py) that answers every export.
"SDK defaults" is the usual hand-written setup: a TracerProvider with a BatchSpanProcessor
around the SDK's OTLP span exporter, default settings, no metrics.

Every child runs without the caller's OTEL_* variables. ``--bsp-queue N`` sets one back,
OTEL_BSP_MAX_QUEUE_SIZE=N, for the configure() rows only: with the SDK's default queue of
2,048, spans created faster than they are exported are dropped when created, long before
exit, so "spans delivered" with the collector up then says nothing about the exit.

    python benchmarks/exit_time.py [--repeat 3] [--no-sdk] [--bsp-queue N]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import textwrap
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from otlp_receivers import GrpcReceiver, HttpReceiver  # noqa: E402

CHILD = textwrap.dedent("""
    import sys
    setup, protocol, endpoint, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    from opentelemetry import trace
    if setup == "configure":
        import tracedagent
        tracedagent.configure(protocol=protocol, endpoint=endpoint)
    elif setup == "sdk":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
            exporter = OTLPSpanExporter(endpoint=endpoint)
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            exporter = OTLPSpanExporter(endpoint=endpoint + "/v1/traces")
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("exit-time-benchmark")
    for i in range(count):
        tracer.start_span("work", attributes={"i": i}).end()
    print("done", flush=True)
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def collector(state: str, protocol: str) -> Iterator[tuple[str, object]]:
    """Yield the endpoint for a collector in ``state`` (and the receiver, when up)."""
    if state == "down":
        yield f"http://127.0.0.1:{free_port()}", None
    elif state == "hung":
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)  # never accepted: connections stall
            yield f"http://127.0.0.1:{listener.getsockname()[1]}", None
    else:
        with (GrpcReceiver() if protocol == "grpc" else HttpReceiver()) as receiver:
            yield receiver.endpoint, receiver


def exit_wait(setup: str, protocol: str, endpoint: str, count: int,
              bsp_queue: int | None = None) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(ROOT)
    if bsp_queue is not None:
        env["OTEL_BSP_MAX_QUEUE_SIZE"] = str(bsp_queue)
    child = subprocess.Popen([sys.executable, "-c", CHILD, setup, protocol, endpoint, str(count)], cwd=ROOT,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline()
    done = time.perf_counter()
    _, stderr = child.communicate(timeout=300)
    waited = time.perf_counter() - done
    if line.strip() != "done" or child.returncode != 0:
        raise RuntimeError(f"{setup}/{protocol} failed ({child.returncode}): {stderr}")
    return waited, stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs per configure() scenario (median shown)")
    parser.add_argument("--no-sdk", action="store_true", help="skip the slow SDK-defaults rows")
    parser.add_argument("--bsp-queue", type=int, metavar="N",
                        help="OTEL_BSP_MAX_QUEUE_SIZE for the configure() rows (default: the SDK's, 2048)")
    args = parser.parse_args()

    scenarios = [("configure", state, protocol, count, args.repeat)
                 for state in ("down", "hung", "up") for protocol in ("grpc", "http/protobuf")
                 for count in (10, 5000)]
    if not args.no_sdk:
        scenarios += [("sdk", state, protocol, count, 1)
                      for state, counts in (("down", (10, 5000)), ("hung", (10,)))
                      for protocol in ("grpc", "http/protobuf") for count in counts]

    baseline = statistics.median(exit_wait("none", "grpc", "http://127.0.0.1:9", 5000)[0]
                                 for _ in range(args.repeat))
    queue = f"; configure() rows with OTEL_BSP_MAX_QUEUE_SIZE={args.bsp_queue}" if args.bsp_queue else ""
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores; median of {args.repeat} runs "
          f"(SDK-default rows: 1 run){queue}\n")
    print("| telemetry | collector | protocol | pending spans | exit wait (s) | extra (s) | spans delivered (fewest) | "
          "stderr lines |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    print(f"| none | - | - | 5000 | {baseline:.2f} | 0.00 | - | 0 |")
    for setup, state, protocol, count, repeat in scenarios:
        waits, delivered, lines = [], [], 0
        for _ in range(repeat):
            with ExitStack() as stack:
                endpoint, receiver = stack.enter_context(collector(state, protocol))
                waited, stderr = exit_wait(setup, protocol, endpoint, count,
                                           args.bsp_queue if setup == "configure" else None)
                waits.append(waited)
                lines = len(stderr.splitlines())
                if receiver is not None:
                    delivered.append(len(receiver.spans()))  # type: ignore[attr-defined]
        wait = statistics.median(waits)
        label = "configure()" if setup == "configure" else "SDK defaults"
        fewest = min(delivered) if delivered else "-"
        print(f"| {label} | {state} | {protocol} | {count} | {wait:.2f} | {wait - baseline:.2f} | {fewest} | "
              f"{lines} |", flush=True)


if __name__ == "__main__":
    main()
