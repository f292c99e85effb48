"""What a user sees of every demo run in Jaeger's UI: a real browser on the real UI.

The natively built Jaeger (``make stack-build``) serves the Jaeger UI 2.20 build from
``../shared/jaeger-ui/build``: Jaeger 2.12's trace pages work with it (its Search page needs
Jaeger 2.19+). The test starts its own Jaeger from that binary - in memory, on free ports, so
it needs no restart of the stack and reads no one else's traces - sends every demo scenario to
it with content capture on, and drives Debian's Chromium with Playwright (no browser download)
through each run's trace page: the GenAI view is active; a chat span's GenAI tab shows the
conversation as messages (never one raw block, long runs included), its provider and tokens; a
tool span's tab its arguments and result; the run span's tab the run's final answer.

``make test`` installs Chromium (``scripts/stack.sh browser``); CI requires the shared folder
(``TRACEDAGENT_REQUIRE_SHARED``) and the stack's build (``TRACEDAGENT_REQUIRE_STACK``), so a
missing piece fails there instead of skipping.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/_shared.py
from _shared import ROOT, jaeger_ui_build  # noqa: E402

from tracedagent._cli._scenarios import SCENARIOS  # noqa: E402
from tracedagent._core import _names as N  # noqa: E402
from tracedagent._traces._otlp_json import read_file  # noqa: E402
from tracedagent._traces._trace import SpanRecord  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CONTENT = (N.GEN_AI_SYSTEM_INSTRUCTIONS, N.GEN_AI_INPUT_MESSAGES, N.GEN_AI_OUTPUT_MESSAGES)
"""The attributes the GenAI tab parses as JSON messages (one raw block when they are not JSON)."""


def _missing(message: str) -> None:
    if os.environ.get("TRACEDAGENT_REQUIRE_STACK") or os.environ.get("TRACEDAGENT_REQUIRE_SHARED"):
        pytest.fail(message)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jaeger_config(ui: Path, http: int, grpc: int, otlp: int) -> str:
    """Jaeger v2 with the UI build, an in-memory store and nothing on a fixed port."""
    return f"""
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces: {{receivers: [otlp], processors: [batch], exporters: [jaeger_storage_exporter]}}
  telemetry:
    logs: {{level: warn}}
    metrics: {{level: none}}
extensions:
  jaeger_query:
    storage: {{traces: memory}}
    enable_tracing: false
    ui: {{assets_path: "{ui}"}}
    http: {{endpoint: "127.0.0.1:{http}"}}
    grpc: {{endpoint: "127.0.0.1:{grpc}"}}
  jaeger_storage:
    backends:
      memory: {{memory: {{max_traces: 1000}}}}
receivers:
  otlp:
    protocols:
      grpc: {{endpoint: "127.0.0.1:{otlp}"}}
processors:
  batch: {{timeout: 100ms}}
exporters:
  jaeger_storage_exporter: {{trace_storage: memory}}
