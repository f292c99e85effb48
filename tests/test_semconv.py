"""The telemetry contract as a Weaver registry (semconv/): valid, complete, true to the code and
the docs, and met by what every demo scenario really emits, with content capture off and on.

Weaver and OpenTelemetry's registry v1.41.1 come from ``../shared`` (tests/_shared.py): without
it these tests are skipped with the reason; CI requires it.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from _shared import ROOT, semconv_model, weaver
from tracedagent import Stop
from tracedagent._core import _names as N
from tracedagent._core._records import ToolOutcome

SEMCONV = ROOT / "semconv"
TELEMETRY_DOC = ROOT / "docs" / "telemetry.md"
TELEMETRY_PREFIXES = ("gen_ai.", "tracedagent.", "error.", "server.")


# --- the registry, ready to run ---------------------------------------------------------

@pytest.fixture(scope="session")
def registry(tmp_path_factory) -> Path:
    """semconv/ with its dependency's path made absolute: Weaver resolves ``registry_path`` from
    the current directory, and the shared folder may be anywhere (``TRACEDAGENT_SHARED``)."""
    model = semconv_model()
    copy = tmp_path_factory.mktemp("semconv") / "semconv"
    shutil.copytree(SEMCONV, copy)
    manifest = (copy / "manifest.yaml").read_text()
    assert "registry_path: ../shared/semconv/model" in manifest
    (copy / "manifest.yaml").write_text(manifest.replace("../shared/semconv/model", str(model)))
    return copy


def _weaver(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(weaver()), "registry", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1"})


@pytest.fixture(scope="session")
def resolved(registry, tmp_path_factory) -> dict[str, Any]:
    """The registry with OpenTelemetry's, resolved by Weaver: every group and attribute."""
    out = tmp_path_factory.mktemp("resolved") / "resolved.json"
    done = _weaver("resolve", "-r", str(registry), "--include-unreferenced", "--format", "json", "-o", str(out))
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def _attributes(resolved: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["name"]: a for g in resolved["groups"] for a in g.get("attributes", [])}


