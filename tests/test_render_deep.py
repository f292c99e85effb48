"""A trace of one long parent chain (or a cycle of parent ids) is drawn in time and output that
grow with its spans, not with its spans times its depth (#30 item 6: 20,000 spans took 57 s).

Nothing is timed: what is asserted is the output, which before held a line per span, each
indented by a guide per level above it - 20,000 lines of up to 80,000 characters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracedagent._cli import _main as _cli
from tracedagent._cli._render import MAX_TREE_DEPTH

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
T0_NS = 1_700_000_000_000_000_000


def chain_file(tmp_path: Path, n: int, *, cycle: bool = False) -> Path:
    spans = [{"traceId": TRACE_ID, "spanId": f"{i + 1:016x}", **({"parentSpanId": f"{i:016x}"} if i else {}),
              "name": f"span {i}", "startTimeUnixNano": str(T0_NS + i), "endTimeUnixNano": str(T0_NS + 10_000)}
             for i in range(n)]
    if cycle:
        spans[0]["parentSpanId"] = f"{n:016x}"  # the last span is the first's parent
    path = tmp_path / "chain.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    return path


@pytest.mark.parametrize("n, cycle", [(20_000, False), (10_000, True)], ids=["chain", "cycle"])
def test_a_deep_chain_is_drawn_to_the_depth_cap_and_says_what_was_folded(tmp_path, n, cycle):
    result = CliRunner().invoke(_cli.cli, ["show", str(chain_file(tmp_path, n, cycle=cycle))], env={"COLUMNS": "200"})
    assert result.exit_code == 0, repr(result.exception)
    lines = result.output.splitlines()
    drawn = [line for line in lines if "span " in line and " ms" in line]
    assert len(drawn) == MAX_TREE_DEPTH
    words = " ".join(result.output.split())  # the fold's line may wrap on a narrow terminal
    assert words.count("spans deeper: not drawn") == 1
    assert f"... {n - MAX_TREE_DEPTH:,} spans deeper: not drawn" in words
    assert len(result.output) < 20_000  # was quadratic in the depth


def test_a_wide_trace_is_drawn_whole(tmp_path):
    """Breadth is not folded: 2,000 siblings are 2,000 lines, each at depth 1."""
    spans = [{"traceId": TRACE_ID, "spanId": f"{i + 1:016x}", **({"parentSpanId": f"{1:016x}"} if i else {}),
              "name": f"span {i}", "startTimeUnixNano": str(T0_NS + i), "endTimeUnixNano": str(T0_NS + 10_000)}
             for i in range(2000)]
    path = tmp_path / "wide.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    result = CliRunner().invoke(_cli.cli, ["show", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "not drawn" not in result.output
    assert "span 1999" in result.output
