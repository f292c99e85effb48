"""Weaver live-check of an evaluation: the grade spans, their ``gen_ai.evaluation.result`` span
events and log records, and the evaluation metrics, as a user's program exports them over OTLP,
checked against the registry (semconv/) with OpenTelemetry's v1.41.1: no violation.

Needs ``../shared`` (Weaver and the conventions) like tests/test_semconv.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from _shared import ROOT
from test_semconv import _advice, registry, run_live_check, violations  # noqa: F401 - registry: the fixture
from tracedagent._core import _names as N

PROGRAM = Path(__file__).parent / "_evals_telemetry_program.py"


@pytest.fixture(scope="module")
def evaluation(registry, tmp_path_factory) -> dict[str, Any]:  # noqa: F811
    # the script's own folder comes first on its sys.path, not the checkout: name the checkout
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = run_live_check(registry, tmp_path_factory.mktemp("live-check-evals"), [], env,
                            program=[sys.executable, str(PROGRAM)])
    return {**result, "figures": json.loads(result["demo"].strip().splitlines()[-1])}


def _samples(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [s[kind] for s in report["samples"] if kind in s]


def test_live_check_finds_no_violation_in_an_evaluation(evaluation):
    assert violations(evaluation["report"]) == {}
    assert evaluation["returncode"] == 0, evaluation["stderr"][-2000:]


def test_live_check_saw_every_grade_as_a_span_an_event_and_a_log_record(evaluation):
    figures = evaluation["figures"]
    assert figures == {"trials": 4, "grades": 4 * 7, "pass_rate": 0.0}  # broken fails every case
    spans = _samples(evaluation["report"], "span")
    grade_spans = [s for s in spans if s["name"].startswith(N.EVALUATION_SPAN_PREFIX + " ")]
    assert len(grade_spans) == figures["grades"]
    assert {s["name"] for s in grade_spans} == {f"evaluate {g}" for g in (
        "answered", "output_contains", "trajectory_contains", "no_failed_calls", "steps_under", "tone", "broken")}
    events = [e for s in grade_spans for e in s.get("span_events", []) if e["name"] == N.EVALUATION_RESULT_EVENT]
    assert len(events) == figures["grades"]
    seen = {a["name"] for s in grade_spans for a in s["attributes"]}
    assert {N.GEN_AI_EVALUATION_NAME, N.GEN_AI_EVALUATION_SCORE_VALUE, N.GEN_AI_EVALUATION_SCORE_LABEL,
            N.GEN_AI_EVALUATION_EXPLANATION, N.EVALUATION_PASSED, N.EVALUATION_THRESHOLD, N.ERROR_TYPE} <= seen
    logs = [r for r in _samples(evaluation["report"], "log") if r.get("event_name") == N.EVALUATION_RESULT_EVENT]
    assert len(logs) == figures["grades"]
    assert all(r["trace_id"] and r["span_id"] for r in logs)  # in the evaluation span's context
    metrics = {m["name"] for m in _samples(evaluation["report"], "metric")}
    assert {N.METRIC_EVALUATION_GRADES, N.METRIC_EVALUATION_SCORE} <= metrics
