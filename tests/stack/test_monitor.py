"""Jaeger's Monitor tab (service performance monitoring) for short-lived agent processes.

Two `tracedagent demo` processes of one service, a few seconds each, the way a user tries
the stack out: their spans become span metrics in the collector, Prometheus records the
series Jaeger reads (collector/spm_rules.yml), and Jaeger's metrics API - what the Monitor
tab draws - returns latencies, call rates and error rates for every operation.

tracedagent's spans are INTERNAL (runs, steps, tools) and CLIENT (model calls); the tab
opens on Span Kind "Server", where this service has nothing.
"""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass

import pytest
import yaml

from tracedagent import Stop
from tracedagent._cli._demo import SCENARIOS

from ._stack import JAEGER, OTLP_GRPC, ROOT, eventually, get_json, prom_query, tracedagent

RUNS_PER_DEMO = len(SCENARIOS)  # the demo runs each scenario once
RUN_SPANS_PER_DEMO = sum(len(s.agents()) for s in SCENARIOS)  # a team's sub-agents are runs too


def jaeger_metrics(name: str, service: str, span_kind: str = "internal", *, by_operation: bool = True,
                   **params: object) -> dict[str, float]:
    """The newest point of each operation (or of the service) from Jaeger's /api/metrics/NAME,
    asked the way the Monitor tab asks: the last 5 minutes, rates over 10 minutes."""
    query = {"service": service, "spanKind": span_kind, "groupByOperation": str(by_operation).lower(),
             "lookback": 5 * 60_000, "step": 5_000, "ratePer": 10 * 60_000, **params}
    newest = {}
    for metric in get_json(f"{JAEGER}/api/metrics/{name}", query)["metrics"] or []:
        labels = {label["name"]: label["value"] for label in metric["labels"]}
        if metric["metricPoints"]:  # Jaeger writes NaN as the string "NaN"
            newest[labels.get("operation", service)] = float(metric["metricPoints"][-1]["gaugeValue"]["doubleValue"])
    return newest


def numbers(values: dict[str, float]) -> dict[str, float]:
    return {key: value for key, value in values.items() if not math.isnan(value)}


def run_demo(service: str, tmp_path_factory) -> None:
    out = tmp_path_factory.mktemp("demo") / "runs.otlp.json"
    result = tracedagent("demo", "--otlp", OTLP_GRPC, "--service", service, "--out", out, "--pace", "0.5")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert re.search(rf"^{RUNS_PER_DEMO} runs in ", result.stdout, re.M), result.stdout[-500:]


def raw_span_metrics(service: str) -> tuple[int, float]:
    """Prometheus' span-metric call series of the service as the collector exports them:
    how many series, and how many invoke_agent calls they count."""
    series = prom_query(f'traces_span_metrics_calls_total{{service_name="{service}"}}')
    runs = sum(float(s["value"][1]) for s in series if s["metric"]["span_name"].startswith("invoke_agent "))
    return len(series), runs


RUN_OPERATIONS = {f"invoke_agent {a.name}" for s in SCENARIOS for a in s.agents()}


@dataclass
class Service:
    name: str
    series_after_first_demo: int = 0


@pytest.fixture(scope="module")
def one_demo(stack_up, tmp_path_factory) -> Service:
    service = Service(f"tracedagent-spm-{uuid.uuid4().hex[:8]}")
    run_demo(service.name, tmp_path_factory)
    return service


@pytest.fixture(scope="module")
def two_demos(one_demo, tmp_path_factory) -> Service:
    """The second demo starts once Prometheus holds the first one's span metrics whole."""
    count, _ = eventually("the first demo's span metrics in Prometheus",
                          lambda: (found := raw_span_metrics(one_demo.name))[1] == RUN_SPANS_PER_DEMO and found)
    one_demo.series_after_first_demo = count
    run_demo(one_demo.name, tmp_path_factory)
    return one_demo


