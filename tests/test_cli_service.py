"""Which service the command line names: ``--service`` when given, else the environment
(``OTEL_SERVICE_NAME``, then ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES``), else
``tracedagent`` - the rule ``configure()`` follows, for ``demo`` and ``traces`` alike.

Run in-process through click's runner, with the variables set for each call; the spans are
read back from the file the demo writes, from a real OTLP/HTTP receiver on 127.0.0.1, and
from the query a local Jaeger-shaped server receives.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner, Result

from _fake_servers import RoutedServer
from otlp_receivers import HttpReceiver
from tracedagent._cli import _main as _cli
from tracedagent._core import _names as N

NO_SERVICE_VARIABLES = {N.ENV_SERVICE_NAME: None, "OTEL_RESOURCE_ATTRIBUTES": None}
CASES = [
    pytest.param({}, [], N.DEFAULT_SERVICE_NAME, id="neither"),
    pytest.param({N.ENV_SERVICE_NAME: "shop"}, [], "shop", id="the variable"),
    pytest.param({"OTEL_RESOURCE_ATTRIBUTES": "service.name=warehouse"}, [], "warehouse", id="resource attributes"),
    pytest.param({N.ENV_SERVICE_NAME: "shop"}, ["--service", "desk"], "desk", id="the argument wins"),
]


def invoke(args: list[str], env: dict[str, str]) -> Result:
    environment = {**NO_SERVICE_VARIABLES, **{k: None for k in (N.ENV_OTLP_ENDPOINT, N.ENV_OTLP_TRACES_ENDPOINT,
                                                                  N.ENV_OTLP_PROTOCOL)}, **env}
    return CliRunner(env=environment).invoke(_cli.cli, args, catch_exceptions=False)


def file_services(path: Path) -> set[str]:
    document = json.loads(path.read_text())
    return {a["value"]["stringValue"] for rs in document["resourceSpans"] for a in rs["resource"]["attributes"]
            if a["key"] == "service.name"}


@pytest.mark.parametrize("env, args, expected", CASES)
def test_the_demo_names_its_service_from_the_argument_else_the_environment(tmp_path, env, args, expected):
    out = tmp_path / "demo.otlp.json"
    result = invoke(["demo", "--pace", "0", "--only", "help-desk", "--out", str(out), *args], env)
    assert result.exit_code == 0, result.output
    assert file_services(out) == {expected}


def test_load_mode_sends_under_the_variables_service_and_links_to_it(tmp_path):
    with HttpReceiver() as receiver:
        result = invoke(["demo", "--pace", "0", "--runs", "3", "--out", str(tmp_path / "x.json")],
                        {N.ENV_SERVICE_NAME: "shop-load", N.ENV_OTLP_ENDPOINT: receiver.endpoint,
                         N.ENV_OTLP_PROTOCOL: N.PROTOCOL_HTTP})
        assert result.exit_code == 0, result.output
        spans = receiver.spans()
    assert spans and {span.resource["service.name"] for span in spans} == {"shop-load"}
    assert "/search?service=shop-load\n" in result.output


@pytest.fixture
def jaeger() -> Iterator[RoutedServer]:
    server = RoutedServer()
    server.answer("/api/traces", {"data": [], "errors": None})
    yield server
    server.close()


@pytest.mark.parametrize("env, args, expected", CASES)
def test_traces_searches_the_service_the_demo_would_send_as(jaeger, env, args, expected):
    result = invoke(["traces", "--jaeger", jaeger.url, *args], env)
    assert result.exit_code == 0, result.output
    (request,) = jaeger.requests
    assert dict(urllib.parse.parse_qsl(request.query))["service"] == expected
    assert f"No runs of service {expected!r}" in result.output


def test_a_service_name_that_is_not_utf8_is_a_usage_error():
    """A shell passes bytes that are not UTF-8 on as lone surrogates: neither a URL nor a span
    could carry them."""
    result = CliRunner().invoke(_cli.cli, ["traces", "--service", "bad\udcffname"])
    assert result.exit_code == 2
    assert "'bad\\udcffname' is not UTF-8 text" in result.output
