"""The run span, as the run machine's observer: the one place a run span starts and ends.

``RunScope`` is the ``invoke_agent`` span of one run, with its step span open inside it. It is
the ``Observer`` a ``RunMachine`` (``_core/_machine.py``) tells of its transitions - a step
started, a step ended, the run ended with its ``Run``, or the run raised - so no driver opens
or ends a run or step span itself: a pump only performs the machine's requests. A run that
raised (cancelled, interrupted, a bug) still says what it used: steps, tokens, tool lists.
"""

from __future__ import annotations

from typing import Any, Mapping

from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind

from .._core import _names as N
from .._core._budget import Budget, Stop
from .._core._checkpoint import Checkpoint
from .._core._decisions import Decision
from .._core._records import Message
from .._core._result import joined
from .._core._run import Run, Step, ToolNames
from ._spans import RUN_BUDGET, StepScope, _Scope, failure_kind
from ._status import answer_message, stop_message
from ._telemetry import AgentTelemetry, bounded, guard, tool_list_attributes

__all__ = ["Resumed", "RunScope", "RUN_ATTRIBUTES", "caller_attributes", "baggage_entries", "record_decisions"]


def _approvals(cp: Checkpoint, decisions: Mapping[str, Decision]) -> dict[str, Any]:
    """A pause's decisions on the run span that goes on with them: the tool names approved and
    denied (and approved with the person's corrected arguments). Values from a checkpoint
    (``from_dict`` checks their shape) are bounded here too."""
    names = lambda found: [bounded(n) for n in found[:N.MAX_LIST_ITEMS]]  # noqa: E731
    attributes: dict[str, Any] = {
        N.APPROVAL_APPROVED: names([c.name for c in cp.pending if decisions[c.id] is True]),
        N.APPROVAL_DENIED: names([c.name for c in cp.pending if decisions[c.id] is not True])}
    if edited := getattr(cp, "_edited", None):  # approved with the person's corrected arguments
        attributes[N.APPROVAL_EDITED] = names(edited)
    return attributes


def _approval_events(span: trace.Span, cp: Checkpoint, decisions: Mapping[str, Decision]) -> None:
    """One ``tracedagent.approval`` event per decided call on the span of the run that goes on
    with them: where a trace viewer's span detail (its logs) shows each decision."""
    for call in cp.pending[:N.MAX_LIST_ITEMS]:
        span.add_event(N.APPROVAL_EVENT, {
            N.GEN_AI_TOOL_NAME: bounded(call.name), N.GEN_AI_TOOL_CALL_ID: bounded(call.id),
            N.DECISION: N.DECISION_APPROVED if decisions.get(call.id) is True else N.DECISION_DENIED})


def record_decisions(t: AgentTelemetry, cp: Checkpoint, decisions: Mapping[str, Decision], now: float) -> None:
    """How long the pause lasted (``now``: wall clock, as the checkpoint may come from another
    process; a workflow's time) and each of this run's own decisions (a sub-agent's resumed
    run counts its own)."""
    if not t.metrics_on:
        return
    with guard("recording approval metrics"):
        t.approval_wait_histogram.record(max(0.0, now - cp.paused_at), {N.GEN_AI_AGENT_NAME: t.agent_name})
        for call in cp.pending:
            outcome = N.DECISION_APPROVED if decisions[call.id] is True else N.DECISION_DENIED
            t.decision_counter.add(1, {N.GEN_AI_AGENT_NAME: t.agent_name, N.GEN_AI_TOOL_NAME: bounded(call.name),
                                       N.DECISION: outcome})

RUN_ATTRIBUTES = otel_context.create_key("tracedagent.run_attributes")
"""The context key under which a run span with attributes of your own (``attributes=``) puts
them, so that a sub-agent's run started inside it carries them too (``caller_attributes``)."""


def caller_attributes() -> Mapping[str, Any] | None:
    """Your own attributes of the run whose span is current (a sub-agent's caller), if any."""
    return otel_context.get_value(RUN_ATTRIBUTES)  # type: ignore[return-value]


def baggage_entries() -> Mapping[str, object]:
    """The current context's OpenTelemetry baggage (``Agent(attributes_from_baggage=...)``)."""
    with guard("reading the baggage"):
        return baggage.get_all()
    return {}


