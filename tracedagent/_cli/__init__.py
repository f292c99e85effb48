"""The ``tracedagent`` command: demo, show, traces, trace, replay, doctor.

* ``_main`` - the click commands; every expected failure is a one-line ``Error:``.
* ``_options`` - options several commands share.
* ``_demo`` / ``_scenarios`` - the demo agents, one ``Scenario`` each.
* ``_render`` / ``_listing`` - tables and span trees for a terminal.
* ``_doctor`` - the checks ``doctor`` runs.
* ``_replay_cmd`` - ``replay`` and ``diff``.

May import: everything below it (``_core``, ``_instrumentation``, ``_agent``, ``_export``,
``_traces``, ``_testing``). Nothing imports it but ``__main__`` and the console script.
"""