def test_the_first_short_process_already_has_latencies(one_demo):
    # A series that is born at its final counts is read from 0 (spm_rules.yml), so even the
    # first, short-lived process of a service has latencies, not NaN.
    latencies = eventually("a P95 latency for every run operation", lambda: (
        found := numbers(jaeger_metrics("latencies", one_demo.name, quantile=0.95))).keys() >= RUN_OPERATIONS
        and found)
    assert all(value > 0 for value in latencies.values()), latencies
    service_level = eventually("the service's P95 latency (the tab's chart)", lambda: numbers(
        jaeger_metrics("latencies", one_demo.name, by_operation=False, quantile=0.95)))
    assert service_level[one_demo.name] > 0


def test_a_second_process_adds_to_the_same_series(two_demos):
    # Span metrics are keyed on the service, not on the process: the second demo counts into
    # the series of the first instead of starting its own.
    count, runs = eventually("both demos' runs counted in Prometheus", lambda: (
        found := raw_span_metrics(two_demos.name))[1] == 2 * RUN_SPANS_PER_DEMO and found)
    assert count == two_demos.series_after_first_demo
    series = prom_query(f'traces_span_metrics_calls_total{{service_name="{two_demos.name}"}}')
    assert {s["metric"].get("instance") for s in series} == {"127.0.0.1:8889"}, "no process instance on span metrics"

    latencies = numbers(jaeger_metrics("latencies", two_demos.name, quantile=0.95))
    assert latencies.keys() >= RUN_OPERATIONS, latencies
    calls = numbers(jaeger_metrics("calls", two_demos.name))
    assert all(calls[operation] > 0 for operation in RUN_OPERATIONS), calls


def test_the_error_rate_is_zero_for_operations_without_errors(two_demos):
    errors = jaeger_metrics("errors", two_demos.name)
    calls = jaeger_metrics("calls", two_demos.name)
    # Every operation with calls has an error rate - not "No Data" - and it is exact: each
    # agent's runs all answer (0) or all fail (1).
    assert errors.keys() == calls.keys()
    assert {op: errors[op] for op in RUN_OPERATIONS} == {
        f"invoke_agent {a.name}": 0.0 if a.stops_with is Stop.ANSWERED else 1.0 for s in SCENARIOS for a in s.agents()}
    # Steps do not fail, but for walked-away's one step, which its reader cancelled (one of the
    # demo's ~46 steps): the rate is that share, never 0 and never more.
    assert 0.0 < errors["step"] <= 0.05


def test_the_service_shows_under_span_kinds_internal_and_client_not_server(two_demos):
    assert jaeger_metrics("calls", two_demos.name, "server") == {}
    assert numbers(jaeger_metrics("calls", two_demos.name, "internal")).keys() >= RUN_OPERATIONS | {"step"}
    assert numbers(jaeger_metrics("calls", two_demos.name, "client")).keys() == {"chat fake-model"}


def go_duration_ms(text: str) -> float:
    """'1.5m' -> 90000.0: the Go durations of the collector's bucket list, in milliseconds."""
    number, unit = re.fullmatch(r"([\d.]+)(ms|s|m)", text).groups()
    return float(number) * {"ms": 1, "s": 1_000, "m": 60_000}[unit]


def test_the_configured_histogram_buckets_reach_prometheus(two_demos):
    config = yaml.safe_load((ROOT / "collector" / "otelcol.yaml").read_text())
    buckets = config["connectors"]["span_metrics"]["histogram"]["explicit"]["buckets"]
    expected = sorted(go_duration_ms(b) for b in buckets) + [math.inf]
    found = prom_query(f'count by (le) (spm:traces_span_metrics_duration_milliseconds_bucket{{service_name="{two_demos.name}"}})')
    assert sorted(float(r["metric"]["le"]) for r in found) == expected
    assert expected[-2] >= 30 * 60_000 and expected[0] <= 1, "from a millisecond to half an hour"
