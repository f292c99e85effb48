"""Durable agent runs on Temporal (``pip install tracedagent[temporal]``; docs/temporal.md).

A run is a workflow: the loop's decisions run in it, deterministically, and each model call
and each tool call is an activity, retried on another worker when its worker dies. The run
survives its worker, a deploy, a restart of every worker; it is one trace with the shape of
``arun``'s, whichever workers ran which part, and a workflow replay emits no span twice.

    async with worker(client, [support_agent]):            # in each worker process
        ...
    run = await run_on_temporal(client, "support", task)   # anywhere: the same Run as arun's

This package imports the Temporal SDK; ``tracedagent`` itself never does. The workflow is a
pump of the run machine (``_core/_machine.py``), as ``Agent.arun`` is, its run span the
machine's observer (``_instrumentation``): every decision is the machine's (``_pump.py``).
"""

from .._core._payloads import PayloadTooLarge
from ._client import approve_on_temporal, result_of, run_on_temporal, start_on_temporal, waiting_on_temporal, worker
from ._codec import RemoteError
from ._hosting import ActivitySettings
from ._search import SearchAttributesNotRegistered
from ._workflow import AgentRun

__all__ = ["ActivitySettings", "AgentRun", "PayloadTooLarge", "RemoteError", "SearchAttributesNotRegistered", "approve_on_temporal", "result_of", "run_on_temporal",
           "start_on_temporal", "waiting_on_temporal", "worker"]
