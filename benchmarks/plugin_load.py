"""What tracedagent's pytest plugin costs a test run that never uses its fixture (target: under 20 ms).

pytest loads the ``pytest11`` entry point of every installed package in every session, so a
project that merely has tracedagent installed pays for loading ``tracedagent.pytest_plugin``
whether or not a test asks for ``tracedagent_recorder``. Each figure is a fresh interpreter:

  plugin load      - ``import tracedagent.pytest_plugin`` with pytest already imported (what the
                     entry point costs), and which heavy modules it pulled in;
  first fixture use - ``import tracedagent.testing`` afterwards: what the first test asking for
                     the fixture pays, once per process (the OpenTelemetry SDK among it);
  session          - ``pytest`` on one empty test with the plugin and with ``-p no:tracedagent``;
                     the difference is the plugin's share of a whole session (noisier: a session
                     takes hundreds of milliseconds).

Figures only; nothing asserts a time (tests/test_benchmarks.py checks the script runs).

    python benchmarks/plugin_load.py [--repeat 15] [--sessions 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 20.0

_CHILD = r"""
import json, sys, time
import pytest  # pytest is loaded before any plugin
t0 = time.perf_counter()
import tracedagent.pytest_plugin
t1 = time.perf_counter()
heavy = sorted(m for m in ("opentelemetry.sdk", "opentelemetry.trace", "rich", "click", "tracedagent._agent")
               if m in sys.modules)
import tracedagent.testing
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "first_use": t2 - t1, "heavy": heavy}))
"""


def _env() -> dict[str, str]:
    """This checkout's package, whatever an editable install points at; no OTel variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return env


def imports(repeat: int) -> tuple[list[float], list[float], list[str]]:
    loads, first_uses, heavy = [], [], []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=_env(),
                             check=True, timeout=120).stdout
        figures = json.loads(out.strip().splitlines()[-1])
        loads.append(figures["load"] * 1000)
        first_uses.append(figures["first_use"] * 1000)
        heavy = figures["heavy"]
    return loads, first_uses, heavy


def sessions(count: int) -> tuple[list[float], list[float]]:
    """Wall time of ``pytest`` on one empty test, with the plugin and without it, alternating."""
    with_plugin, without = [], []
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "test_empty.py").write_text("def test_nothing():\n    pass\n")
        for _ in range(count):
            for extra, into in (([], with_plugin), (["-p", "no:tracedagent"], without)):
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra,
                                "test_empty.py"], cwd=folder, capture_output=True, env=_env(), check=True,
                               timeout=120)
                into.append((time.perf_counter() - started) * 1000)
    return with_plugin, without


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values):7.2f} ms  (min {min(values):.2f}, max {max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="fresh interpreters for the import figures")
    parser.add_argument("--sessions", type=int, default=3, help="pytest sessions each way (0: skip them)")
    args = parser.parse_args()

    loads, first_uses, heavy = imports(args.repeat)
    print(f"Python {sys.version.split()[0]}, {args.repeat} fresh interpreters each")
    print(f"plugin load        {_spread(loads)}   target < {TARGET_MS:.0f} ms")
    print(f"  modules it pulled in: {', '.join(heavy) if heavy else 'none of the SDK, the API, rich, click or the loop'}")
    print(f"first fixture use  {_spread(first_uses)}   (once per process, only when a test asks for it)")
    if args.sessions:
        with_plugin, without = sessions(args.sessions)
        print(f"pytest session, plugin loaded     {_spread(with_plugin)}")
        print(f"pytest session, -p no:tracedagent {_spread(without)}")
        print(f"  the plugin's share of a session: {statistics.median(with_plugin) - statistics.median(without):+.1f} ms "
              f"(median difference)")


if __name__ == "__main__":
    main()