class Resumed:
    """What a resumed run's span says of where it came from: a link to the paused run span,
    its trace id, the checkpoint's id, and the decisions (tool names approved and denied)."""

    __slots__ = ("checkpoint", "decisions")

    def __init__(self, checkpoint: Checkpoint, decisions: Mapping[str, Decision]) -> None:
        self.checkpoint = checkpoint
        self.decisions = decisions

    def attributes(self) -> dict[str, Any]:
        cp = self.checkpoint
        attributes: dict[str, Any] = {N.RESUMED_CHECKPOINT_ID: bounded(cp.id), **_approvals(cp, self.decisions)}
        if cp.trace_id:
            attributes[N.RESUMED_FROM] = bounded(cp.trace_id)
        return attributes

    def links(self) -> list[trace.Link] | None:
        cp = self.checkpoint
        if not cp.trace_id or not cp.span_id:
            return None
        context = trace.SpanContext(int(cp.trace_id, 16), int(cp.span_id, 16), is_remote=True,
                                    trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
        return [trace.Link(context)] if context.is_valid else None

    def mark_paused_trace(self, telemetry: AgentTelemetry, resumed: trace.Span) -> None:
        """A short ``tracedagent.resume`` span in the paused run's trace, a child of its run
        span, linked to the ``resumed`` run's span: the way from the pause to what came of it,
        found from the paused run's side (its run span ended long ago and cannot gain a link)."""
        links = self.links()
        if not links:
            return
        context = resumed.get_span_context()
        attributes = self.attributes()
        if context.is_valid:
            attributes[N.RESUMED_TRACE_ID] = trace.format_trace_id(context.trace_id)
        parent = trace.set_span_in_context(trace.NonRecordingSpan(links[0].context))
        span = telemetry.tracer.start_span(N.RESUME_SPAN_NAME, parent, SpanKind.INTERNAL, attributes,
                                           [trace.Link(context)] if context.is_valid else None)
        try:
            _approval_events(span, self.checkpoint, self.decisions)
        finally:
            span.end()




class RunScope(_Scope):
    """The ``invoke_agent`` span of one run, with the step span open inside it.

    Its tool lists are its steps' lists joined (``Run.tool_names``), so that the run span says
    exactly what its step spans say."""

    __slots__ = ("_t", "_step", "_priced", "_ended", "attributes")
    doing = "ending a run span"

    def __init__(self, telemetry: AgentTelemetry, budget: Budget, messages: list[Message],
                 conversation_id: str | None = None, *, asynchronous: bool = False,
                 parallel_tool_calls: bool = False, max_tool_concurrency: int | None = None,
                 resumed: Resumed | None = None, attributes: Mapping[str, Any] | None = None) -> None:
        """``messages`` is what the run starts from (system prompt, history, task): recorded
        only with content capture on, which is what replay starts from too. The driver
        (``arun`` when ``asynchronous``) and, under ``arun``, how a turn's calls were
        dispatched are recorded so that a replay dispatches them the same way. ``attributes``
        are your own (``_core/_attributes.run_attributes``: checked and bounded already), on the
        span from its start and in its context for the sub-agents' runs inside it."""
        own = attributes
        attributes = telemetry.run_start_attributes(budget)
        if own:  # under the span's own names, which no key of yours can be (reserved prefixes)
            attributes = {**own, **attributes}
        attributes[N.DRIVER] = N.DRIVER_ARUN if asynchronous else N.DRIVER_RUN
        if asynchronous:
            attributes[N.TOOLS_PARALLEL] = parallel_tool_calls
            if parallel_tool_calls and max_tool_concurrency is not None:
                attributes[N.TOOLS_MAX_CONCURRENCY] = max_tool_concurrency
        if conversation_id is not None:
            attributes[N.GEN_AI_CONVERSATION_ID] = bounded(conversation_id)
        if telemetry.capture is not None:
            with guard("capturing the task"):
                attributes.update(telemetry.capture.conversation(messages))
        links = None
        if resumed is not None:
            with guard("linking the paused run"):
                attributes.update(resumed.attributes())
                links = resumed.links()
        # A priced run's budget goes into its context: each chat span inside prices its own call.
        values = ((RUN_BUDGET, budget),) if budget.priced else ()
        if own:
            values += ((RUN_ATTRIBUTES, own),)
        _Scope.__init__(self, telemetry, telemetry.run_span_name, SpanKind.INTERNAL, attributes, links, values=values)
        self._t = telemetry
        self.attributes: Mapping[str, Any] = own or {}
        """Your own attributes on this run span (a Temporal child workflow's request carries them)."""
        self._step: StepScope | None = None
        self._ended: list[tuple[Step, ToolNames]] = []
        """Each step whose span ended with its tool lists, and those lists (final by then: a
        step is not changed once its span has ended), so the run's are joined, not recomputed."""
        self._priced = budget.priced
        """Without prices a cost is unknown, not zero: it is left off the span and the metric."""
        if resumed is not None and self.recording:
            with guard("marking the paused run's trace"):
                _approval_events(self.span, resumed.checkpoint, resumed.decisions)
                resumed.mark_paused_trace(telemetry, self.span)

    @property
    def trace_id(self) -> str | None:
        """The run's trace id in hex, or ``None`` when nothing records it."""
        with guard("reading the trace id"):
            context = self.span.get_span_context()
            if context.is_valid:
                return trace.format_trace_id(context.trace_id)
        return None

    @property
    def span_id(self) -> str | None:
        """The run span's id in hex (a paused run's checkpoint keeps it for the resumed run's link)."""
        with guard("reading the span id"):
            context = self.span.get_span_context()
            if context.is_valid:
                return trace.format_span_id(context.span_id)
        return None

    def start_step(self, index: int) -> None:
        """Open the span of loop iteration ``index``: the model and tool spans nest inside it."""
        self._step = StepScope(self._t, index)

    def end_step(self, step: Step) -> None:
        """The step did its work and the run goes on."""
        self._end_step(step, None)

    def _end_step(self, step: Step | None, stop: Stop | None) -> None:
        if self._step is None:
            return
        lists = None
        if step is not None and self.recording:
            lists = step.tool_names()
            self._ended.append((step, lists))
        self._step.end(step, lists, stop)
        self._step = None

    def end(self, run: Run) -> None:
        """The run returned: close its last step, then the run span, then count it."""
        if self._step is not None:
            # A step whose model call failed (or was cut off) is counted but not recorded.
            call_failed = run.step_count > len(run.steps)
            self._end_step(None if call_failed else run.steps[-1], run.stop)
        with guard(self.doing):
            if self.recording:
                self._set_used(run, {N.STOP_REASON: run.stop.value, N.OUTPUT_RETRIES: run.output_retries}
                               if self._t.typed else {N.STOP_REASON: run.stop.value})
                if self._t.capture is not None:  # the answer, where the run's GenAI tab shows it
                    self.span.set_attributes(self._t.capture.answer(answer_message(run)))
                if run.paused is not None:
                    self.span.set_attributes({N.CHECKPOINT_ID: run.paused.id, N.PENDING_CALLS: len(run.pending)})
                if not run.ok:  # every stopped run has its stop event in one place, whatever the reason
                    event = {N.STOP_REASON: run.stop.value, N.STEP_INDEX: (run.steps[0].index if run.steps else 0) + run.step_count - 1}
                    if run.paused is not None:
                        event[N.PENDING_CALLS] = len(run.pending)
                    self.span.add_event(N.STOP_EVENT, event)
        if run.ok or run.paused is not None:  # a pause is not a failure
            self._close()
        else:
            self.fail(run.stop.value, run.output)
        self._record_metrics(run)
        if self._t.run_listener is not None:  # online grading: after the span ended, off the run's time
            with guard("telling of a run's end"):
                self._t.run_listener.run_ended(run, self.span)

    def _set_used(self, run: Run, attributes: dict[str, Any] | None = None) -> None:
        """What the run used (with ``attributes``): steps, tokens, cost, and its tool lists.
        gen_ai.usage.* are this agent's own model calls; the totals add its sub-agents', so that
        summing usage over a trace's spans counts every call once."""
        self.span.set_attributes({
            **(attributes or {}), N.STEPS: run.step_count,
            N.GEN_AI_USAGE_INPUT_TOKENS: run.own_input_tokens, N.GEN_AI_USAGE_OUTPUT_TOKENS: run.own_output_tokens,
            N.USAGE_TOTAL_INPUT_TOKENS: run.input_tokens, N.USAGE_TOTAL_OUTPUT_TOKENS: run.output_tokens,
            **({N.COST_USD: run.own_cost, N.TOTAL_COST_USD: run.cost} if self._priced else {}),
            **tool_list_attributes(*self._tool_names(run))})
        if cache_read := run.own_cache_read_input_tokens:  # as on the chat spans: when non-zero
            self.span.set_attribute(N.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, cache_read)
        if cache_creation := run.own_cache_creation_input_tokens:
            self.span.set_attribute(N.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, cache_creation)

    def _tool_names(self, run: Run) -> ToolNames:
        """``run.tool_names()``: its steps' lists as their spans ended, joined, unless a step
        of the run did not end here (a cancelled run's step in flight), when they are read afresh."""
        ended, steps = self._ended, run.steps
        if len(ended) != len(steps) or any(step is not pair[0] for step, pair in zip(steps, ended)):
            return run.tool_names()
        return joined(ended)

    def fail(self, kind: str, description: str | None = None, used: Run | None = None) -> None:
        """The run raised instead of returning: its open step and the run span end failed,
        carrying what the run had ``used`` if that is known (steps, tokens, tool lists). An
        interruption (``kind`` is ``cancelled``) is a stop reason of its own, and is counted."""
        if self._step is not None:
            self._step.fail(kind)
            self._step = None
        cancelled = kind == N.ERROR_CANCELLED
        if (cancelled or used is not None) and self._open:
            with guard(self.doing):
                if cancelled:
                    self.span.set_attribute(N.STOP_REASON, Stop.CANCELLED.value)
                    if self._t.capture is not None:  # the GenAI tab says why no answer came
                        self.span.set_attributes(self._t.capture.answer(stop_message(Stop.CANCELLED.value, None)))
                if used is not None and self.recording:
                    self._set_used(used)
        _Scope.fail(self, kind, description)
        if cancelled and self._t.metrics_on:
            with guard("recording run metrics"):
                self._t.run_counter.add(1, {N.GEN_AI_AGENT_NAME: self._t.agent_name,
                                            N.STOP_REASON: Stop.CANCELLED.value})

    def _record_metrics(self, run: Run) -> None:
        t = self._t
        if not t.metrics_on:
            return
        with guard("recording run metrics"):
            labels = {N.GEN_AI_AGENT_NAME: t.agent_name, N.STOP_REASON: run.stop.value}
            t.run_counter.add(1, labels)
            t.steps_histogram.record(run.step_count, labels)
            if self._priced:  # its own spend: each sub-agent's run counts its own
                t.cost_counter.add(run.own_cost, t.cost_labels)



    # The machine's observer (``_core/_machine.Observer``): its transitions are the run span's.
    step_started = start_step
    step_ended = end_step
    run_ended = end

    def run_failed(self, error: BaseException, used: Run) -> None:
        """The run raised (``failure_kind`` names how); its span says what it had used."""
        self.fail(failure_kind(error), used=used)

    def waiting(self, checkpoint: Checkpoint) -> None:
        """The run waits within itself for decisions (a durable workflow): how many calls, which tools."""
        with guard("marking the wait"):
            self.span.set_attributes({N.PENDING_CALLS: len(checkpoint.pending),
                                      N.TOOLS_PENDING: [c.name for c in checkpoint.pending]})

    def decided(self, checkpoint: Checkpoint, decisions: Mapping[str, Decision], now: float) -> None:
        """The decisions it waited for arrived: on the run span as a resumed run's span has them
        (``Resumed``), counted as ``resume`` counts them."""
        with guard("marking the decisions"):
            self.span.set_attributes(_approvals(checkpoint, decisions))
            _approval_events(self.span, checkpoint, decisions)
        record_decisions(self._t, checkpoint, decisions, now)
