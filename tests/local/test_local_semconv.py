"""The real model's spans and metrics against the Weaver registry: `tracedagent demo --local-model`
(a real tool call required on the first turn, a real answer after it) sent to `weaver registry
live-check`'s own OTLP receiver, as tests/test_semconv.py does with the scripted demo."""

from __future__ import annotations

import os

from test_semconv import registry, run_live_check, violations  # noqa: F401 (registry: a fixture)

from tracedagent._core import _names as N

from ._local import missing_or_fail


def test_live_check_finds_no_violation_in_a_real_models_run(registry, tmp_path):  # noqa: F811
    missing_or_fail()
    checked = run_live_check(registry, tmp_path, ["--local-model"], dict(os.environ))
    assert violations(checked["report"]) == {}
    assert checked["returncode"] == 0, checked["stderr"][-2000:]
    spans = [s["span"] for s in checked["report"]["samples"] if "span" in s]
    chats = [s for s in spans if s["name"].startswith("chat ")]
    assert len(chats) >= 2 and any(s["name"].startswith("execute_tool ") for s in spans)
    first = {a["name"]: a["value"] for a in chats[0]["attributes"]}
    assert first[N.GEN_AI_RESPONSE_ID] and first[N.GEN_AI_RESPONSE_MODEL] == "smollm2"
    assert first[N.REQUEST_TOOL_CHOICE] == "required" and first[N.RESPONSE_TOOL_CHOICE_FOLLOWED] is True
