"""The operator's view without a server: tracedagent's search attribute names and types in one
place, registered by the stack's dev server (stack.sh, docker-compose.yml) exactly as named; a
worker's check names what is missing and how to register it; the upsert carries the facts given."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import yaml

pytest.importorskip("temporalio")  # the test group installs it: never skipped in CI

from temporalio.api.enums.v1 import IndexedValueType  # noqa: E402
from temporalio.common import SearchAttributeIndexedValueType  # noqa: E402

from tracedagent._core import _names as N  # noqa: E402
from tracedagent.temporal import SearchAttributesNotRegistered  # noqa: E402
from tracedagent.temporal._search import (MAX_KEYWORD_LENGTH, check_search_attributes,  # noqa: E402
                                          initial_search_attributes, run_search_attributes)

from _shared import ROOT  # noqa: E402

KEYWORD, BOOL = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD, IndexedValueType.INDEXED_VALUE_TYPE_BOOL


def test_the_stacks_dev_server_registers_every_search_attribute_with_its_type():
    expected = {f"{name}={kind}" for name, kind in N.TEMPORAL_SEARCH_ATTRIBUTES.items()}
    assert len(expected) == 5
    stack = re.search(r"^TEMPORAL_SEARCH_ATTRIBUTES=\(([^)]*)\)", (ROOT / "scripts/stack.sh").read_text(), re.M)
    assert set(stack.group(1).split()) == expected
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["temporal"]["command"]
    assert {value for flag, value in zip(compose, compose[1:]) if flag == "--search-attribute"} == expected


def test_the_weaver_registry_names_each_search_attribute():
    groups = yaml.safe_load((ROOT / "semconv" / "registry.yaml").read_text())["groups"]
    (temporal,) = [g for g in groups if g["id"] == "registry.tracedagent.temporal"]
    for name, kind in N.TEMPORAL_SEARCH_ATTRIBUTES.items():
        assert f"`{name}` ({kind};" in temporal["note"]


class Operator:
    """A client whose namespace has ``registered`` search attributes (name to indexed type)."""

    def __init__(self, registered: dict) -> None:
        self.namespace = "prod"

        async def list_search_attributes(request):
            assert request.namespace == "prod"
            return SimpleNamespace(custom_attributes=registered)

        self.operator_service = SimpleNamespace(list_search_attributes=list_search_attributes)


async def test_the_check_passes_on_a_namespace_with_every_attribute_and_names_what_is_missing_otherwise():
    everything = {name: KEYWORD if kind == "Keyword" else BOOL for name, kind in N.TEMPORAL_SEARCH_ATTRIBUTES.items()}
    await check_search_attributes(Operator({**everything, "CustomerId": KEYWORD}))

    wrong = {**everything, N.TEMPORAL_SEARCH_WAITING: KEYWORD}
    del wrong[N.TEMPORAL_SEARCH_TRACE_ID]
    with pytest.raises(SearchAttributesNotRegistered) as raised:
        await check_search_attributes(Operator(wrong))
    error = raised.value
    assert error.namespace == "prod"
    assert error.missing == {N.TEMPORAL_SEARCH_TRACE_ID: "Keyword", N.TEMPORAL_SEARCH_WAITING: "Bool"}
    message = str(error)
    assert ("temporal operator search-attribute create --namespace prod --name TracedAgentWaiting --type Bool"
            in message)
    assert "--search-attribute TracedAgentTraceId=Keyword" in message and "search_attributes=False" in message


def test_the_upsert_carries_the_facts_given_with_their_types_and_bounded_keywords():
    upsert = run_search_attributes(agent="support", trace_id="ab" * 16, waiting=True)
    assert [(u.key.name, u.value) for u in upsert] == [
        (N.TEMPORAL_SEARCH_AGENT, "support"), (N.TEMPORAL_SEARCH_TRACE_ID, "ab" * 16), (N.TEMPORAL_SEARCH_WAITING, True)]
    assert upsert[-1].key.indexed_value_type is SearchAttributeIndexedValueType.BOOL
    (ended,) = run_search_attributes(stop="answered")
    assert (ended.key.name, ended.value) == (N.TEMPORAL_SEARCH_STOP_REASON, "answered")
    (long,) = run_search_attributes(conversation_id="c" * 10_000)
    assert long.value == "c" * MAX_KEYWORD_LENGTH
    start = initial_search_attributes(agent="support", conversation_id="conv-1", waiting=False)
    assert {p.key.name: p.value for p in start} == {N.TEMPORAL_SEARCH_AGENT: "support",
                                                     N.TEMPORAL_SEARCH_CONVERSATION_ID: "conv-1",
                                                     N.TEMPORAL_SEARCH_WAITING: False}
