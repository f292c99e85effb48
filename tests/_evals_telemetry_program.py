"""An evaluation sent over OTLP as a user's program would send it: ``python THIS ENDPOINT``.

``configure()`` exports spans and metrics; the program sets its own ``LoggerProvider`` (OTLP
logs to the same endpoint), so each grade's ``gen_ai.evaluation.result`` log record is exported
too. Graders that pass, fail, raise and give only a label; a scripted agent that calls a tool.
Prints the report's figures as JSON. No ``attributes=`` of the user's own: those are not the
registry's (Weaver would rightly call them unknown). Used by tests/test_semconv_evals.py (Weaver live-check).
"""

from __future__ import annotations

import json
import sys

from opentelemetry._logs import set_logger_provider
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from tracedagent import Agent, configure, tool
from tracedagent.evals import (Case, Dataset, Grade, GradedRun, answered, grader, no_failed_calls, output_contains,
                               steps_under, trajectory_contains)
from tracedagent.testing import FakeModel, tool_call


@tool
def lookup(order_id: str) -> str:
    """Looks an order up."""
    return f"{order_id}: shipped"


@grader(name="tone")
def tone(run: GradedRun) -> Grade:
    """A grade that is only a label (no score): passed by its own verdict."""
    return Grade(label="polite", passed=True)


@grader(name="broken")
def broken(run: GradedRun) -> bool:
    raise ValueError("this grader always raises")


def main(endpoint: str) -> None:
    telemetry = configure(service_name="tracedagent-evals-live-check", endpoint=endpoint, protocol="grpc")
    logs = LoggerProvider(resource=Resource({"service.name": "tracedagent-evals-live-check"}))
    logs.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint, insecure=True)))
    set_logger_provider(logs)

    def make(case: Case) -> Agent:
        answer = "A1 shipped." if case.name == "good" else "I do not know."
        return Agent(FakeModel([tool_call("lookup", {"order_id": "A1"}), answer]), [lookup], name="shop")

    cases = [Case(task="where is A1?", name="good", expected_output="shipped"),
             Case(task="where is A1, again?", name="bad", expected_output="shipped")]
    graders = [answered(), output_contains(), trajectory_contains(["lookup"]), no_failed_calls(), steps_under(5),
               tone, broken]
    report = Dataset(cases, graders, name="live-check").evaluate(make, repeat=2)
    logs.shutdown()
    telemetry.shutdown(timeout=10)
    grades = sum(len(t.grades) for c in report.cases for t in c.trials)
    print(json.dumps({"trials": len(report.trials), "grades": grades, "pass_rate": report.pass_rate}))


if __name__ == "__main__":
    main(sys.argv[1])