def _groups(resolved: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    key = {"metric": "metric_name", "event": "name", "span": "id"}[kind]
    return {g[key]: g for g in resolved["groups"] if g["type"] == kind and key in g}


def _members(attribute: dict[str, Any]) -> set[str]:
    return {m["value"] for m in attribute["type"]["members"]}


# --- weaver registry check ---------------------------------------------------------------

def test_weaver_registry_check_passes(registry):
    done = _weaver("check", "-r", str(registry))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "×" not in done.stdout + done.stderr


# --- the registry, the code and the docs hold to each other ----------------------------------

NOT_TELEMETRY = {"TEMPORAL_WORKFLOW", "TEMPORAL_MODEL_ACTIVITY", "TEMPORAL_TOOL_ACTIVITY",
                 "TEMPORAL_PROGRESS_QUERY", "TEMPORAL_DECIDE_UPDATE", "TEMPORAL_WAITING_QUERY",
                 "STOP_PART", "PARTIAL_PART", "RESUME_SPAN_NAME"}
"""Constants of ``_names.py`` that look like telemetry names but name something else: Temporal's
workflow and activity types, updates and queries; message parts' types (``STOP_PART``,
``PARTIAL_PART``, in gen_ai.output.messages) and a span's name (``RESUME_SPAN_NAME``, a span group of spans.yaml)."""


def _telemetry_names() -> dict[str, str]:
    """Every attribute, metric and event name ``_names.py`` defines, by constant."""
    return {constant: value for constant, value in vars(N).items()
            if constant.isupper() and isinstance(value, str) and value.startswith(TELEMETRY_PREFIXES)
            and re.fullmatch(r"[a-z0-9_.]+", value) and constant not in NOT_TELEMETRY}


def test_every_name_in_names_py_is_in_the_registry(resolved):
    attributes, metrics, events = (_attributes(resolved), _groups(resolved, "metric"), _groups(resolved, "event"))
    names = _telemetry_names()
    assert len(names) > 50  # the filter above found them
    missing = {c: v for c, v in names.items()
               if v not in (metrics if c.startswith("METRIC_") else events if c.endswith("_EVENT") else attributes)}
    assert not missing, (f"not in semconv/ (nor OpenTelemetry's registry): {missing}; add each to semconv/, "
                         f"or, if it names no attribute, metric or event, to NOT_TELEMETRY here")
    for tool_list in (N.TOOLS_REQUESTED, N.TOOLS_EXECUTED, N.TOOLS_BLOCKED, N.TOOLS_NOT_DISPATCHED):
        assert tool_list + N.COUNT_SUFFIX in attributes
    operations = _members(attributes[N.GEN_AI_OPERATION_NAME])
    assert {N.OP_INVOKE_AGENT, N.OP_CHAT, N.OP_EXECUTE_TOOL} <= operations


def test_every_tracedagent_name_in_the_registry_is_one_the_code_emits(resolved):
    emitted = set(_telemetry_names().values())
    emitted |= {name + N.COUNT_SUFFIX for name in (N.TOOLS_REQUESTED, N.TOOLS_EXECUTED, N.TOOLS_BLOCKED,
                                                     N.TOOLS_NOT_DISPATCHED, N.TOOLS_PENDING)}
    ours = {name for name in _attributes(resolved) if name.startswith("tracedagent.")}
    ours |= {name for name in _groups(resolved, "metric") if name.startswith("tracedagent.")}
    assert ours - emitted == set(), "in semconv/ but in no constant of _names.py"


def test_the_enums_are_the_code_s(resolved):
    attributes = _attributes(resolved)
    stops = {stop.value for stop in Stop}
    for name in (N.STOP_REASON, N.SUB_AGENT_STOP_REASON, N.TOOLS_NOT_DISPATCHED_REASON):
        assert _members(attributes[name]) == stops, name
    # A tool call's outcome, plus `cancelled`: the counter's outcome for a call a cancellation cut off.
    assert _members(attributes[N.TOOL_OUTCOME]) == {o.value for o in ToolOutcome} | {N.ERROR_CANCELLED}
    assert _members(attributes[N.DRIVER]) == {N.DRIVER_RUN, N.DRIVER_ARUN, N.DRIVER_STREAM, N.DRIVER_ASTREAM}


def test_the_registry_s_metrics_are_the_instruments_the_code_creates(resolved):
    metrics = _groups(resolved, "metric")
    source = "".join((ROOT / "tracedagent" / path).read_text()
                     for path in ("_instrumentation/_telemetry.py", "evals/_telemetry.py", "evals/_online.py"))
    created = dict(re.findall(r"N\.(METRIC_\w+), unit=\"([^\"]+)\"", source))
    assert set(created) == {c for c in vars(N) if c.startswith("METRIC_")}
    for constant, unit in created.items():
        metric = metrics[getattr(N, constant)]
        assert metric["unit"] == unit, constant


def test_no_brief_carries_yaml_debris():
    """A flow mapping with a comma in an unquoted brief splits the brief; a stray quote stays."""
    for path in SEMCONV.glob("*.yaml"):
        for line in path.read_text().splitlines():
            if "brief:" in line and line.strip().startswith("- {"):
                brief = line.split("brief:", 1)[1].strip().rstrip("}").strip()
                assert brief.count('"') in (0, 2) and (brief.count('"') == 0 or brief.startswith('"')), line


def _documented_names(text: str) -> set[str]:
    """The attribute names in the first column of docs/telemetry.md's tables, expanding the
    shorthand there: ``tracedagent.budget.max_steps``, ``.max_tokens`` and
    ``tracedagent.tools.{requested,executed}_count``."""
    names: set[str] = set()
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        prefix = ""
        for token in re.findall(r"`([^`]+)`", first):
            token = token.split(" ")[0]
            if token.startswith(".") and prefix:
                token = prefix + token[1:]
            match = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", token)
            expanded = [match[1] + part + match[3] for part in match[2].split(",")] if match else [token]
            for name in expanded:
                if name.startswith(TELEMETRY_PREFIXES):
                    names.add(name)
                    prefix = name.rsplit(".", 1)[0] + "."
    return names


def test_docs_telemetry_md_tables_match_the_registry(resolved):
    documented = _documented_names(TELEMETRY_DOC.read_text())
    attributes, metrics = _attributes(resolved), _groups(resolved, "metric")
    assert not {n for n in documented if n not in attributes and n not in metrics}, "documented, not in semconv/"
    ours = {n for n in [*attributes, *metrics] if n.startswith("tracedagent.")}
    assert ours - documented == set(), "in semconv/, not in docs/telemetry.md's tables"
    spans = [g for g in resolved["groups"] if g["type"] == "span" and g["id"].startswith("span.tracedagent.")]
    on_spans = {a["name"] for g in spans for a in g["attributes"]}
    labels_only = {N.GEN_AI_TOKEN_TYPE, N.DECISION}  # metric labels, on no span
    assert {n for n in documented if n in attributes and n not in {*on_spans, *labels_only}} == set(), \
        "documented on a span, but no span of semconv/spans.yaml carries it"


def test_docs_telemetry_md_types_match_the_registry(resolved):
    attributes = _attributes(resolved)
    for line in TELEMETRY_DOC.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) < 5 or not cells[1].startswith("`") or cells[2] not in ("string", "int", "double", "boolean",
                                                                              "string[]"):
            continue
        for name in _documented_names(line):
            kind = attributes[name]["type"]
            assert (kind if isinstance(kind, str) else "string") == cells[2], name


# --- weaver registry live-check on every demo scenario -----------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen[bytes], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "weaver live-check exited before it listened"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"weaver live-check did not listen on {port} within {seconds} s")


