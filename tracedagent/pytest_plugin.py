"""The tracedagent pytest plugin: a fresh span recorder for every test that asks for one.

Registered through the ``pytest11`` entry point, so installing tracedagent is enough::

    def test_refund_is_blocked(tracedagent_recorder):
        run = build_agent(FakeModel([...])).run("refund order 42")
        assert_never_executed(tracedagent_recorder, "refund")

Loading the plugin changes nothing: no global provider is installed until a test
requests ``tracedagent_recorder``. From then on the process keeps one SDK
``TracerProvider`` / ``MeterProvider`` as the global ones (OpenTelemetry allows setting
them once per process), or adds its span router to the SDK providers the application set
first; each test's recorder sees only the spans started during that test. Every
pytest-xdist worker is its own process with its own providers, so parallel runs are
isolated too. Set the ini option ``tracedagent_capture_global = false`` to keep the
global providers untouched; the fixture then records only agents given
``**tracedagent_recorder.providers``.

Loading it costs next to nothing (``benchmarks/plugin_load.py`` measures it): pytest loads the
plugin of every installed package in every test run, so the testing toolkit - and with it the
OpenTelemetry SDK - is imported inside the fixture, by the first test that asks for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator

import pytest

if TYPE_CHECKING:
    from .testing import Recorder

__all__ = ["tracedagent_recorder", "tracedagent_eval"]

INI_CAPTURE_GLOBAL = "tracedagent_capture_global"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(INI_CAPTURE_GLOBAL, type="bool", default=True,
                  help="tracedagent_recorder also records agents that use the global OpenTelemetry "
                       "providers (installs an SDK provider if none is set). Default: true.")


@pytest.fixture
def tracedagent_recorder(request: pytest.FixtureRequest) -> Iterator[Recorder]:
    """A ``Recorder`` for this test only: pass ``**tracedagent_recorder.providers`` to an
    ``Agent``, or let the agent use the global providers (recorded unless the
    ``tracedagent_capture_global`` ini option is false)."""
    from .testing import Recorder  # here, not at load: see the module's docstring

    recorder = Recorder()
    if request.config.getini(INI_CAPTURE_GLOBAL):
        recorder.start()
    try:
        yield recorder
    finally:
        recorder.stop()
        recorder.clear()  # the spans die with the test, not with the session


@pytest.fixture
def tracedagent_eval(tracedagent_recorder: Recorder) -> Callable[..., Any]:
    """``tracedagent.evals.check_case`` with this test's recorder: ``tracedagent_eval(dataset,
    case, agent)`` plays the case (``@tracedagent.evals.parametrize(dataset)`` gives one test per
    case), grades it, and fails the test with each failed grade's explanation."""
    from .evals import check_case  # here, not at load: see the module's docstring

    def play_and_check(dataset: Any, case: Any, agent: Any = None, **options: Any) -> Any:
        __tracebackhide__ = True
        return check_case(dataset, case, agent, recorder=tracedagent_recorder, **options)

    return play_and_check
