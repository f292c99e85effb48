"""Reading recorded traces back: from OTLP JSON files and from Jaeger's API.

* ``_trace`` - ``SpanRecord``, ``Trace``, ``RunSummary``: one span shape whatever its source,
  read defensively (a trace file is untrusted input).
* ``_otlp_json`` - the OTLP JSON file format, both ways.
* ``_jaeger`` - Jaeger's query API and its JSON model.
* ``_recorded`` - a recorded run as the facts replay needs (steps, calls, results, fates).

May import: ``_core``, ``_instrumentation`` (the capture format it reads back) and ``_export``
(endpoints and the HTTP client).
"""
