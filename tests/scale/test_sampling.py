"""2,000 runs with known stop reasons through the whole scale stack: gateway, load balancer,
two tail samplers, Kafka, the Jaeger ingester, Cassandra, Jaeger's query API."""

from __future__ import annotations

import math
import uuid

import pytest

from scenarios import RETURNED_STOPS
from tracedagent import Stop
from tracedagent._core import _names as N

from ._scale import (ANSWERED_PERCENT, DECISION_WAIT, GATEWAY_METRICS, SAMPLER_TAG, complete, eventually,
                     jaeger_trace, metric_sum, produce, settle, tags)

ANSWERED = 1000
OTHERS = sorted(RETURNED_STOPS - {Stop.ANSWERED})
PER_OTHER = 1000 // len(OTHERS)          # 111 of each of the 9 other stop reasons: 999


@pytest.fixture(scope="module")
def agent() -> str:
    return f"scale-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def runs(telemetry, agent):
    stops = [Stop.ANSWERED] * ANSWERED + [stop for stop in OTHERS for _ in range(PER_OTHER)]
    return produce(telemetry, stops, agent)


@pytest.fixture(scope="module")
def stored(runs):
    """Once every non-answered run is complete in Jaeger (or two minutes passed), the answered
    runs that are there too: the pipeline has drained by then, decisions are made together."""
    missing = settle([r for r in runs if not r.ok], timeout=120 + DECISION_WAIT)
    kept = [r for r in runs if r.ok and jaeger_trace(r.trace_id) is not None]
    return missing, kept


def test_every_run_that_did_not_answer_is_complete_in_jaeger(runs, stored):
    missing, _ = stored
    assert len([r for r in runs if not r.ok]) == PER_OTHER * len(OTHERS)
    assert missing == [], (f"{len(missing)} runs that did not answer are missing or incomplete, e.g. "
                           f"{[(r.stop.value, r.trace_id) for r in missing[:5]]}")


def test_answered_runs_are_kept_at_the_configured_share(stored):
    _, kept = stored
    p = ANSWERED_PERCENT / 100
    mean, sd = ANSWERED * p, math.sqrt(ANSWERED * p * (1 - p))
    # 5 standard deviations: a correct sampler fails this about once in 1.7 million runs.
    assert abs(len(kept) - mean) <= 5 * sd, f"kept {len(kept)} of {ANSWERED} answered runs; expected {mean:.0f} +- {5 * sd:.0f}"
    assert all(complete(r) for r in kept), "a kept answered run is a whole trace, not a fragment"


def test_no_trace_is_split_across_samplers(runs, stored):
    _, kept = stored
    samplers_of_trace = []
    for run in [r for r in runs if not r.ok] + kept:
        trace = jaeger_trace(run.trace_id)
        samplers_of_trace.append({tags(span).get(SAMPLER_TAG) for span in trace["spans"]})
    split = [s for s in samplers_of_trace if len(s) != 1]
    assert split == [], f"{len(split)} traces carry spans from more than one sampler: {split[:3]}"
    used = set().union(*samplers_of_trace)
    assert used == {"sampler-1", "sampler-2"}, f"the balancer used {used}"


def test_span_metrics_count_every_run_before_sampling(runs, service_name, agent):
    """Alerts and dashboards read the gateway's metrics: they count all 2,000 runs, not the kept ones."""
    made = {stop.value: sum(1 for r in runs if r.stop is stop) for stop in {r.stop for r in runs}}

    def counted():
        seen = {stop: metric_sum(GATEWAY_METRICS, "traces_span_metrics_calls_total", service_name=service_name,
                                 span_name=f"{N.OP_INVOKE_AGENT} {agent}", tracedagent_stop_reason=stop) for stop in made}
        return seen if seen == made else None

    eventually(f"span metrics counting {made}", counted, timeout=30)
