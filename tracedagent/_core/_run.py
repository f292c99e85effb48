"""The state a run accumulates, and every decision taken on it; it builds the ``Run``
(``_result.py``: ``Run``, ``Step``, ``ToolNames``, re-exported here).

``RunState`` holds everything one run accumulates and makes every decision the loop takes
on it: the repeat check, the budget checks, and the one finish path. A driver (``Agent.run``)
only calls the model and the tools and asks ``RunState`` what to do next, so a second
driver (an async one) shares every decision instead of copying it.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import threading
import time
from typing import Any, Sequence

from ._budget import Budget, Stop
from ._deadline import Clock, Deadline
from ._messages import check_messages
from ._pausing import Pausing
from ._payloads import PayloadTooLarge
from ._provider_messages import loop_messages
from ._names import MAX_NAME_LENGTH
from ._output import OutputRequest, OutputSpec, bounded_problem, retry_message
from ._usage import RunUsage
from ._records import Completion, Message, ToolCall, ToolOutcome, ToolResult, Usage, error_type
from ._request import ModelRequest, ModelSettings
from ._result import Run, Step, ToolNames

__all__ = ["ToolNames", "Step", "Run", "RunState", "initial_messages", "canonical_arguments", "current_run", "DEADLINE_CUT_RESULT"]


def initial_messages(system_prompt: str | None, history: Sequence[Message] | None, task: str) -> list[Message]:
    """System prompt first if there is one, then the history, then the task. A history in OpenAI's
    or Anthropic's message shapes is converted to the loop's first (``loop_messages``); one that is
    not a list of loop messages then is ``MalformedMessage`` (a ``ValueError``; so is a provider's
    message that does not convert, ``ProviderMessageError``), before anything runs."""
    if history is not None:
        history = loop_messages(history)
        check_messages(history)
    messages: list[Message] = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.extend(history or ())  # loop_messages made new dicts
    messages.append({"role": "user", "content": task})
    return messages


_CANONICAL_JSON = json.JSONEncoder(sort_keys=True, default=str)  # what json.dumps(v, sort_keys=True, default=str) builds


def canonical_arguments(arguments: Any) -> str:
    """Arguments' identity for the repeat check: key order does not make a call new, and what
    JSON tells apart (1, 1.0, true, "1") stays apart."""
    try:
        return _CANONICAL_JSON.encode(arguments)
    except (Exception, RecursionError):  # unsortable keys (a custom model's tuples), a cycle, a str() that raises
        try:
            return repr(arguments)
        except (Exception, RecursionError):  # too deep, an int too long to print, a repr that raises:
            return f"<arguments at {id(arguments):#x}>"  # never a repeat


DEADLINE_CUT_RESULT = "Stopped: the run's time budget ran out during this call."
"""What the model is shown of a call the run's deadline cut off (``RunState.cut_off``)."""


current_run: contextvars.ContextVar[RunState | None] = contextvars.ContextVar("tracedagent_run", default=None)
"""The run whose loop is running in this context: a run started while it is set (by a tool,
typically ``Agent.as_tool``) is its sub-run. Tasks and ``asyncio.to_thread`` carry it."""


