"""Assertions that read well in a test and, when they fail, say what the run actually did.

Each takes a ``RunView`` or a whole ``Recorder``. Where one run is meant
(``assert_stop``, ``assert_span_tree``), a recorder must hold exactly one run; the tool
assertions look at every run and every ``execute_tool`` span the recorder holds.
"""

from __future__ import annotations

from typing import Any, Sequence, Union

from opentelemetry.sdk.trace import ReadableSpan

from .._core import _names as N
from .._core._budget import Stop
from .._core._records import ToolOutcome
from ._recorder import Recorder
from ._views import RunView

__all__ = ["assert_stop", "assert_never_executed", "assert_requested", "assert_span_tree",
           "RAN_OUTCOMES", "SpanSpec"]

RAN_OUTCOMES = frozenset({ToolOutcome.OK.value, ToolOutcome.ERROR.value, ToolOutcome.FATAL.value})
"""Outcomes of a call whose tool function was actually invoked. A tool that raised half-way
may still have moved the money, so ``error`` and ``fatal`` count as executed; ``denied``,
``invalid_arguments`` and ``unknown_tool`` calls never reached the function."""

SpanSpec = Union[str, tuple[str, Sequence[Any]]]
"""A node of ``assert_span_tree``'s expected tree: a span name (its children unchecked),
or ``(name, [child, ...])`` whose children must match exactly, in start order; a
trailing ``...`` in the list allows further children."""


def _one_run(target: Recorder | RunView) -> RunView:
    __tracebackhide__ = True
    return target.only_run() if isinstance(target, Recorder) else target


def _runs(target: Recorder | RunView) -> list[RunView]:
    return target.runs() if isinstance(target, Recorder) else [target]


def _tool_spans(target: Recorder | RunView) -> list[ReadableSpan]:
    if isinstance(target, Recorder):
        return target.spans(operation_name=N.OP_EXECUTE_TOOL)
    return target.tool_spans


def _describe(target: Recorder | RunView) -> str:
    runs = _runs(target)
    return "\n\n".join(run.summary() for run in runs) if runs else "  (no run spans recorded)"


def assert_stop(run: Recorder | RunView, stop: Stop | str, *, steps: int | None = None) -> None:
    """The run stopped for ``stop`` (and, if given, after exactly ``steps`` model turns)."""
    __tracebackhide__ = True
    view = _one_run(run)
    expected = Stop(stop)
    problems = []
    if view.stop_reason != expected.value:
        problems.append(f"expected the run to stop with {expected.value!r}, but it stopped with "
                        f"{view.stop_reason!r}")
    if steps is not None and view.steps != steps:
        problems.append(f"expected the run to take {steps} steps, but it took {view.steps}")
    if problems:
        raise AssertionError("\n".join(problems) + "\n" + view.summary())


def assert_never_executed(target: Recorder | RunView, tool: str) -> None:
    """The tool's function never ran: passes when a guardrail denied the call (the
    request is the model's doing; the defence worked), fails on any call whose outcome is
    ``ok``, ``error`` or ``fatal`` (see ``RAN_OUTCOMES``)."""
    __tracebackhide__ = True
    ran = [s for s in _tool_spans(target) if s.attributes.get(N.GEN_AI_TOOL_NAME) == tool
           and s.attributes.get(N.TOOL_OUTCOME) in RAN_OUTCOMES]
    listed = [run for run in _runs(target) if tool in run.executed_tools]
    if ran or listed:
        outcomes = ", ".join(sorted({str(s.attributes.get(N.TOOL_OUTCOME)) for s in ran}))
        how = (f"it ran {len(ran)} time(s) (outcome {outcomes})" if ran
               else f"{len(listed)} run span(s) list it as executed")
        raise AssertionError(f"expected {tool!r} never to execute, but {how}\n{_describe(target)}")


def assert_requested(target: Recorder | RunView, tool: str) -> None:
    """The model asked for ``tool`` at least once, whether or not it was allowed to run:
    the security signal that an injection reached the model's decisions."""
    __tracebackhide__ = True
    requested = [name for run in _runs(target) for name in run.requested_tools]
    requested += [str(s.attributes.get(N.GEN_AI_TOOL_NAME)) for s in _tool_spans(target)]
    if tool not in requested:
        raise AssertionError(f"expected the model to request {tool!r}, but it requested "
                             f"{sorted(set(requested)) or 'no tools'}\n{_describe(target)}")


def assert_span_tree(target: Recorder | RunView, expected: SpanSpec) -> None:
    """The run's spans form ``expected``, a nested spec of span names (see ``SpanSpec``)::

        assert_span_tree(run, ("invoke_agent support", [
            ("step", ["chat fake-model", "execute_tool lookup_order"]),
            ("step", ["chat fake-model"]),
        ]))
    """
    __tracebackhide__ = True
    view = _one_run(target)
    problem = _mismatch(view.span, expected, view, view.span.name)
    if problem is not None:
        raise AssertionError(f"span tree differs at {problem}\n\nexpected:\n{_render_spec(expected)}"
                             f"\n\nactual:\n{view.tree()}")


def _split(node: SpanSpec) -> tuple[str, list[Any] | None]:
    if isinstance(node, str):
        return node, None
    if isinstance(node, tuple) and len(node) == 2 and isinstance(node[0], str) and isinstance(node[1], (list, tuple)):
        children = list(node[1])
        if Ellipsis in children[:-1]:
            raise TypeError(f"'...' may only end a children list, in {node!r}")
        return node[0], children
    raise TypeError(f"a span spec is a name or a (name, [children]) tuple, not {node!r}")


def _mismatch(span: ReadableSpan, node: SpanSpec, view: RunView, where: str) -> str | None:
    """Where ``span`` first differs from ``node`` (a path of names), or None if it matches."""
    name, wanted = _split(node)
    if span.name != name:
        return f"{where}: expected a span named {name!r}, found {span.name!r}"
    if wanted is None:
        return None
    open_ended = bool(wanted) and wanted[-1] is Ellipsis
    wanted = wanted[:-1] if open_ended else wanted
    actual = view.children(span)
    if len(actual) < len(wanted) or (len(actual) > len(wanted) and not open_ended):
        expected_names = [_split(w)[0] for w in wanted] + (["..."] if open_ended else [])
        return (f"{where}: expected children {expected_names}, found {[c.name for c in actual]}")
    for index, (child, child_node) in enumerate(zip(actual, wanted)):
        problem = _mismatch(child, child_node, view, f"{where} > {child.name} #{index}")
        if problem is not None:
            return problem
    return None


def _render_spec(node: SpanSpec, depth: int = 0) -> str:
    name, children = _split(node)
    lines = ["  " * depth + name]
    for child in children or ():
        lines.append("  " * (depth + 1) + "..." if child is Ellipsis else _render_spec(child, depth + 1))
    return "\n".join(lines)
