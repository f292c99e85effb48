"""The implementation of ``tracedagent.testing``'s span recorder, run views and assertions.

Import from ``tracedagent.testing``; the modules here are private and may move.

- ``_match``: how keyword arguments name span attributes and metric labels.
- ``_capture``: the one process-wide span router behind the global providers.
- ``_views``: ``RunView`` (one run as its spans tell it) and tree rendering.
- ``_recorder``: ``Recorder`` (private providers, global capture, queries).
- ``_assertions``: the ``assert_*`` helpers and their failure messages.
"""

__all__: list[str] = []
