"""Test doubles that ship with the library: a scripted model, helpers to script it, and a
span recorder with assertions over finished runs.

No model can be reached from a test, so ``FakeModel`` plays one: each item of its script
is the next turn. Its token counts are estimated from what it was sent, so the quadratic
growth of input tokens over a run is visible in tests and traces, as with a real model.

``Recorder`` keeps every span and metric an agent emits in memory; ``runs()`` gives one
``RunView`` per run, and the ``assert_*`` helpers fail with what the run actually did.
The pytest plugin (``tracedagent.pytest_plugin``) hands each test a fresh recorder as the
``tracedagent_recorder`` fixture. ``Replay`` turns a run recorded in a trace into a test
(``tracedagent replay``). ``play`` / ``aplay`` (and ``Replay.play``) run an agent and return a
``Played``: the ``Run`` with its spans, one shape for a live run and a recorded one (what an
evaluation grades). ``docs/testing.md`` is the guide.
"""

from __future__ import annotations

from ._testing._played import Played, aplay, play
from ._testing._replay import Replay, ReplayError, ReplayMismatch
from ._testing._assertions import (RAN_OUTCOMES, SpanSpec, assert_never_executed, assert_requested,
                                   assert_span_tree, assert_stop)
from ._testing._capture import GlobalCaptureWarning
from ._testing._fake import FakeModel, ScriptExhausted, ScriptItem, estimate_tokens, json_answer, tool_call
from ._testing._match import ATTRIBUTE_ALIASES, find_spans
from ._testing._recorder import Recorder
from ._testing._views import RunView

__all__ = ["FakeModel", "ScriptExhausted", "ScriptItem", "tool_call", "estimate_tokens", "json_answer", "Recorder", "RunView",
           "assert_stop", "assert_never_executed", "assert_requested", "assert_span_tree", "find_spans",
           "ATTRIBUTE_ALIASES", "RAN_OUTCOMES", "SpanSpec", "GlobalCaptureWarning", "Replay", "ReplayMismatch",
           "ReplayError", "Played", "play", "aplay"]