"""


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read()


def _until(what: str, check, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        try:
            value = check()
            if value:
                return value
        except (OSError, urllib.error.URLError, ValueError):
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {seconds} s")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory) -> Iterator[dict[str, Any]]:
    ui = jaeger_ui_build()
    binary = Path(subprocess.run([str(ROOT / "scripts" / "stack.sh"), "jaeger-bin"], capture_output=True,
                                 text=True, check=True).stdout.strip())
    if not os.access(binary, os.X_OK):
        _missing(f"no Jaeger binary at {binary}: build it with `make stack-build`")
    folder = tmp_path_factory.mktemp("jaeger-ui")
    ports = {"http": _free_port(), "grpc": _free_port(), "otlp": _free_port()}
    (folder / "jaeger.yaml").write_text(_jaeger_config(ui, **ports))
    log = (folder / "jaeger.log").open("wb")
    process = subprocess.Popen([str(binary), "--config", str(folder / "jaeger.yaml")], cwd=folder,
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{ports['http']}"
        _until("Jaeger served the UI", lambda: process.poll() is None and b"<html" in _get(url + "/"))
        yield {"url": url, "otlp": f"http://127.0.0.1:{ports['otlp']}", "folder": folder}
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture(scope="module")
def demo(jaeger) -> dict[str, Any]:
    """Every demo scenario sent to that Jaeger with content capture on: trace ids by scenario,
    and the spans as the demo's own OTLP/JSON file holds them."""
    out = jaeger["folder"] / "demo.otlp.json"
    env = {**os.environ, N.ENV_CAPTURE_CONTENT: "true"}
    done = subprocess.run([sys.executable, "-m", "tracedagent", "demo", "--otlp", jaeger["otlp"], "--jaeger",
                           jaeger["url"], "--pace", "0", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    links = dict(re.findall(r"^\s+(\S+)\s+" + re.escape(jaeger["url"]) + r"/trace/([0-9a-f]{32})$", done.stdout,
                            re.MULTILINE))
    assert set(links) == {s.name for s in SCENARIOS}
    spans: dict[str, list[SpanRecord]] = {}
    for span in read_file(out):
        spans.setdefault(span.trace_id, []).append(span)
    for trace_id in links.values():  # stored, all of each trace, before a page asks for it
        _until(f"Jaeger holding trace {trace_id}", lambda: len(json.loads(
            _get(f"{jaeger['url']}/api/traces/{trace_id}"))["data"][0]["spans"]) == len(spans[trace_id]))
    return {"links": links, "spans": spans}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        _missing(f"no {CHROMIUM}: install Debian's chromium (`scripts/stack.sh browser`)")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _missing("Playwright for Python is not installed (pip install -e . --group test)")
    expect.set_options(timeout=20_000)  # a busy CI machine: waiting is not what these tests measure
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser) -> Iterator[Any]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(20_000)
    try:
        yield page
    finally:
        page.close()


def _rows(page: Any, operation: str) -> Any:
    """The rows of the spans whose names start with ``operation`` (a span's name, or its kind)."""
    name = page.locator("small.endpoint-name", has_text=re.compile("^" + re.escape(operation)))
    return page.locator("a.span-name", has=name)


def _row(page: Any, operation: str) -> Any:
    return _rows(page, operation).first


def _open(page: Any, operation: str) -> Any:
    """Click a span's row: its detail opens on the GenAI tab. Returns the tab."""
    from playwright.sync_api import expect

    _row(page, operation).click()
    tab = page.locator(".GenAITab")
    expect(tab).to_have_count(1)
    expect(page.locator("[role=tab][aria-selected=true]")).to_have_text("GenAI")
    return tab


def _close(page: Any, operation: str) -> None:
    from playwright.sync_api import expect

    _row(page, operation).click()
    expect(page.locator(".GenAITab")).to_have_count(0)


SCREENSHOTS = "TRACEDAGENT_UI_SCREENSHOTS"
"""A folder: the test saves what it saw of each run there (the README's pictures come from it)."""


def _screenshot(page: Any, name: str) -> None:
    folder = os.environ.get(SCREENSHOTS)
    if folder:
        page.screenshot(path=str(Path(folder) / f"jaeger-genai-{name}.png"))


def _is_json(value: Any) -> bool:
    try:
        json.loads(value)
        return True
    except (TypeError, ValueError):
        return False


@pytest.mark.parametrize("scenario", [s.name for s in SCENARIOS])
def test_a_user_sees_the_run_in_the_genai_view(jaeger, demo, page, scenario):
    from playwright.sync_api import expect

    trace_id = demo["links"][scenario]
    spans = demo["spans"][trace_id]
    root = next(s for s in spans if s.parent_id is None)
    chats = [s for s in spans if s.name.startswith(N.OP_CHAT + " ")]
    tools = [s for s in spans if s.name.startswith(N.OP_EXECUTE_TOOL + " ")]
    page.goto(f"{jaeger['url']}/trace/{trace_id}")

    # The trace opens in the GenAI view, with the agent / LLM / tool icons on its rows.
    expect(page.locator(".AltViewOptions")).to_have_text(re.compile("GenAI View"))
    icons = page.locator(".GenAISpanIcon").evaluate_all("els => els.map(e => e.getAttribute('aria-label'))")
    assert icons.count("AI Agent") == sum(s.name.startswith(N.OP_INVOKE_AGENT) for s in spans)
    assert icons.count("LLM call") == len(chats)

    # The run span: the task going in, the final answer coming out; a run that did not answer
    # shows why where its answer would be - tracedagent's own sentence as a system message with
    # the stop reason, never an assistant's turn (walked-away's cancelled stream included).
    tab = _open(page, root.name)
    expect(tab.locator(".GenAITab--message-user").first).to_contain_text(scenario_task(scenario))
    stop = root.attributes[N.STOP_REASON]
    [output] = json.loads(root.attributes[N.GEN_AI_OUTPUT_MESSAGES])
    if stop == "answered":
        expect(tab.locator(".GenAITab--message-assistant").last).to_contain_text(output["parts"][0]["content"][:200])
    else:
        expect(tab.locator(".GenAITab--message-assistant")).to_have_count(0)
        said = tab.locator(".GenAITab--message-system").last
        expect(said).to_contain_text(N.STOP_PART)
        expect(said).to_contain_text(stop)
        if output["parts"][0]["type"] == "text":  # the "Stopped: ..." / "Paused: ..." sentence
            expect(said).to_contain_text(output["parts"][0]["content"][:200])
        if stop == "approval_required":
            expect(said).to_contain_text(f'"{N.STOP_PART_PENDING}": {root.attributes[N.PENDING_CALLS]}')
    _screenshot(page, f"{scenario}-run")
    _close(page, root.name)

    # A chat span: provider, model, tokens and the conversation as messages.
    chat = chats[0]
    tab = _open(page, chat.name)
    expect(tab.locator(".GenAITab--meta")).to_contain_text(chat.attributes[N.GEN_AI_PROVIDER_NAME])
    if N.GEN_AI_USAGE_INPUT_TOKENS in chat.attributes:  # a failed call has no usage
        tokens = tab.locator(".GenAITab--tokens")
        expect(tokens).to_contain_text(f"Input {chat.attributes[N.GEN_AI_USAGE_INPUT_TOKENS]:,}")
        expect(tokens).to_contain_text(f"Output {chat.attributes[N.GEN_AI_USAGE_OUTPUT_TOKENS]:,}")
    expect(tab.locator(".GenAITab--message-system")).to_have_count(1)
    expect(tab.locator(".GenAITab--message-user").first).to_be_visible()
    assert bool(chat.attributes.get(N.RESPONSE_PARTIAL)) == (scenario == "walked-away")
    if chat.attributes.get(N.RESPONSE_PARTIAL):  # a stream its reader left: the text it had received
        [partial] = json.loads(chat.attributes[N.GEN_AI_OUTPUT_MESSAGES])
        assert partial["finish_reason"] == "cancelled" and partial["parts"][0]["content"]
        said = tab.locator(".GenAITab--message-assistant").last
        expect(said).to_contain_text(partial["parts"][0]["content"])
        expect(said).to_contain_text(N.PARTIAL_PART)  # marked partial where the text is shown
    _screenshot(page, f"{scenario}-chat")
    _close(page, chat.name)

    # A tool span: its arguments and its result.
    if tools:
        tool = tools[0]
        tab = _open(page, tool.name)
        labels = [t.strip().lower() for t in tab.locator(".GenAITab--toolLabel").all_inner_texts()]
        assert "arguments" in labels and "result" in labels
        _screenshot(page, f"{scenario}-tool")
        _close(page, tool.name)

    # No span of the run shows its conversation as one raw block (what content that is not
    # valid JSON becomes): each run and chat span's tab, one after the other.
    content_spans = [s for s in spans if any(k in s.attributes for k in CONTENT)]
    raw = []
    for operation in (N.OP_INVOKE_AGENT, N.OP_CHAT):
        rows = _rows(page, operation)
        for index in range(rows.count()):
            rows.nth(index).click()
            tab = page.locator(".GenAITab")
            expect(tab).to_have_count(1)
            if tab.locator(".GenAITab--message-unknown").count():
                raw.append(f"{operation} #{index}")
            rows.nth(index).click()
            expect(tab).to_have_count(0)
    assert len(content_spans) == sum(_rows(page, op).count() for op in (N.OP_INVOKE_AGENT, N.OP_CHAT))
    # Cut content stays JSON (the long runs: the token-hungry reader, the big spender, the flood).
    assert [s.name for s in content_spans if not all(_is_json(s.attributes[k]) for k in CONTENT if k in s.attributes)] == []
    assert raw == []


def scenario_task(name: str) -> str:
    return next(s.task for s in SCENARIOS if s.name == name)


# --- the story beyond one tab: decisions, the way from a pause, cut content ------------------

def _details(page: Any) -> None:
    """Switch an open GenAI span's detail to its Details tab (attributes, Logs, References)."""
    from playwright.sync_api import expect

    page.locator("[role=tab]", has_text="Details").click()
    expect(page.locator("[role=tab][aria-selected=true]")).to_have_text("Details")


def _switch_on(header: Any) -> None:
    """Open one of the span detail's accordions (a ``role=switch`` header). The first click on a
    detail just opened can land while the row is still laid out: click until it reports open."""
    from playwright.sync_api import expect

    for _ in range(4):
        if header.get_attribute("aria-checked") == "true":
            return
        header.click()
        try:
            expect(header).to_have_attribute("aria-checked", "true", timeout=2_000)
            return
        except AssertionError:
            continue
    pytest.fail("the span detail's accordion did not open")


def _logs(page: Any) -> Any:
    """The open span's events (Jaeger's "Logs"), opened: each event's attributes show as key=value."""
    _switch_on(page.locator(".AccordionEvents--header"))
    return page.locator(".AccordionEvents--content")


def _references(page: Any) -> Any:
    """The open span's links (Jaeger's "References"), opened."""
    _switch_on(page.locator(".AccordionLinks--header"))
    return page.locator(".ReferencesList")


def test_the_paused_runs_trace_leads_to_its_resumption_and_back(jaeger, demo, page):
    """refund-approval: in the paused run's trace a tracedagent.resume span (made when the run
    was resumed) shows the decision in its Logs and links to the resumed run; the resumed run's
    span shows the decision too, and links back."""
    from playwright.sync_api import expect

    paused = demo["links"]["refund-approval"]
    [marker] = [s for s in demo["spans"][paused] if s.name == N.RESUME_SPAN_NAME]
    resumed = marker.attributes[N.RESUMED_TRACE_ID]
    assert resumed in demo["spans"] and resumed != paused

    page.goto(f"{jaeger['url']}/trace/{paused}")
    _row(page, N.RESUME_SPAN_NAME).click()  # not a GenAI span: its detail is Jaeger's own
    logs = _logs(page)
    for text in (N.DECISION, N.DECISION_APPROVED, "refund", "r1"):
        expect(logs).to_contain_text(text)
    link = _references(page).locator(f"a[href*='{resumed}']")
    expect(link).to_have_count(1)
    _screenshot(page, "refund-approval-resume")

    run = next(s for s in demo["spans"][resumed] if s.parent_id is None)
    assert link.get_attribute("href").startswith(f"/trace/{resumed}?uiFind={run.span_id}")  # the resumed run span
    page.goto(f"{jaeger['url']}/trace/{resumed}")
    _open(page, run.name)
    _details(page)
    logs = _logs(page)
    expect(logs).to_contain_text(N.DECISION_APPROVED)
    expect(logs).to_contain_text("refund")
    expect(_references(page).locator(f"a[href*='{paused}']")).to_have_count(1)  # and back


@pytest.fixture(scope="module")
def cut_run(jaeger) -> dict[str, Any]:
    """A run whose tool returns 100 KB (the issue's case: no demo scenario's content reaches the
    capture limit), sent to the same Jaeger with content capture on."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from tracedagent import Agent, tool
    from tracedagent.testing import FakeModel, tool_call

    @tool
    def dump_log() -> str:
        """The service's whole log."""
        return "".join(f"12:{i // 60 % 60:02d}:{i % 60:02d} GET /orders/{i} 200\n" for i in range(3_000))[:100_000]

    provider = TracerProvider(resource=Resource.create({"service.name": "tracedagent-ui-cut"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=jaeger["otlp"], insecure=True)))
    run = Agent(FakeModel([tool_call("dump_log", {}), "Every request in the log succeeded."]), [dump_log],
                name="log-reader", capture_content=True, tracer_provider=provider).run("Is anything failing?")
    provider.shutdown()
    _until("Jaeger holding the cut run", lambda: len(json.loads(
        _get(f"{jaeger['url']}/api/traces/{run.trace_id}"))["data"][0]["spans"]) == 6)
    return {"trace_id": run.trace_id}  # a run span, two steps, two chat spans, the tool span


def test_a_100_kb_tool_result_shows_where_it_was_cut(jaeger, cut_run, page):
    from playwright.sync_api import expect

    page.goto(f"{jaeger['url']}/trace/{cut_run['trace_id']}")
    tab = _open(page, "execute_tool dump_log")
    mark = re.compile(r"\[cut: [\d,]+ of [\d,]+ characters shown\]")
    expect(tab).to_contain_text(mark)
    _screenshot(page, "cut-tool")
    _close(page, "execute_tool dump_log")
    # The next model call's conversation carries the cut result, marked too, as messages.
    chat = _rows(page, N.OP_CHAT).last
    chat.click()
    tab = page.locator(".GenAITab")
    expect(tab.locator(".GenAITab--message-tool")).to_contain_text(mark)
    expect(tab.locator(".GenAITab--message-unknown")).to_have_count(0)