def _advice(report: Any) -> Iterator[dict[str, Any]]:
    if isinstance(report, dict):
        yield from report.get("all_advice", []) if isinstance(report.get("all_advice"), list) else []
        for value in report.values():
            yield from _advice(value)
    elif isinstance(report, list):
        for value in report:
            yield from _advice(value)


def run_live_check(registry: Path, out: Path, demo_args: list[str], env: dict[str, str],
                   program: list[str] | None = None) -> dict[str, Any]:
    """``tracedagent demo DEMO_ARGS`` (or ``PROGRAM ENDPOINT``) sent to ``weaver registry
    live-check``'s own OTLP receiver (spans and metrics, through ``configure()``); its report,
    exit status and the program's output."""
    grpc, admin = _free_port(), _free_port()
    checker = subprocess.Popen(
        [str(weaver()), "registry", "live-check", "-r", str(registry), "--include-unreferenced",
         "--otlp-grpc-address", "127.0.0.1", "--otlp-grpc-port", str(grpc), "--admin-port", str(admin),
         "--inactivity-timeout", "120", "--format", "json", "-o", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})
    try:
        _wait_for_port(grpc, checker)
        env = dict(env)
        for variable in (N.ENV_OTLP_ENDPOINT, N.ENV_OTLP_TRACES_ENDPOINT, N.ENV_OTLP_METRICS_ENDPOINT,
                         N.ENV_OTLP_PROTOCOL, N.ENV_OTLP_HEADERS):
            env.pop(variable, None)
        command = ([*program, f"http://127.0.0.1:{grpc}"] if program is not None else
                   [sys.executable, "-m", "tracedagent", "demo", *demo_args, "--otlp",
                    f"http://127.0.0.1:{grpc}", "--out", str(out / "demo.otlp.json")])
        demo = subprocess.run(command,
                              capture_output=True, text=True, timeout=300, env=env)
        assert demo.returncode == 0, demo.stderr
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{admin}/stop", method="POST"),
                               timeout=30).read()
        checker.wait(timeout=60)
    finally:
        if checker.poll() is None:
            checker.kill()
            checker.wait()
    stderr = checker.stderr.read().decode(errors="replace") if checker.stderr else ""
    return {"returncode": checker.returncode, "stderr": stderr, "demo": demo.stdout,
            "report": json.loads((out / "live_check.json").read_text())}


def violations(report: dict[str, Any]) -> dict[tuple[str, str, str], int]:
    findings = collections.Counter((a["level"], a["id"], a.get("message", "")) for a in _advice(report["samples"]))
    return {k: v for k, v in findings.items() if k[0] == "violation"}


@pytest.fixture(scope="session", params=[False, True], ids=["content-off", "content-on"])
def live_check(request, registry, tmp_path_factory) -> dict[str, Any]:
    """Every demo scenario through ``run_live_check``, with content capture off or on."""
    capture = request.param
    env = {**os.environ, N.ENV_CAPTURE_CONTENT: "true" if capture else "false"}
    result = run_live_check(registry, tmp_path_factory.mktemp("live-check"), ["--pace", "0"], env)
    return {"capture": capture, **result}


def test_live_check_finds_no_violation_in_any_demo_run(live_check):
    assert violations(live_check["report"]) == {}
    assert live_check["returncode"] == 0, live_check["stderr"][-2000:]


def test_live_check_saw_every_span_and_metric_of_the_demo(live_check):
    statistics = live_check["report"]["statistics"]
    spans = int(re.search(r"(\d+) spans written", live_check["demo"])[1])
    assert statistics["total_entities_by_type"]["span"] == spans > 100
    names = {s["span"]["name"].split(" ")[0] for s in live_check["report"]["samples"] if "span" in s}
    # tracedagent.resume: refund-approval's resumption, marked in the paused run's trace
    assert names == {N.OP_INVOKE_AGENT, N.OP_CHAT, N.OP_EXECUTE_TOOL, N.STEP_SPAN_NAME, N.RESUME_SPAN_NAME}
    metrics = {s["metric"]["name"] for s in live_check["report"]["samples"] if "metric" in s}
    assert {N.METRIC_RUNS, N.METRIC_TOOL_CALLS, N.METRIC_RUN_STEPS, N.METRIC_TOKEN_USAGE,
            N.METRIC_OPERATION_DURATION} <= metrics
    seen = {a["name"] for s in live_check["report"]["samples"] if "span" in s for a in s["span"]["attributes"]}
    assert (N.GEN_AI_INPUT_MESSAGES in seen) is live_check["capture"]
    assert (N.GEN_AI_OUTPUT_MESSAGES in seen) is live_check["capture"]


def test_every_tracedagent_enum_value_emitted_is_documented(live_check):
    undocumented = {a["message"] for a in _advice(live_check["report"]["samples"])
                    if a["id"] == "undefined_enum_variant" and "tracedagent." in a["message"]}
    assert undocumented == set()
