"""A run as its trace recorded it: what replay plays back and what ``diff`` compares.

One reader turns a trace's spans into a ``Recording`` - the task, the system prompt, the
history, the budget, and step by step the model's turn and what each tool call did - and
one converter (``_replay.steps_of``) turns a ``Run`` into the same ``RecordedStep`` form, so that a
recorded run and a replayed one are compared field by field, with one rule.

Everything comes off span attributes named in ``_names``. The content (turns, arguments,
results) is there only when the run was recorded with content capture on; ``Recording.of``
refuses a trace without it, or with content cut at the capture limit, in one line that says
how to record it again.

A trace file may have been edited by anyone, so every attribute is read as the type it
should have, or as missing: a tool list that is a number, a message whose ``parts`` is one,
are not iterated.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .._core import _names as N
from .._core._budget import Budget, Stop
from ._otlp_json import parse_json
from .._core._records import Message, ToolOutcome
from ._trace import (SpanRecord, Trace, finite_or_none, int_or_none, is_int, list_or_empty, str_or_none,
                     string_list)

__all__ = ["ReplayError", "RecordedCall", "RecordedStep", "Recording", "FORMAT", "TOOL_LISTS"]

FORMAT = "tracedagent-replay/1"
"""The ``format`` of a recording's JSON; a file of another format is refused."""


class ReplayError(ValueError):
    """A trace replay cannot use; the message is one line that says what to do."""


@dataclass(kw_only=True)
class RecordedCall:
    """One tool call the model asked for, and what became of it."""

    id: str
    """The call id the model gave (``gen_ai.tool.call.id``)."""
    name: str
    """The tool the model asked for."""
    arguments: dict[str, Any] | str | None = None
    """As the model sent them: an object, or its raw malformed string; ``None`` without content."""
    outcome: str | None = None
    """A ``ToolOutcome`` value; ``None`` when the call was never dispatched (the run stopped first)."""
    result: str | None = None
    """What the model was shown (``gen_ai.tool.call.result``); ``None`` without content."""
    error_type: str | None = None
    """``error.type`` of a call that failed, e.g. ``ToolError``."""
    deadline_cut: bool = False
    """The run's deadline cut the call off (``tracedagent.tool.deadline_cut``)."""
    until_deadline: bool = False
    """As a stub: the run's time ran out during this call, so the stub waits past the deadline."""


@dataclass(kw_only=True)
class RecordedStep:
    """One model turn (or a model call that failed) and its tool calls, in call order."""

    text: str | None = None
    """The model's text; ``None`` without content."""
    calls: list[RecordedCall] = field(default_factory=list)
    """The calls the turn asked for, dispatched or not."""
    usage: dict[str, int] = field(default_factory=dict)
    """``input_tokens``, ``output_tokens`` and, when reported, the cache counts."""
    model: str | None = None
    """``gen_ai.response.model``."""
    finish_reason: str | None = None
    """The provider's finish reason."""
    response_id: str | None = None
    """``gen_ai.response.id``."""
    error: str | None = None
    """``error.type`` of a model call that failed (``timeout``: the run's deadline cut it off)."""


