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

    # The run span: the task going in, the final answer coming out (a run whose reader left,
    # walked-away's cancelled stream, has no answer: no assistant message poses as one).
    tab = _open(page, root.name)
    expect(tab.locator(".GenAITab--message-user").first).to_contain_text(scenario_task(scenario))
    if N.GEN_AI_OUTPUT_MESSAGES in root.attributes:
        answer = json.loads(root.attributes[N.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"]
        expect(tab.locator(".GenAITab--message-assistant").last).to_contain_text(answer[:200])
    else:
        assert root.attributes[N.STOP_REASON] == "cancelled"
        expect(tab.locator(".GenAITab--message-assistant")).to_have_count(0)
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
