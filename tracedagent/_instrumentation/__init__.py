"""OpenTelemetry beside the loop: spans, metrics and captured content. Imports ``_core`` only.

Owns how a run is seen, and decides nothing about it:

* ``_telemetry`` - ``AgentTelemetry``, an agent's tracer, meter and instruments.
* ``_spans`` - the span scopes (step, chat, tool) that open a span and end it with an
  outcome, whatever happens; ``_observer`` - ``RunScope``, the run span, which the run
  machine tells of its transitions (steps started and ended, the run ended or failed).
* ``_content`` - opt-in content capture: what of a conversation reaches a span, redacted and bounded.
* ``_instrumented`` - the model and the registry as a driver sees them, each call inside its scope.

May import: ``_core``, ``opentelemetry-api`` (never the SDK: only ``configure()`` and the testing
toolkit touch it).
"""