@dataclass(kw_only=True)
class Recording:
    """Everything replay needs from one run's trace, and what the run did (the expectations)."""

    format: str = FORMAT
    """The version of this record's JSON (first in the file, so that a reader sees it first)."""
    trace_id: str
    """The trace the run was read from."""
    agent: str
    """``gen_ai.agent.name``."""
    task: str
    """The user's message that started the run."""
    system_prompt: str | None = None
    """From ``gen_ai.system_instructions``."""
    history: list[Message] = field(default_factory=list)
    """The messages given before the task."""
    budget: dict[str, Any] = field(default_factory=dict)
    """``Budget`` fields as the run span recorded them."""
    request_model: str | None = None
    """``gen_ai.request.model`` of the run."""
    driver: str = "run"
    """``run``, ``arun``, ``stream`` or ``astream``, as the run span says (``tracedagent.driver``); else ``arun``
    when the trace shows what only ``arun`` does (overlapping calls, a call the deadline cut), or ``run``."""
    parallel_tool_calls: bool = True
    """Under ``arun``: whether a turn's calls were dispatched concurrently."""
    max_tool_concurrency: int | None = None
    """Under ``arun``: at most this many calls at once (``None``: no limit)."""
    tool_names: list[str] = field(default_factory=list)
    """The agent's tools as far as the trace tells: every tool an ``unknown_tool`` reply listed,
    then every other tool that was dispatched."""
    steps: list[RecordedStep] = field(default_factory=list)
    """Every step, in order: the model's turns, and what each call did (the expectations)."""
    stubs: list[RecordedCall] = field(default_factory=list)
    """What each dispatched call answered, in dispatch order: what the stub tools give back (a copy
    of the steps' calls, so that a stub can be changed without changing what is expected)."""
    stop_reason: str = ""
    """``tracedagent.stop_reason``."""
    step_count: int = 0
    """``tracedagent.steps``: model calls attempted."""
    tools: dict[str, list[str]] = field(default_factory=dict)
    """The run span's tool lists by ``TOOL_LISTS`` key (each cut at ``MAX_LIST_ITEMS``, as the span holds them)."""
    tool_counts: dict[str, int] = field(default_factory=dict)
    """The full length of each of those lists that was cut."""
    input_tokens: int | None = None
    """The agent's own input tokens (``gen_ai.usage.input_tokens``)."""
    output_tokens: int | None = None
    """The agent's own output tokens."""
    cost: float | None = None
    """``tracedagent.cost_usd``, when the budget had prices."""
    output_type: str | None = None
    """A typed run's output type name (``tracedagent.output.type_name``); ``None``: a text answer."""
    output_type_path: str | None = None
    """Where that type lives, ``module:qualname`` (``tracedagent.output.type_path``), when it was recorded."""
    resumed: dict[str, Any] | None = None
    """For a resumed run (``tracedagent.resumed_from``): ``step_index`` of its decided calls,
    the tokens spent before the pause, and ``decided``: each call's id, name, arguments,
    outcome and result. Replay resumes a checkpoint of the recorded conversation with them."""
    # --- reading a trace ---------------------------------------------------------------

    @classmethod
    def of(cls, spans: Sequence[SpanRecord], *, agent: str | None = None, require_content: bool = True,
           source: str = "the trace") -> Recording:
        """The run at the top of the trace (its root ``invoke_agent`` span), or the first run of
        ``agent`` (a sub-agent's, say). ``ReplayError`` when there is none, when it did not return
        (cancelled), or - with ``require_content`` - when its content was not captured or was cut."""
        trace = Trace(spans)
        runs = [s for s in trace.spans if s.is_run and N.STOP_REASON in s.attributes]
        if agent is not None:
            runs = [s for s in runs if s.attributes.get(N.GEN_AI_AGENT_NAME) == agent]
        if not runs:
            what = f"no run of agent {agent!r}" if agent is not None else "no tracedagent run"
            raise ReplayError(f"{source}: trace {trace.trace_id} has {what} (no {N.OP_INVOKE_AGENT} span with "
                              f"{N.STOP_REASON})")
        span = min(runs, key=lambda s: (trace.depth(s), s.start_ns))
        a = span.attributes
        if a[N.STOP_REASON] == Stop.CANCELLED.value:
            raise ReplayError(f"{source}: the run of {a.get(N.GEN_AI_AGENT_NAME)!r} was cancelled; only a run that "
                              f"returned can be replayed")
        reader = _Reader(source, require_content)
        system = reader.json(a, N.GEN_AI_SYSTEM_INSTRUCTIONS, "the run's system prompt", optional=True)
        opening = reader.json(a, N.GEN_AI_INPUT_MESSAGES, "the run's task")
        messages = [_loop_message(m) for m in opening] if isinstance(opening, list) else []
        resumed, decided = _decided(trace, span, reader) if N.RESUMED_FROM in a else (None, [])
        task = "" if resumed is not None else messages.pop()["content"] if messages else ""  # resumed: all history
        steps = [reader.step(trace, step) for step in sorted(
            (c for c in trace.children(span) if c.name == N.STEP_SPAN_NAME),
            key=lambda s: int_or_none(s.attributes.get(N.STEP_INDEX)) or 0)]
        steps = [s for s in steps if s is not None]
        tool_spans = [t for step in trace.children(span) for t in trace.children(step)
                      if t.operation == N.OP_EXECUTE_TOOL]
        return cls(
            trace_id=trace.trace_id, agent=str(a.get(N.GEN_AI_AGENT_NAME, "agent")), task=str(task),
            system_prompt=next((str_or_none(p.get("content")) for p in list_or_empty(system) if isinstance(p, dict)), None),
            history=messages, budget=_budget(a), request_model=str_or_none(a.get(N.GEN_AI_REQUEST_MODEL)),
            driver=_driver(trace, span, tool_spans),
            parallel_tool_calls=a.get(N.TOOLS_PARALLEL) is not False,
            max_tool_concurrency=max(int_or_none(a.get(N.TOOLS_MAX_CONCURRENCY)) or 0, 0) or None,
            tool_names=list(dict.fromkeys([*_tool_names(steps), *(c.name for c in decided)])), steps=steps,
            stubs=[c for c in decided if c.outcome != ToolOutcome.DENIED.value] + _stubs(steps, str(a[N.STOP_REASON])),
            resumed=resumed, output_type=str_or_none(a.get(N.OUTPUT_TYPE_NAME)),
            output_type_path=str_or_none(a.get(N.OUTPUT_TYPE_PATH)),
            stop_reason=str(a[N.STOP_REASON]),
            step_count=int_or_none(a.get(N.STEPS)) or 0,
            tools={key: string_list(a.get(name)) for key, name in TOOL_LISTS.items()},
            tool_counts={key: a[name + N.COUNT_SUFFIX] for key, name in TOOL_LISTS.items()
                         if is_int(a.get(name + N.COUNT_SUFFIX))},
            input_tokens=int_or_none(a.get(N.GEN_AI_USAGE_INPUT_TOKENS)),
            output_tokens=int_or_none(a.get(N.GEN_AI_USAGE_OUTPUT_TOKENS)),
            cost=finite_or_none(a.get(N.COST_USD)))

    # --- JSON --------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Recording:
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise ReplayError(f"not a tracedagent replay recording (expected format {FORMAT!r})")
        fields = dict(data)
        fields["steps"] = [RecordedStep(**{**step, "calls": [RecordedCall(**c) for c in step.get("calls", [])]})
                           for step in fields.get("steps", [])]
        fields["stubs"] = [RecordedCall(**c) for c in fields.get("stubs", [])]
        return cls(**fields)

    def make_budget(self) -> Budget:
        """The run's ``Budget``: its recorded ceilings and prices (the rest as ``Budget``'s defaults)."""
        return Budget(**self.budget)


