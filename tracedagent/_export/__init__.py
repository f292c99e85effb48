"""Getting telemetry out of the process: ``configure()``, exporters, endpoints, exit.

* ``_configure`` - ``configure()`` and ``Telemetry``: the SDK's providers and pipelines.
* ``_exporters`` / ``_endpoints`` - OTLP and console exporters, and the targets they send to,
  read as the OpenTelemetry specification says.
* ``_sigterm`` - one bounded flush when the process is told to stop.
* ``_probe`` / ``_http`` - reachability checks, and the small HTTP client reading and probing use.

May import: ``_core`` (names, secrets) and the OpenTelemetry SDK and exporters.
"""
