"""The drivers: ``Agent`` and the loops that run it, and teams of agents.

* ``_loop`` - ``Agent``: ``run`` (sync) and ``arun`` (async), each the six verbs in order,
  every decision a ``RunState`` method.
* ``_acalls`` - how ``arun`` awaits: the model and a turn's calls until the run's deadline,
  each in a context of its own, never losing a cancellation.
* ``_team`` - ``Agent.as_tool``: a sub-agent's run as a tool call of another run.

New drivers (streaming, resuming a paused run, a durable engine's workflow) go here, and
drive the same ``RunState``.

May import: ``_core`` and ``_instrumentation``.
"""
