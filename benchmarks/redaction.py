"""What redaction costs per captured string (it runs only with content capture on).

The default ``Redactor`` on texts a span captures - prose, a stack trace, JSON arguments, a
JSON tool result, a secret-free log of 100 KB - and ``ContentCapture`` turning tool arguments and
a result into their attributes (JSON parsed and walked, secret-named values blanked). Each figure
is the best of ``--repeats`` rounds of ``--number`` calls, in microseconds per call.

    python benchmarks/redaction.py [--repeats 5] [--number 2000]
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracedagent import Redactor  # noqa: E402
from tracedagent._instrumentation._content import ContentCapture  # noqa: E402

PROSE = ("The order A-17 shipped on Monday; ask the task runner for its status, and tell the "
         "customer the SKU is back in stock. ") * 10
TRACE = "\n".join(f'  File "/srv/app/handlers/orders.py", line {n}, in handle\n    return lookup(order_id)'
                  for n in range(20))
ARGUMENTS = {"order_id": "A-17", "note": PROSE[:300], "items": [{"sku": f"SKU-{n}", "qty": n} for n in range(10)]}
RESULT = json.dumps({"rows": [{"id": n, "status": "shipped", "carrier": "UPS", "eta": "2026-12-09"}
                              for n in range(400)]})
LOG = "GET /v1/orders/A-17 200 12ms user=svc region=eu-west-1\n" * 1800


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--number", type=int, default=2000)
    args = parser.parse_args()
    redact, capture = Redactor(), ContentCapture(None, 32768)
    cases = {
        "Redactor, 1 KB prose": lambda: redact(PROSE),
        "Redactor, 2 KB stack trace": lambda: redact(TRACE),
        "Redactor, 1 KB JSON arguments as text": lambda: redact(json.dumps(ARGUMENTS)),
        "Redactor, 30 KB JSON result": lambda: redact(RESULT),
        "Redactor, 100 KB log": lambda: redact(LOG),
        "capture: arguments, an object": lambda: capture.arguments(ARGUMENTS),
        "capture: arguments, raw JSON text": lambda: capture.arguments(json.dumps(ARGUMENTS)),
        "capture: a 30 KB JSON result": lambda: capture.result(RESULT),
    }
    print(f"microseconds per call, best of {args.repeats} x {args.number}:")
    for name, case in cases.items():
        number = max(1, args.number // (20 if "30 KB" in name or "100 KB" in name else 1))
        best = min(timeit.repeat(case, number=number, repeat=args.repeats)) / number
        print(f"  {name:40s} {best * 1e6:10.1f}")


if __name__ == "__main__":
    main()
