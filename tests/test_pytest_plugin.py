"""The pytest plugin, tested as a user meets it: whole pytest sessions run by ``pytester``.

Sessions that must start from a pristine OpenTelemetry global state (no provider set yet,
or one the user set first) run in a subprocess: the global providers can be set only
once per process, and this process has set them long ago.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tracedagent
# The plugin imports the testing toolkit only when a test asks for the fixture. Imported here, it
# is in sys.modules before pytester's in-process sessions start: each of those restores
# sys.modules when it ends, and would otherwise drop the toolkit - and the process-wide span
# router it installed in the global provider, which can be set only once - with the first session.
import tracedagent.testing  # noqa: F401

ROOT = Path(tracedagent.__file__).resolve().parents[1]

AGENT = '''
from tracedagent import Agent, Budget, Registry, ToolCall, tool
from tracedagent.testing import FakeModel, tool_call

@tool
def refund(order_id: str) -> str:
    """Refund an order."""
    return "refunded"

def policy(call: ToolCall):
    return "refunds need a human" if call.name == "refund" else None

def make_agent(budget=Budget(), **providers):
    script = [tool_call("refund", {"order_id": "42"}), "a human will review it"]
    return Agent(FakeModel(script), Registry([refund], policy=policy), name="support", budget=budget,
                 **providers)
'''


@pytest.fixture(autouse=True)
def lean_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Child sessions skip hypothesis's plugin, which adds over a second to each session."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest")


@pytest.fixture
def subprocess_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child pytest imports this checkout's tracedagent, whichever one is installed."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def test_fixture_records_agents_with_and_without_providers(pytester: pytest.Pytester):
    pytester.makepyfile(support=AGENT)
    pytester.makepyfile(test_support='''
        from tracedagent import Stop
        from tracedagent.testing import assert_never_executed, assert_requested, assert_stop
        from support import make_agent

        def test_given_the_providers(tracedagent_recorder):
            make_agent(**tracedagent_recorder.providers).run("refund 42")
            assert_stop(tracedagent_recorder, Stop.ANSWERED, steps=2)
            assert_requested(tracedagent_recorder, "refund")
            assert_never_executed(tracedagent_recorder, "refund")
            assert tracedagent_recorder.metric("tracedagent.tool.calls", outcome="denied") == 1

        def test_using_the_global_providers(tracedagent_recorder):
            run = make_agent().run("refund 42")
            assert tracedagent_recorder.only_run().trace_id == run.trace_id
            assert_never_executed(tracedagent_recorder, "refund")
            assert tracedagent_recorder.metric("tracedagent.runs", stop_reason="answered") == 1
    ''')
    pytester.runpytest().assert_outcomes(passed=2)


def test_each_test_gets_a_fresh_recorder(pytester: pytest.Pytester):
    pytester.makepyfile(support=AGENT)
    pytester.makepyfile(test_reset='''
        import pytest
        from support import make_agent

        seen = []

        @pytest.mark.parametrize("i", range(4))
        def test_one_run_each(tracedagent_recorder, i):
            seen.append(tracedagent_recorder)
            make_agent().run("go")
            assert len(tracedagent_recorder.runs()) == 1
            assert tracedagent_recorder.metric("tracedagent.runs") == 1

        def test_recorders_were_distinct_and_are_stopped():
            assert len({id(r) for r in seen}) == 4
            assert not any(r.capturing_global for r in seen)
            assert all(r.spans() == [] for r in seen)
    ''')
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=5)


def test_loading_the_plugin_installs_no_global_provider(pytester: pytest.Pytester, subprocess_env):
    pytester.makepyfile(test_pristine='''
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider

        def test_plugin_is_loaded_but_inert(pytestconfig):
            assert pytestconfig.pluginmanager.has_plugin("tracedagent")
            assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
            assert not isinstance(metrics.get_meter_provider(), MeterProvider)

        def test_the_fixture_installs_them(tracedagent_recorder):
            assert isinstance(trace.get_tracer_provider(), TracerProvider)
            assert isinstance(metrics.get_meter_provider(), MeterProvider)
    ''')
    pytester.runpytest_subprocess("-p", "no:randomly").assert_outcomes(passed=2)


def test_a_users_own_sdk_providers_keep_working(pytester: pytest.Pytester, subprocess_env):
    pytester.makepyfile(support=AGENT)
    pytester.makeconftest('''
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        # the application's telemetry, set up before any test runs
        USER_SPANS = InMemorySpanExporter()
        USER_METRICS = InMemoryMetricReader()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(USER_SPANS))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[USER_METRICS]))
    ''')
    pytester.makepyfile(test_theirs='''
        from opentelemetry import trace
        from conftest import USER_SPANS, USER_METRICS
        from support import make_agent

        def test_both_see_the_run(tracedagent_recorder):
            provider = trace.get_tracer_provider()
            run = make_agent().run("go")
            assert trace.get_tracer_provider() is provider  # theirs, with the router added
            assert tracedagent_recorder.only_run().trace_id == run.trace_id
            assert tracedagent_recorder.metric("tracedagent.runs") == 1
            assert [s.name for s in USER_SPANS.get_finished_spans()][-1] == "invoke_agent support"
            names = [m.name for rm in USER_METRICS.get_metrics_data().resource_metrics
                     for sm in rm.scope_metrics for m in sm.metrics]
            assert "tracedagent.runs" in names
    ''')
    pytester.runpytest_subprocess().assert_outcomes(passed=1)


def test_a_non_sdk_global_provider_is_explained(pytester: pytest.Pytester, subprocess_env):
    pytester.makepyfile(support=AGENT)
    pytester.makeconftest('''
        from opentelemetry import metrics, trace
        trace.set_tracer_provider(trace.NoOpTracerProvider())
        metrics.set_meter_provider(metrics.NoOpMeterProvider())
    ''')
    pytester.makepyfile(test_noop='''
        from support import make_agent

        def test_explicit_providers_still_work(tracedagent_recorder):
            assert not tracedagent_recorder.capturing_global
            make_agent(**tracedagent_recorder.providers).run("go")
            assert tracedagent_recorder.only_run().stop_reason == "answered"
            assert tracedagent_recorder.metric("tracedagent.runs") == 1
    ''')
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1, warnings=2)
    result.stdout.fnmatch_lines(["*GlobalCaptureWarning: tracedagent: the global TracerProvider is a "
                                 "NoOpTracerProvider*pass **recorder.providers to the Agent instead",
                                 "*GlobalCaptureWarning: tracedagent: the global MeterProvider is a "
                                 "NoOpMeterProvider*"])


def test_the_ini_option_keeps_global_providers_untouched(pytester: pytest.Pytester, subprocess_env):
    pytester.makepyfile(support=AGENT)
    pytester.makeini("[pytest]\ntracedagent_capture_global = false\n")
    pytester.makepyfile(test_private='''
        from opentelemetry import trace
        from support import make_agent

        def test_only_given_providers_are_recorded(tracedagent_recorder):
            make_agent().run("global: not recorded")
            make_agent(**tracedagent_recorder.providers).run("recorded")
            assert len(tracedagent_recorder.runs()) == 1
            assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    ''')
    pytester.runpytest_subprocess().assert_outcomes(passed=1)


def test_xdist_workers_each_record_their_own_tests(pytester: pytest.Pytester, subprocess_env):
    pytester.makepyfile(support=AGENT)
    pytester.makepyfile(test_parallel='''
        import os
        import pytest
        from support import make_agent

        @pytest.mark.parametrize("i", range(6))
        def test_isolated(tracedagent_recorder, i):
            assert os.environ["PYTEST_XDIST_WORKER"].startswith("gw")
            for _ in range(i % 3 + 1):
                make_agent().run("go")
            assert len(tracedagent_recorder.runs()) == i % 3 + 1
            assert tracedagent_recorder.metric("tracedagent.runs") == i % 3 + 1
    ''')
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*2 workers*"])


def test_a_failing_assertion_reads_well_in_pytest_output(pytester: pytest.Pytester):
    pytester.makepyfile(support=AGENT)
    pytester.makepyfile(test_fails='''
        from tracedagent import Budget, Stop
        from tracedagent.testing import assert_stop
        from support import make_agent

        def test_expected_an_answer(tracedagent_recorder):
            make_agent(Budget(max_steps=1)).run("go")
            assert_stop(tracedagent_recorder, Stop.ANSWERED)
    ''')
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E*AssertionError: expected the run to stop with 'answered', but it stopped with 'step_budget_exhausted'",
        "E*stop message: Stopped: reached the 1-step limit without an answer.",
        "E*steps:        1",
    ])
    assert "_assertions.py" not in result.stdout.str()  # the helper's own frame is hidden


def test_loading_the_plugin_imports_neither_the_sdk_nor_the_loop():
    """pytest loads the plugin in every session of every project that has tracedagent installed:
    it must cost next to nothing until a test asks for the fixture (benchmarks/plugin_load.py
    measures it). A fresh interpreter, as pytest's own would be."""
    import subprocess
    import sys

    child = ("import sys, pytest, tracedagent.pytest_plugin\n"
             "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'rich', 'click', "
             "'tracedagent._agent', 'tracedagent._export', 'tracedagent._testing'))))\n"
             "import tracedagent.testing\n"
             "print('opentelemetry.sdk.trace' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.returncode == 0, done.stderr
    loaded, sdk_after_first_use = done.stdout.splitlines()
    assert loaded == "[]"
    assert sdk_after_first_use == "True"  # the fixture's first use imports what it needs


def test_every_public_name_is_there_though_imported_on_first_use():
    """``tracedagent/__init__`` imports its names lazily (PEP 562): each one of ``__all__`` still
    resolves, star-imports, and is the object its module defines."""
    import importlib

    names: dict[str, object] = {}
    exec("from tracedagent import *", names)
    assert set(tracedagent.__all__) <= set(names)
    assert set(tracedagent.__all__) == set(tracedagent._EXPORTS) | {"__version__"}
    for name, module in tracedagent._EXPORTS.items():
        assert getattr(tracedagent, name) is getattr(importlib.import_module(module, "tracedagent"), name)
    assert set(tracedagent.__all__) <= set(dir(tracedagent))
    with pytest.raises(AttributeError):
        tracedagent.NoSuchThing  # noqa: B018
