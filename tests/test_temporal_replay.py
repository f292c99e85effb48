"""Workflows in flight survive an upgrade of the workers: every history in
tests/data/temporal_histories (recorded by the worker before the workflow became a pump of the
run machine: ``tests/temporal_histories.py``) replays against today's workflow code with no
nondeterminism error. No server: Temporal's ``Replayer`` feeds the recorded events to the
workflow, which must ask for the same commands (activities, child workflows, timers) in the
same order."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("temporalio")  # the test group installs it: never skipped in CI
from temporalio.client import WorkflowHistory  # noqa: E402
from temporalio.worker import Replayer  # noqa: E402
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions  # noqa: E402

from temporal_histories import DIRECTORY, HISTORIES, SEARCHABLE, all_agents  # noqa: E402
from tracedagent.temporal import ActivitySettings, AgentRun  # noqa: E402
from tracedagent.temporal._hosting import host, unhost  # noqa: E402

FILES = sorted(DIRECTORY.glob("*.json")) + sorted(SEARCHABLE.glob("*.json"))
BUILD = "histories"
REPLAY_QUEUE = f"replay-{BUILD}"
"""The task queue a ``Replayer`` given ``build_id=BUILD`` tells the workflow it runs on."""


def workflow_id(path) -> str:
    """The recorded run's workflow id (a child workflow's id is checked against its command):
    ``history-NAME``, a sub-agent's as its caller's history started it."""
    name, _, child = path.stem.partition(".child")
    parent = f"history-{name}"
    if not child:
        return parent
    events = WorkflowHistory.from_json(parent, (path.parent / f"{name}.json").read_text()).events
    started = sorted(e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
                     for e in events if e.HasField("child_workflow_execution_started_event_attributes"))
    return started[int(child)]


@pytest.fixture(scope="module")
def hosted():
    agents = all_agents()
    for agent in agents:
        host(REPLAY_QUEUE, agent, ActivitySettings())
    yield
    for agent in agents:
        unhost(REPLAY_QUEUE, agent.name)


@pytest.mark.parametrize("directory", [DIRECTORY, SEARCHABLE], ids=["pre-pump", "searchable"])
def test_every_recorded_run_has_a_history(directory):
    files = [path for path in FILES if path.parent == directory]
    assert {path.name.split(".")[0] for path in files} == set(HISTORIES)
    assert any(".child" in path.name for path in files), "a sub-agent's child workflow is recorded too"


def test_the_searchable_histories_hold_the_patch_markers_and_the_upserts():
    """What the replay of ``searchable/`` guards: a later worker must ask for these again."""
    events = WorkflowHistory.from_json("x", (SEARCHABLE / "approval-approved.json").read_text()).events
    patches = [json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
               for e in events if e.HasField("marker_recorded_event_attributes")]
    assert sorted(patches) == ["tracedagent-memo", "tracedagent-search-attributes"]
    upserts = [e for e in events if e.HasField("upsert_workflow_search_attributes_event_attributes")]
    assert len(upserts) >= 4, "started, waiting, decided, ended"
    assert any(e.HasField("workflow_properties_modified_event_attributes") for e in events), "the memo"


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
async def test_a_history_recorded_by_the_previous_worker_replays_without_nondeterminism(hosted, path):
    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(
        "tracedagent", "opentelemetry"))
    replayer = Replayer(workflows=[AgentRun], workflow_runner=runner, build_id=BUILD)
    history = WorkflowHistory.from_json(workflow_id(path), path.read_text())
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure!r}"