TOOL_LISTS = {"requested": N.TOOLS_REQUESTED, "executed": N.TOOLS_EXECUTED, "blocked": N.TOOLS_BLOCKED,
              "not_dispatched": N.TOOLS_NOT_DISPATCHED, "pending": N.TOOLS_PENDING}
"""``Recording.tools``' keys, and the run span's attributes they are read from."""

_BUDGET_FIELDS = {N.BUDGET_MAX_STEPS: "max_steps", N.BUDGET_MAX_TOKENS: "max_tokens", N.BUDGET_MAX_COST: "max_cost",
                  N.BUDGET_REPEAT_LIMIT: "repeat_limit", N.BUDGET_NO_PROGRESS_LIMIT: "no_progress_limit",
                  N.BUDGET_MAX_SECONDS: "max_seconds", N.BUDGET_MAX_TOOL_CALLS_PER_STEP: "max_tool_calls_per_step",
                  N.BUDGET_MAX_TOOL_CALLS: "max_tool_calls", N.BUDGET_PRICE_PER_1K_INPUT: "price_per_1k_input",
                  N.BUDGET_PRICE_PER_1K_OUTPUT: "price_per_1k_output", N.BUDGET_PRICE_PER_1K_CACHE_READ:
                  "price_per_1k_cache_read", N.BUDGET_PRICE_PER_1K_CACHE_WRITE: "price_per_1k_cache_write"}


