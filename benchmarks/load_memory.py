"""Memory of ``tracedagent demo`` in load mode: does it stay flat as the run count grows?

docs/cli.md promises that load mode runs in constant memory: it streams every trace to its
file and keeps only the counters it prints. This script checks that promise with figures.
For each run count it starts a fresh interpreter that runs the demo in-process
(``tracedagent demo --runs N --pace 0``, no collector) and reports:

  peak RSS         - the child's maximum resident set size (``getrusage``), in MiB;
  tracemalloc peak - the peak of Python allocations, from a second child with tracemalloc
                     on (tracemalloc's own bookkeeping would inflate the first child's RSS);
  per run          - the growth of each figure from the smallest to the largest run count,
                     divided by the extra runs: about zero when memory is flat.

Then the ratio of each figure between the largest and the smallest run count (1.00 = flat).
It prints figures and asserts nothing.

    python benchmarks/load_memory.py [--runs 1000 20000] [--concurrency 1] [--no-tracemalloc]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json, resource, sys, tracemalloc
    runs, concurrency, out, traced = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    from tracedagent._cli._main import cli
    if traced:
        tracemalloc.start()
    cli.main(["demo", "--runs", runs, "--concurrency", concurrency, "--pace", "0", "--out", out],
             standalone_mode=False)
    figures = {"max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
    if traced:
        figures["traced_peak"] = tracemalloc.get_traced_memory()[1]
    print("FIGURES " + json.dumps(figures))
""")


def measure(runs: int, concurrency: int, *, traced: bool) -> dict[str, int]:
    """One fresh interpreter running the demo in load mode; its figures."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}  # no collector
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run([sys.executable, "-c", CHILD, str(runs), str(concurrency),
                               str(Path(scratch) / "load.otlp.json"), "1" if traced else "0"],
                              cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    line = next(line for line in done.stdout.splitlines() if line.startswith("FIGURES "))
    return json.loads(line.removeprefix("FIGURES "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1000, 20000], metavar="N",
                        help="run counts to compare (default: 1000 20000)")
    parser.add_argument("--concurrency", type=int, default=1, metavar="K", help="runs at a time (default: 1)")
    parser.add_argument("--no-tracemalloc", action="store_true",
                        help="skip the tracemalloc children (they run about three times slower)")
    args = parser.parse_args()
    counts = sorted(set(args.runs))
    if len(counts) < 2 or counts[0] < 1:
        parser.error("give at least two different positive run counts")

    print(f"tracedagent demo --runs N --pace 0 --concurrency {args.concurrency}, Python {sys.version.split()[0]}")
    print(f"{'runs':>8}  {'peak RSS':>10}  {'tracemalloc peak':>17}")
    rss: dict[int, float] = {}
    traced: dict[int, float] = {}
    for runs in counts:
        rss[runs] = measure(runs, args.concurrency, traced=False)["max_rss_kib"] / 1024
        if not args.no_tracemalloc:
            traced[runs] = measure(runs, args.concurrency, traced=True)["traced_peak"] / 2**20
        shown = f"{traced[runs]:>13.1f} MiB" if runs in traced else f"{'-':>17}"
        print(f"{runs:>8,}  {rss[runs]:>6.1f} MiB  {shown}", flush=True)

    low, high = counts[0], counts[-1]
    for name, figures in (("peak RSS", rss), ("tracemalloc peak", traced)):
        if figures:
            per_run = (figures[high] - figures[low]) * 2**20 / (high - low)
            print(f"{name}: {high:,} runs / {low:,} runs = {figures[high] / figures[low]:.2f}; "
                  f"{per_run:,.0f} bytes per extra run")


if __name__ == "__main__":
    main()
