"""The loop's core: records, budgets, tools and the state of a run. Imports nothing of tracedagent.

Owns what a run *is* and every decision taken on it, with no telemetry and no I/O:

* ``_records`` - the shapes that cross the model boundary (``Message``, ``Completion``,
  ``ToolCall``, ``ToolResult``, ``Usage``) and the ``Model`` protocol.
* ``_budget`` - ``Budget`` (the ceilings and prices) and ``Stop`` (every named exit).
* ``_machine`` - ``RunMachine``, the order of a run and every decision in it, sans I/O: it
  tells its driver (a pump) what to do next and is fed back what happened.
* ``_run`` - ``RunState``, the decisions the machine asks (its vocabulary); ``_result`` - the
  ``Run`` and ``Step`` records it builds; ``_usage`` - ``RunUsage``, a run's totals.
* ``_deadline`` - ``Deadline``: when a run's time is up, on a clock its driver chooses.
* ``_tools`` / ``_schemas`` - ``Tool``, ``Registry``, ``Policy``, argument schemas from type hints.
* ``_names`` - every attribute, metric, event and environment-variable name, in one place.
* ``_secrets`` - the ``Redactor`` that blanks credential shapes in captured text.
* ``_pausing`` / ``_checkpoint`` (``_checkpoint_errors``) / ``_decisions`` / ``_signing`` - a run
  that waits for a person: the pause, the checkpoint as signed JSON, the decisions on it.
* ``_messages`` - ``check_messages``, the one shape check of a conversation from outside.

May import: the standard library only. Everything else in the package may import it.
"""