def _budget(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The run span's budget; a ceiling it does not name had none (``None``), as the span omits
    unset ones (``max_steps`` and ``repeat_limit`` always have one); a non-number is not named."""
    budget: dict[str, Any] = {"max_tool_calls_per_step": None}
    for name, key in _BUDGET_FIELDS.items():
        if finite_or_none(attributes.get(name)) is not None:
            budget[key] = attributes[name]
    return budget


def _captured_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(m, dict) and isinstance(m.get("parts", []), list) for m in value)


def _parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A GenAI message's typed parts (the objects among them)."""
    return [p for p in list_or_empty(message.get("parts")) if isinstance(p, dict)]


def _driver(trace: Trace, run: SpanRecord, tool_spans: list[SpanRecord]) -> str:
    recorded = run.attributes.get(N.DRIVER)
    if recorded in (N.DRIVER_RUN, N.DRIVER_ARUN, N.DRIVER_STREAM, N.DRIVER_ASTREAM):
        return str(recorded)
    return N.DRIVER_ARUN if _only_arun(trace, run, tool_spans) else N.DRIVER_RUN


def _only_arun(trace: Trace, run: SpanRecord, tool_spans: list[SpanRecord]) -> bool:
    """Whether the trace shows what only ``arun`` does: a step's tool calls overlapping, or a
    call the deadline cut off (tool or model: ``run`` cannot cut a call off)."""
    for step in trace.children(run):
        tools = sorted((t for t in trace.children(step) if t.operation == N.OP_EXECUTE_TOOL), key=lambda t: t.start_ns)
        if any(b.start_ns < a.end_ns for a, b in zip(tools, tools[1:])):
            return True
        if any(c.operation == N.OP_CHAT and c.attributes.get(N.ERROR_TYPE) == N.ERROR_TIMEOUT
               for c in trace.children(step)):
            return True
    return any(t.attributes.get(N.TOOL_DEADLINE_CUT) is True for t in tool_spans)


def _decided(trace: Trace, run: SpanRecord, reader: _Reader) -> tuple[dict[str, Any], list[RecordedCall]]:
    """A resumed run's decided calls (its step without a model call) and what it spent before."""
    a = run.attributes
    step = next((s for s in trace.children(run) if s.name == N.STEP_SPAN_NAME and s.attributes.get(N.STEP_RESUMED)),
                None)
    calls = []
    for t in [c for c in trace.children(step) if c.operation == N.OP_EXECUTE_TOOL] if step is not None else []:
        ta = t.attributes
        calls.append(RecordedCall(id=str(ta.get(N.GEN_AI_TOOL_CALL_ID)), name=str(ta.get(N.GEN_AI_TOOL_NAME)),
                                  arguments=_arguments(ta.get(N.GEN_AI_TOOL_CALL_ARGUMENTS)),
                                  outcome=str(ta.get(N.TOOL_OUTCOME)),
                                  result=reader.text(ta.get(N.GEN_AI_TOOL_CALL_RESULT), "a decided call's result",
                                                     ta, N.GEN_AI_TOOL_CALL_RESULT)))
    before = {k: (int_or_none(a.get(total)) or 0) - (int_or_none(a.get(own)) or 0) for k, total, own in (
        ("input_tokens", N.USAGE_TOTAL_INPUT_TOKENS, N.GEN_AI_USAGE_INPUT_TOKENS),
        ("output_tokens", N.USAGE_TOTAL_OUTPUT_TOKENS, N.GEN_AI_USAGE_OUTPUT_TOKENS))}
    index = (int_or_none(step.attributes.get(N.STEP_INDEX)) if step is not None else None) or 0
    return {"step_index": index, **before, "decided": [dataclasses.asdict(c) for c in calls]}, calls


def _arguments(raw: Any) -> Any:
    try:  # a tool span's captured arguments (JSON), as the model sent them
        return parse_json(raw) if isinstance(raw, str) else None
    except ValueError:
        return raw


def _tool_names(steps: list[RecordedStep]) -> list[str]:
    """The registry's tools as the trace tells them: an ``unknown_tool`` reply lists them (up to
    32); any other tool that was dispatched (and not denied, which happens before the name is
    looked up) was registered too."""
    names: list[str] = []
    for call in (c for s in steps for c in s.calls):
        if call.outcome == ToolOutcome.UNKNOWN_TOOL.value and call.result and "Available tools: " in call.result:
            listed = call.result.rsplit("Available tools: ", 1)[1].rstrip(".")
            listed = listed.split(" and ", 1)[0] if listed.endswith(" more") else listed
            names += [n for n in listed.split(", ") if n != "none" and n not in names]
    for call in (c for s in steps for c in s.calls):
        if call.outcome not in (None, ToolOutcome.UNKNOWN_TOOL.value, ToolOutcome.DENIED.value) \
                and call.name not in names:
            names.append(call.name)
    return names


def _stubs(steps: list[RecordedStep], stop_reason: str) -> list[RecordedCall]:
    """The dispatched calls, copied, the one during which the run's time ran out marked: a call the deadline
    cut off, or the last call of a run that stopped out of time right after its tools (``_answered_late``)."""
    stubs = [dataclasses.replace(c) for s in steps for c in s.calls if c.outcome is not None]  # held ones too
    cut = [c for c in stubs if c.deadline_cut]
    if cut:
        cut[0].until_deadline = True
    elif stop_reason == Stop.TIME_BUDGET.value and steps and steps[-1].error is None and any(
            c.outcome is not None for c in steps[-1].calls):  # (then ``stubs`` holds that call)
        stubs[-1].until_deadline = True
    return stubs


class _Reader:
    """Reads content attributes, refusing what replay cannot use."""

    def __init__(self, source: str, require_content: bool) -> None:
        self.source, self.require = source, require_content

    def json(self, attributes: Mapping[str, Any], name: str, what: str, *, optional: bool = False) -> Any:
        """A captured JSON attribute (messages, a system prompt's parts): a list of objects whose
        ``parts`` are a list; anything else was not written by tracedagent, and would replay something else."""
        raw = attributes.get(name)
        if raw is None:
            if self.require and not optional:
                raise ReplayError(f"{self.source}: {what} was not captured: record the run with content capture on "
                                  f"(Agent(capture_content=True) or {N.ENV_CAPTURE_CONTENT}=true)")
            return None
        text = self.text(raw, what, attributes, name)
        try:
            value = parse_json(text) if text is not None else None
            if value is not None and not _captured_list(value):
                raise ValueError("not a list of messages")
            return value
        except ValueError:
            if self.require:
                raise ReplayError(f"{self.source}: {what} is not the JSON tracedagent captures ({name})") from None
            return None

    def text(self, raw: Any, what: str, attributes: Mapping[str, Any], name: str) -> str | None:
        """``raw`` if it is a string, refused if the span says it was cut (``tracedagent.content.truncated``)."""
        if not isinstance(raw, str):
            return None
        if self.require and name in string_list(attributes.get(N.CONTENT_TRUNCATED)):
            raise ReplayError(f"{self.source}: {what} was cut at the capture limit; record the run again with "
                              f"{N.ENV_CONTENT_MAX_LENGTH} raised (default {N.DEFAULT_CONTENT_MAX_LENGTH} characters)")
        return raw

    def step(self, trace: Trace, step: SpanRecord) -> RecordedStep | None:
        children = trace.children(step)
        chat = next((c for c in children if c.operation == N.OP_CHAT), None)
        if chat is None:
            return None
        a = chat.attributes
        index = step.attributes.get(N.STEP_INDEX)
        tool_spans = [c for c in children if c.operation == N.OP_EXECUTE_TOOL]
        if chat.status == "error":
            return RecordedStep(error=str(a.get(N.ERROR_TYPE) or "Exception"))
        output = self.json(a, N.GEN_AI_OUTPUT_MESSAGES, f"the model's turn in step {index}")
        message = output[0] if isinstance(output, list) and output and isinstance(output[0], dict) else None
        finish = a.get(N.GEN_AI_RESPONSE_FINISH_REASONS) or [None]
        recorded = RecordedStep(
            usage={k: v for k, v in (("input_tokens", a.get(N.GEN_AI_USAGE_INPUT_TOKENS)),
                                     ("output_tokens", a.get(N.GEN_AI_USAGE_OUTPUT_TOKENS)),
                                     ("cache_read_input_tokens", a.get(N.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS)),
                                     ("cache_creation_input_tokens", a.get(N.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS)))
                   if is_int(v)},
            model=str_or_none(a.get(N.GEN_AI_RESPONSE_MODEL)), response_id=str_or_none(a.get(N.GEN_AI_RESPONSE_ID)),
            finish_reason=str_or_none(finish[0]) if isinstance(finish, list) else None)
        if message is not None:
            parts = _parts(message)
            recorded.text = "".join(str(p.get("content", "")) for p in parts if p.get("type") == "text")
            recorded.calls = [RecordedCall(id=str(p.get("id")), name=str(p.get("name")), arguments=p.get("arguments"))
                              for p in parts if p.get("type") == "tool_call"]
        else:  # no content: the calls' names, from the step span (their ids come from the tool spans)
            recorded.calls = [RecordedCall(id="", name=n) for n in string_list(step.attributes.get(N.TOOLS_REQUESTED))]
        self._fill_outcomes(recorded.calls, tool_spans, index)
        waiting = string_list(step.attributes.get(N.TOOLS_PENDING))
        for call in recorded.calls:  # held for a person's decision: no span, named on the step span
            if call.outcome is None and call.name in waiting:
                waiting.remove(call.name)
                call.outcome = ToolOutcome.PENDING.value
        return recorded

    def _fill_outcomes(self, calls: list[RecordedCall], tool_spans: list[SpanRecord], index: Any) -> None:
        """Each dispatched call's outcome and result, matched by call id (or, without content,
        by position: dispatched calls are a prefix of the requested ones)."""
        by_id = {str(t.attributes.get(N.GEN_AI_TOOL_CALL_ID)): t for t in tool_spans}
        for position, call in enumerate(calls):
            span = by_id.pop(call.id, None) if call.id else (tool_spans[position] if position < len(tool_spans) else None)
            if span is None:
                continue
            t = span.attributes
            call.outcome = str(t.get(N.TOOL_OUTCOME, ToolOutcome.ERROR.value))
            call.deadline_cut = t.get(N.TOOL_DEADLINE_CUT) is True
            call.error_type = str_or_none(t.get(N.ERROR_TYPE)) if t.get(N.ERROR_TYPE) != call.outcome else None
            call.result = self.text(t.get(N.GEN_AI_TOOL_CALL_RESULT), f"a result of {call.name} in step {index}",
                                    t, N.GEN_AI_TOOL_CALL_RESULT)
            if call.result is None and self.require:
                raise ReplayError(f"{self.source}: the result of {call.name} in step {index} was not captured: record "
                                  f"the run with content capture on ({N.ENV_CAPTURE_CONTENT}=true)")
            if not call.id:
                call.id = str(t.get(N.GEN_AI_TOOL_CALL_ID))


def _loop_message(message: Any) -> Message:
    """A GenAI ``ChatMessage`` of typed parts back in the loop's shape."""
    if not isinstance(message, dict):
        return {"role": "user", "content": str(message)}
    parts = _parts(message)
    role = str(message.get("role", "user"))
    response = next((p for p in parts if p.get("type") == "tool_call_response"), None)
    if response is not None:
        out: Message = {"role": "tool", "tool_call_id": response.get("id"), "content": str(response.get("response", ""))}
        if message.get("name"):
            out["name"] = message["name"]
        return out
    out = {"role": role, "content": "".join(str(p.get("content", "")) for p in parts if p.get("type") == "text")}
    calls = [{"id": p.get("id"), "name": p.get("name"), "arguments": p.get("arguments")}
             for p in parts if p.get("type") == "tool_call"]
    if calls:
        out["tool_calls"] = calls
    return out
