"""What an operator finds in Temporal: a run's facts as search attributes.

A workflow's search attributes are indexed by Temporal's visibility store:
``temporal workflow list --query 'TracedAgentWaiting=true'`` lists the runs waiting for a
person, with no worker up and no query handler run. The names and types are in
``_core/_names.py`` (``TEMPORAL_SEARCH_ATTRIBUTES``).

A custom search attribute must be registered on the namespace before any workflow sets it, and
a workflow task that upserts an unregistered one fails, and is retried, for ever: so a worker
checks at start that they are registered (``check_search_attributes``) and refuses to start
otherwise, with the commands that register them (``SearchAttributesNotRegistered``).
``run_search_attributes`` builds the upsert from a run's facts, for the workflow to send as
the run goes (started, waiting, decided, ended); ``run_memo`` the memo it sets when it starts.
"""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey, SearchAttributePair, SearchAttributeUpdate, TypedSearchAttributes
from temporalio.worker import Worker

from .._core import _names as N

__all__ = ["SearchAttributesNotRegistered", "check_search_attributes", "run_search_attributes",
           "initial_search_attributes", "run_memo", "SEARCH_KEYS", "CheckingWorker"]

MAX_KEYWORD_LENGTH = 256
"""Characters of a keyword value kept (an agent's name, a conversation id): Temporal bounds a
workflow's search attributes as a whole, and a person reads them in a list."""

SEARCH_KEYS: dict[str, SearchAttributeKey[Any]] = {
    name: (SearchAttributeKey.for_bool(name) if kind == "Bool" else SearchAttributeKey.for_keyword(name))
    for name, kind in N.TEMPORAL_SEARCH_ATTRIBUTES.items()}
"""The typed key of each search attribute, by name."""

_TYPES = {"Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD, "Bool": IndexedValueType.INDEXED_VALUE_TYPE_BOOL}


class SearchAttributesNotRegistered(RuntimeError):
    """The namespace lacks tracedagent's search attributes (or has one with another type): a
    worker does not start, since its workflows' upserts would fail their tasks for ever."""

    def __init__(self, namespace: str, missing: dict[str, str]) -> None:
        self.namespace = namespace
        """The namespace checked."""
        self.missing = missing
        """Each attribute not registered as it must be, and the type it must have."""
        flags = " ".join(f"--search-attribute {name}={kind}" for name, kind in missing.items())
        creates = "; ".join(f"temporal operator search-attribute create --namespace {namespace} --name {name} "
                            f"--type {kind}" for name, kind in missing.items())
        super().__init__(
            f"namespace {namespace!r} has not registered tracedagent's search attributes {sorted(missing)} "
            f"(with their types); a workflow upserting them would fail its task for ever. Register them: {creates} "
            f"(the dev server: `temporal server start-dev {flags}`; Temporal Cloud: `tcld namespace "
            f"search-attributes add`), or start the worker with search_attributes=False (docs/temporal.md)")


async def check_search_attributes(client: Client) -> None:
    """Raise ``SearchAttributesNotRegistered`` unless ``client``'s namespace has each of
    ``TEMPORAL_SEARCH_ATTRIBUTES`` registered with its type."""
    answer = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace))
    registered = dict(answer.custom_attributes)
    missing = {name: kind for name, kind in N.TEMPORAL_SEARCH_ATTRIBUTES.items()
               if registered.get(name) != _TYPES[kind]}
    if missing:
        raise SearchAttributesNotRegistered(client.namespace, missing)


def _facts(agent: str | None, trace_id: str | None, conversation_id: str | None, stop: str | None,
           waiting: bool | None) -> dict[str, Any]:
    values = {N.TEMPORAL_SEARCH_AGENT: agent, N.TEMPORAL_SEARCH_TRACE_ID: trace_id,
              N.TEMPORAL_SEARCH_CONVERSATION_ID: conversation_id, N.TEMPORAL_SEARCH_STOP_REASON: stop,
              N.TEMPORAL_SEARCH_WAITING: waiting}
    return {name: value[:MAX_KEYWORD_LENGTH] if isinstance(value, str) else value
            for name, value in values.items() if value is not None}


def run_search_attributes(*, agent: str | None = None, trace_id: str | None = None,
                          conversation_id: str | None = None, stop: str | None = None,
                          waiting: bool | None = None) -> list[SearchAttributeUpdate[Any]]:
    """The upsert of the facts given (``None``: left as they are) for
    ``workflow.upsert_search_attributes``: deterministic, so a replay upserts the same. ``stop``
    is ``Stop.value``; keyword values are cut to ``MAX_KEYWORD_LENGTH``."""
    return [SEARCH_KEYS[name].value_set(value)
            for name, value in _facts(agent, trace_id, conversation_id, stop, waiting).items()]


def run_memo(*, agent: str, trace_id: str | None, conversation_id: str | None) -> dict[str, str]:
    """The run's memo (``workflow.upsert_memo``): the agent, trace id and conversation id under
    the search attributes' names, shown by ``temporal workflow describe`` and the Temporal UI.
    Unlike search attributes a memo needs no registration, so a worker with
    ``search_attributes=False`` sets it too; it is not searchable."""
    return _facts(agent, trace_id, conversation_id, None, None)


def initial_search_attributes(*, agent: str | None = None, trace_id: str | None = None,
                              conversation_id: str | None = None, stop: str | None = None,
                              waiting: bool | None = None) -> TypedSearchAttributes:
    """The same facts as ``TypedSearchAttributes``: for ``start_workflow(search_attributes=...)``,
    which a client may set before any worker has run the workflow."""
    return TypedSearchAttributes([SearchAttributePair(SEARCH_KEYS[name], value)
                                  for name, value in _facts(agent, trace_id, conversation_id, stop, waiting).items()])


class CheckingWorker(Worker):
    """A ``Worker`` that first checks the namespace's search attributes (``check=True``): before
    it polls anything, from ``async with`` as from ``run()``."""

    def __init__(self, client: Client, *, check: bool, **options: Any) -> None:
        super().__init__(client, **options)
        self._search_client = client
        self._check_first = check

    async def _checked(self) -> None:
        if self._check_first:
            await check_search_attributes(self._search_client)
            self._check_first = False  # once: ``async with`` runs ``run()`` after its own check

    async def __aenter__(self) -> CheckingWorker:
        await self._checked()  # raised here, nothing has started: the block does not run
        await super().__aenter__()
        return self

    async def run(self) -> None:
        await self._checked()
        await super().run()