class RunState(Pausing):
    """Everything one run accumulates, and the decisions made on it (pausing for a person's
    decision and continuing from a checkpoint: ``Pausing``).

    Any driver builds one (``Agent.run`` and ``arun`` do; a workflow engine's driver may):
    ``budget`` and the first ``messages`` (``initial_messages``) are all it needs. Time is read
    only through ``clock``, so a driver whose time is not the process's gives its own.
    """

    def __init__(self, budget: Budget, messages: list[Message], *, clock: Clock | None = None,
                 trace_id: str | None = None, conversation_id: str | None = None,
                 parent: RunState | None = None, agent: str = "agent", tools: Sequence[str] = (),
                 span_id: str | None = None) -> None:
        """``clock``: seconds that never go back (default: the parent run's, else
        ``time.monotonic``); ``trace_id``: the run span's, reported on the ``Run``;
        ``conversation_id``: ``gen_ai.conversation.id``; ``parent``: the run whose tool
        started this one (its limits are this run's too, and this run's spend is its);
        ``agent``, ``tools``, ``span_id``: the agent's name, its tools' names and the run span's
        id, a paused run's checkpoint's identity."""
        self.agent = agent
        self.tools = tuple(sorted(tools))
        self.span_id = span_id
        self.budget = budget
        self.messages = messages
        self.trace_id = trace_id
        self.conversation_id = conversation_id
        self.parent = parent
        """The run that started this one from a tool (a team's sub-agent), if any."""
        self.clock: Clock = clock or (parent.clock if parent is not None else time.monotonic)
        """Where every decision of this run reads the time."""
        self.started = self.clock()
        self.deadline = None if budget.max_seconds is None else Deadline.after(budget.max_seconds, self.clock)
        """When the time budget runs out, if there is one."""
        self.steps: list[Step] = []
        self.sub_runs: list[Run] = []
        self.usage = RunUsage(cost_known=budget.priced)
        """Everything the run and its sub-agents have used so far."""
        self._request: ModelRequest | None = None
        self._lock = threading.Lock()
        self._ceilinged = any(run.budget.max_tokens is not None or run.budget.max_cost is not None
                              for run in self._lineage())
        """Whether this run or one above it has a token or cost ceiling (budgets never change):
        nearly every run has none, and ``_ceilings`` is not asked."""
        self._seen_calls: dict[tuple[str, str], int] = {}
        self._steps_without_progress = 0
        self.typed = False
        """Whether the run has an output type (its answer's output is the validated value, which
        may be ``None``); set by its machine."""
        self.output_retries = 0
        """Answers sent back because they did not validate (``invalid_output``)."""

    def request(self, tools: list[dict[str, Any]] | None, settings: ModelSettings,
                output: OutputRequest | None = None) -> ModelRequest:
        """The next model call: the whole conversation, the tools on offer, the agent's
        settings, and what is left of the time budget as its timeout (``RunMachine`` asks it
        for each turn; so do the streaming drivers). Without a time budget the last call's
        request is the next one's (its ``messages`` are this run's conversation, which has grown
        since), as long as the tools and settings are the same objects: a step makes no request."""
        deadline = self.deadline
        if deadline is None:
            last = self._request
            if (last is not None and last.tools is tools and last.settings is settings
                    and last.messages is self.messages and last.output is output):
                return last
            self._request = last = ModelRequest(messages=self.messages, tools=tools, settings=settings, output=output)
            return last
        return ModelRequest(messages=self.messages, tools=tools, settings=settings, timeout=deadline.left(),
                            output=output)

    def record(self, index: int, completion: Completion) -> Step:
        """Account for a model turn and append it to the conversation."""
        step = Step(index=index, completion=completion)
        self.steps.append(step)
        self.messages.append(completion.as_message())
        usage = completion.usage
        cost = self.budget.cost_of(usage.input_tokens, usage.output_tokens,
                                   cache_read_input_tokens=usage.cache_read_input_tokens,
                                   cache_creation_input_tokens=usage.cache_creation_input_tokens
                                   ) if self.usage.cost_known else 0.0  # unpriced: unknown, never summed
        if self.parent is None:
            self.usage.incr(usage, cost)
        else:
            self.charge(usage, cost)
        return step

    def record_decided(self, index: int, calls: Sequence[ToolCall]) -> Step:
        """The decided calls of a resumed run, as a step of their own (no model call, no usage):
        the paused turn and its results are in the conversation already."""
        step = Step(index=index, completion=Completion(tool_calls=list(calls)), resumed=True)
        self.steps.append(step)
        return step

    def charge(self, usage: Usage, cost: float) -> None:
        """Count a model call (a sub-agent's, or this run's own under a parent) in this run's
        totals and its parents', as it happens: sub-agents running side by side each see what
        the others spent (a team's ceiling holds)."""
        with self._lock:  # sub-agents may run in worker threads
            self.usage.incr(usage, cost)
        if self.parent is not None:
            self.parent.charge(usage, cost)

    @property
    def input_tokens(self) -> int:
        return self.usage.input_tokens

    @property
    def output_tokens(self) -> int:
        return self.usage.output_tokens

    @property
    def cost(self) -> float:
        return self.usage.cost

    @property
    def tool_calls(self) -> int:
        return self.usage.tool_calls

    def child_budget(self, budget: Budget) -> Budget:
        """The budget of a sub-agent's run: its own ceilings, lowered to what this run has left
        of its tokens, cost and time. Without prices of its own it takes this run's: a spend
        it cannot price would pass the team's cost ceiling as free. (Sub-agents side by side
        are also held to the team's ceilings as they spend: ``over_budget``.)"""
        b, changes = self.budget, {}
        if b.max_tokens is not None:
            left = max(0, b.max_tokens - self.usage.total_tokens)
            changes["max_tokens"] = left if budget.max_tokens is None else min(budget.max_tokens, left)
        if b.max_cost is not None:
            left_usd = max(0.0, b.max_cost - self.cost)
            changes["max_cost"] = left_usd if budget.max_cost is None else min(budget.max_cost, left_usd)
        if (left_s := self.seconds_left()) is not None:
            changes["max_seconds"] = left_s if budget.max_seconds is None else min(budget.max_seconds, left_s)
        if b.priced and not budget.priced:
            changes.update(b.prices())
        return dataclasses.replace(budget, **changes) if changes else budget

    def absorb(self, sub_run: Run) -> None:
        """Keep a finished sub-agent's run (its spend was counted as it happened: ``charge``)."""
        with self._lock:  # sub-agents may run in worker threads
            self.sub_runs.append(sub_run)

    def seconds_left(self) -> float | None:
        """What is left of the time budget (never negative), or ``None`` without one: the
        timeout a model adapter is given."""
        return None if self.deadline is None else self.deadline.left()

    def _time_up(self) -> bool:
        deadline = self.deadline
        return deadline is not None and deadline.passed()

    def out_of_time(self) -> Run | None:
        """The time budget, checked before each model call (and with the other ceilings after
        each step's tools)."""
        deadline = self.deadline
        return self.finish(Stop.TIME_BUDGET) if deadline is not None and deadline.passed() else None

    def before_call(self) -> Run | None:
        """Before each model call: the time budget, and whether anything is left of the token
        and cost budgets of this run and of the runs above it. A sub-agent started after its
        team spent everything has a budget of 0: calling the model would only spend past it."""
        return self.out_of_time() or (self._ceilings(before_call=True) if self._ceilinged else None)

    def model_failed(self, error: BaseException | None, received: Completion | None = None) -> Run:
        """A model call that raised, or (``None``) was cut off at the deadline: out of time if
        the time budget ran out meanwhile (the adapter was given what was left as its
        timeout), else the model's error. The failed call still counts as a step; what a
        streamed call had delivered before it broke or was cut (``received``) is kept as it."""
        if isinstance(error, PayloadTooLarge):  # the request was not sent: the conversation cannot go on
            return self.finish(Stop.PAYLOAD_LIMIT, error=error, call_failed=True)
        out_of_time = error is None or self._time_up()
        if received is not None:
            self.record(len(self.steps), received)
        return self.finish(Stop.TIME_BUDGET if out_of_time else Stop.MODEL_ERROR, error=error,
                           call_failed=received is None)

    def may_start(self, call: ToolCall) -> bool:
        """Whether a turn's next call is dispatched: not once the run's time is up (a call
        already running is cut off instead: ``cut_off``)."""
        deadline = self.deadline  # (``_time_up``, without a call: asked before every tool call)
        return deadline is None or not deadline.passed()

    @staticmethod
    def ends_turn(result: ToolResult) -> bool:
        """Whether a result keeps the turn's later calls from being dispatched, when they are
        dispatched one after another: a fatal one (``append`` then ends the run)."""
        return result.outcome is ToolOutcome.FATAL

    @staticmethod
    def cut_off(call: ToolCall) -> ToolResult:
        """The result of a call the run's deadline cut off while it ran."""
        return ToolResult(call.id, call.name, DEADLINE_CUT_RESULT, ToolOutcome.TIMEOUT, deadline_cut=True)

    def append(self, step: Step, *results: ToolResult) -> Run | None:
        """Keep dispatched calls' results on their step, in call order, and show each to the
        model; a fatal one ends the run once every result is kept (the model never learns of it)."""
        fatal = False
        for result in results:
            step.tool_results.append(result)
            if result.outcome is ToolOutcome.FATAL:
                fatal = True
            elif result.outcome is not ToolOutcome.PENDING:  # shown once it is decided
                self.messages.append(result.as_message())
        return self.finish(Stop.TOOL_FATAL) if fatal else None

    def check_turn(self, calls: Sequence[ToolCall]) -> Run | None:
        """Before anything of a turn is dispatched: the tool-call ceilings, then the repeat
        check, which stops a stuck agent before it pays for the same call again."""
        b = self.budget
        self.usage.count_tool_calls(len(calls))
        if b.max_tool_calls_per_step is not None and len(calls) > b.max_tool_calls_per_step:
            return self.finish(Stop.TOOL_CALL_BUDGET, detail=f"{len(calls)} tool calls in one turn, over the "
                                                             f"limit of {b.max_tool_calls_per_step}")
        if b.max_tool_calls is not None and self.tool_calls > b.max_tool_calls:
            return self.finish(Stop.TOOL_CALL_BUDGET, detail=f"{self.tool_calls} tool calls in the run, over "
                                                             f"the limit of {b.max_tool_calls}")
        for call in calls:
            key = (call.name, canonical_arguments(call.arguments))
            times = self._seen_calls[key] = self._seen_calls.get(key, 0) + 1
            if times > b.repeat_limit:
                return self.finish(Stop.REPEATED_CALL, detail=(call.name, times))
        return None

    def over_budget(self) -> Run | None:
        """Time, token, cost and progress ceilings, checked once the step's work is done."""
        if stopped := self.out_of_time() or (self._ceilings(before_call=False) if self._ceilinged else None):
            return stopped
        b = self.budget
        if b.no_progress_limit is not None:
            progressed = bool(self.steps and self.steps[-1].succeeded_names)
            self._steps_without_progress = 0 if progressed else self._steps_without_progress + 1
            if self._steps_without_progress >= b.no_progress_limit:
                return self.finish(Stop.NO_PROGRESS)
        return None

    def _ceilings(self, *, before_call: bool) -> Run | None:
        """The token and cost ceilings of this run and of the runs above it (a sub-agent's
        parents count every sibling's spend as it happens: when one is over, the team is).
        Before a model call a ceiling is reached once nothing is left of it; after a step's
        work, once it is passed. The one check both ask, so the two cannot drift apart."""
        for run in self._lineage():
            b, used = run.budget, run.usage
            if b.max_tokens is not None and (used.total_tokens > b.max_tokens
                                             or before_call and used.total_tokens == b.max_tokens):
                return self.finish(Stop.TOKEN_BUDGET, detail=self._why(run, before_call, "tokens"))
            if b.max_cost is not None and (used.cost > b.max_cost or before_call and used.cost == b.max_cost
                                           and (used.cost > 0 or b.max_cost == 0)):
                return self.finish(Stop.COST_BUDGET, detail=self._why(run, before_call, "cost"))
        return None

    def _lineage(self) -> list[RunState]:
        """This run, then the run whose tool started it, and so on up."""
        runs, run = [], self
        while run is not None:
            runs.append(run)
            run = run.parent
        return runs

    def _why(self, run: RunState, before_call: bool, ceiling: str) -> str | None:
        """What a token or cost stop says (``None``: this run's own ceiling passed, ``_explain``'s)."""
        b, used, team = run.budget, run.usage, "" if run is self else "its team's "
        if before_call and ceiling == "tokens":
            return f"nothing was left of {team or 'its '}{b.max_tokens}-token budget ({used.total_tokens} tokens used)"
        if before_call:
            return f"nothing was left of {team or 'its '}${b.max_cost:.4f} cost budget (${used.cost:.4f} spent)"
        if not team:
            return None
        if ceiling == "tokens":
            return f"its team used {used.total_tokens} tokens, over the team's {b.max_tokens}-token budget"
        return f"its team spent ${used.cost:.4f}, over the team's ${b.max_cost:.4f} cost budget"

    def invalid_output(self, spec: OutputSpec, problem: str, *, step_left: bool) -> Run | None:
        """An answer that did not validate against the output type: ``Stop.INVALID_OUTPUT`` once
        ``max_output_retries`` are spent; with a retry left but no step (``step_left``) the step
        budget, as after a turn of tool calls; else the model is told the problem (``None``: the
        run calls it again)."""
        if self.output_retries >= self.budget.max_output_retries:
            return self.finish(Stop.INVALID_OUTPUT, detail=(spec.name, problem))
        if not step_left:
            return self.finish(Stop.STEP_BUDGET)
        self.output_retries += 1
        self.messages.append({"role": "user", "content": retry_message(spec, problem)})
        return None

    def finish(self, stop: Stop, *, error: BaseException | None = None, detail: Any = None,
               call_failed: bool = False, value: Any = None) -> Run:
        """The one exit: every stop produces a ``Run`` with a named reason. ``value`` is a typed
        answer's value (else an answer's output is its text)."""
        text = self.steps[-1].completion.text if self.steps else ""
        if stop is Stop.ANSWERED:
            output = value if self.typed else text
        else:
            output = self._explain(stop, error, detail)
        used = self.usage
        return Run(output=output, text=text, output_retries=self.output_retries, stop=stop, steps=self.steps, step_count=len(self.steps) + call_failed,
                   messages=self.messages,
                   input_tokens=used.input_tokens, output_tokens=used.output_tokens, cost=used.cost,
                   trace_id=self.trace_id, error=error, sub_runs=list(self.sub_runs),
                   conversation_id=self.conversation_id, carried=self.carried, resumed=self.resumed,
                   paused=detail if stop is Stop.APPROVAL_REQUIRED else None)

    def _explain(self, stop: Stop, error: BaseException | None, detail: Any) -> str:
        b = self.budget
        if stop is Stop.STEP_BUDGET:
            return f"Stopped: reached the {b.max_steps}-step limit without an answer."
        if stop is Stop.REPEATED_CALL:
            name, times = detail
            name = name if len(name) <= MAX_NAME_LENGTH else name[:MAX_NAME_LENGTH] + "..."  # the model chose it
            return f"Stopped: repeated the same {name} call {times} times without progress."
        if stop is Stop.TOOL_FATAL:
            return "Stopped: the run hit an unrecoverable tool error."
        if stop in (Stop.TOKEN_BUDGET, Stop.COST_BUDGET) and detail is not None:  # the team's ceiling
            return f"Stopped: {detail}."
        if stop is Stop.TOKEN_BUDGET:
            return (f"Stopped: used {self.usage.total_tokens} tokens, "
                    f"over the {b.max_tokens}-token budget.")
        if stop is Stop.COST_BUDGET:
            return f"Stopped: spent ${self.cost:.4f}, over the ${b.max_cost:.4f} cost budget."
        if stop is Stop.NO_PROGRESS:
            return f"Stopped: {self._steps_without_progress} steps in a row without a successful tool call."
        if stop is Stop.MODEL_ERROR:
            return f"Stopped: the model call failed ({error_type(error)})."
        if stop is Stop.TIME_BUDGET:
            return f"Stopped: ran out of the {b.max_seconds:g}-second time budget."
        if stop is Stop.TOOL_CALL_BUDGET:
            return f"Stopped: the model asked for {detail}."
        if stop is Stop.INVALID_OUTPUT:
            name, problem = detail
            return (f"Stopped: the answer is not a valid {name} after {self.output_retries} "
                    f"retr{'y' if self.output_retries == 1 else 'ies'} ({bounded_problem(problem)}).")
        if stop is Stop.PAYLOAD_LIMIT:
            return f"Stopped: the conversation reached the durable run's payload limit ({error})."
        if stop is Stop.CANCELLED:  # a stream whose consumer stopped reading: stream.run
            return "Stopped: the run was cancelled before it ended."
        if stop is Stop.APPROVAL_REQUIRED:
            waiting = detail.calls()
            return f"Paused: {len(waiting)} tool call(s) wait for approval ({', '.join(c.name for c in waiting)})."
        raise AssertionError(f"no explanation for {stop!r}")  # pragma: no cover - Stop is closed
