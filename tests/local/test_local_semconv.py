"""The real model's spans and metrics against the Weaver registry: `tracedagent demo --local-model`
(a real tool call required on the first turn, a real answer after it) sent to `weaver registry
live-check`'s own OTLP receiver, as tests/test_semconv.py does with the scripted demo."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import urllib.request

from test_semconv import _advice, _free_port, _wait_for_port, registry  # noqa: F401 (registry: a fixture)

from _shared import weaver
from tracedagent._core import _names as N

from ._local import missing_or_fail


def test_live_check_finds_no_violation_in_a_real_models_run(registry, tmp_path):  # noqa: F811
    missing_or_fail()
    grpc, admin = _free_port(), _free_port()
    checker = subprocess.Popen(
        [str(weaver()), "registry", "live-check", "-r", str(registry), "--include-unreferenced",
         "--otlp-grpc-address", "127.0.0.1", "--otlp-grpc-port", str(grpc), "--admin-port", str(admin),
         "--inactivity-timeout", "120", "--format", "json", "-o", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})
    try:
        _wait_for_port(grpc, checker)
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
        demo = subprocess.run([sys.executable, "-m", "tracedagent", "demo", "--local-model",
                               "--otlp", f"http://127.0.0.1:{grpc}", "--out", str(tmp_path / "demo.otlp.json")],
                              capture_output=True, text=True, timeout=300, env=env)
        assert demo.returncode == 0, demo.stderr
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{admin}/stop", method="POST"),
                               timeout=30).read()
        checker.wait(timeout=60)
    finally:
        if checker.poll() is None:
            checker.kill()
            checker.wait()
    report = json.loads((tmp_path / "live_check.json").read_text())
    findings = collections.Counter((a["level"], a["id"], a.get("message", "")) for a in _advice(report["samples"]))
    assert {k: v for k, v in findings.items() if k[0] == "violation"} == {}
    spans = [s["span"] for s in report["samples"] if "span" in s]
    chats = [s for s in spans if s["name"].startswith("chat ")]
    assert len(chats) >= 2 and any(s["name"].startswith("execute_tool ") for s in spans)
    first = {a["name"]: a["value"] for a in chats[0]["attributes"]}
    assert first[N.GEN_AI_RESPONSE_ID] and first[N.GEN_AI_RESPONSE_MODEL] == "smollm2"
    assert first[N.REQUEST_TOOL_CHOICE] == "required" and first[N.RESPONSE_TOOL_CHOICE_FOLLOWED] is True
