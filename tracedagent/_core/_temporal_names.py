"""tracedagent.temporal's names: a part of ``_names`` (which re-exports every one, so ``N.TEMPORAL_...``
is where code reads them), in a module of its own only to keep ``_names`` readable at one sitting."""

# tracedagent.temporal (docs/temporal.md): a run driven by a Temporal workflow is an ``arun``
# run (its driver attribute says so, and replay plays it so); these say where it ran.
TEMPORAL_WORKFLOW_ID = "tracedagent.temporal.workflow_id"
"""On the run span and the client's span: the workflow that drove the run (find it in Temporal)."""
TEMPORAL_TASK_QUEUE = "tracedagent.temporal.task_queue"
"""On the run span and the client's span: the task queue its workers poll."""
TEMPORAL_ATTEMPT = "tracedagent.temporal.attempt"
"""On a chat or tool span made in an activity: the activity's attempt, 1 first. A retried
activity (its worker died, or it timed out) is a second span with attempt 2, never a silent
duplicate; an attempt whose worker died before its span ended has no span."""
TEMPORAL_CLIENT_SPAN = "run_on_temporal"
"""The client's span (``run_on_temporal {agent}``): the run span's parent, wherever it runs."""
TEMPORAL_WORKFLOW = "tracedagent.run"
"""The workflow type that drives an agent's run."""
TEMPORAL_MODEL_ACTIVITY = "tracedagent.model_call"
TEMPORAL_TOOL_ACTIVITY = "tracedagent.tool_call"
TEMPORAL_PROGRESS_QUERY = "tracedagent.progress"
"""The workflow's query: the run's steps and tokens so far (answered from a replay of its history)."""
TEMPORAL_DEFAULT_TASK_QUEUE = "tracedagent"
TEMPORAL_DECIDE_UPDATE = "tracedagent.decide"
"""The workflow's update carrying a person's decisions on the calls its run waits for."""
TEMPORAL_WAITING_QUERY = "tracedagent.waiting"
"""The workflow's query: the calls its run waits for a decision on (empty when none)."""
# Temporal search attributes (docs/temporal.md, "The operator's view"): a run's facts where
# `temporal workflow list --query` and the Temporal UI find them, with no worker up. Registered
# on the namespace before a worker starts (scripts/stack.sh does it for the dev server).
TEMPORAL_SEARCH_AGENT = "TracedAgentName"
"""Keyword: the agent's name (``gen_ai.agent.name``)."""
TEMPORAL_SEARCH_TRACE_ID = "TracedAgentTraceId"
"""Keyword: the run's trace id (``Run.trace_id``, 32 hex digits): from a trace to its workflow."""
TEMPORAL_SEARCH_CONVERSATION_ID = "TracedAgentConversationId"
"""Keyword: the run's conversation id (``gen_ai.conversation.id``), when it has one."""
TEMPORAL_SEARCH_STOP_REASON = "TracedAgentStopReason"
"""Keyword: why the run ended (``tracedagent.stop_reason``), once it has."""
TEMPORAL_SEARCH_WAITING = "TracedAgentWaiting"
"""Bool: the run waits for a person's decisions (``approve_on_temporal``)."""
TEMPORAL_SEARCH_ATTRIBUTES = {TEMPORAL_SEARCH_AGENT: "Keyword", TEMPORAL_SEARCH_TRACE_ID: "Keyword",
                              TEMPORAL_SEARCH_CONVERSATION_ID: "Keyword", TEMPORAL_SEARCH_STOP_REASON: "Keyword",
                              TEMPORAL_SEARCH_WAITING: "Bool"}
"""Each search attribute and its Temporal type, as ``--search-attribute NAME=TYPE`` registers it."""

__all__ = sorted(name for name in dir() if name.isupper() and not name.startswith("_"))
