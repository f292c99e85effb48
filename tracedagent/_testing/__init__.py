"""The implementation of ``tracedagent.testing``'s span recorder, run views and assertions.

Import from ``tracedagent.testing``; the modules here are private and may move.

May import: ``_core``, ``_instrumentation``, ``_agent``, ``_export`` and ``_traces`` (replay runs
an agent on a recorded trace); never ``_cli``. Only this wing and ``configure()`` touch the SDK.

- ``_match``: how keyword arguments name span attributes and metric labels.
- ``_capture``: the one process-wide span router behind the global providers.
- ``_views``: ``RunView`` (one run as its spans tell it) and tree rendering.
- ``_recorder``: ``Recorder`` (private providers, global capture, queries).
- ``_assertions``: the ``assert_*`` helpers and their failure messages.
- ``_fake``: ``FakeModel``, the scripted model.
- ``_replay``: a recorded run replayed as a test (``tracedagent.testing.Replay``); ``_stubs``: what
  a recording answers it with (the model's turns, the stub tools).
- ``_played``: ``Played``, ``play``, ``aplay``: a run with its spans, live or replayed (what an
  evaluation grades).
"""

__all__: list[str] = []
