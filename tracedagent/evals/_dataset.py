"""``Case`` and ``Dataset``: what to run and how to grade it, saved as JSON (always) or YAML
(with PyYAML, the ``evals`` extra). A file's graders are named ``module:attr``: a grader, or a
function making one (a built-in, with its ``args``)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from .._traces._recorded import Recording, ReplayError
from ._case import Case
from ._grade import Grader, as_grader

if TYPE_CHECKING:
    from .._agent._loop import Agent
    from .._testing._recorder import Recorder
    from ._report import Report

__all__ = ["Dataset", "DatasetError", "resolve_grader", "import_ref"]


class DatasetError(ValueError):
    """A dataset file that cannot be read (its format, a case, or a grader it names), or a
    dataset that cannot be saved (a grader with no ``module:attr`` name)."""


def import_ref(ref: str) -> Any:
    """What ``module:attr`` names (``attr`` may be dotted); ``DatasetError`` when it cannot be imported."""
    module, _, attr = ref.partition(":")
    if not module or not attr:
        raise DatasetError(f"a grader or an agent is named module:attr, not {ref!r}")
    try:
        found: Any = importlib.import_module(module)
        for part in attr.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise DatasetError(f"{ref!r} cannot be imported: {exc}") from None
    return found


def resolve_grader(entry: Any) -> Grader:
    """A file's grader entry: ``"module:attr"`` or ``{"grader": "module:attr", "args": {...},
    "threshold": t, "name": n}``. A built-in (or any function returning a ``Grader``) is called
    with ``args``; anything else named is the grader itself."""
    if isinstance(entry, str):
        entry = {"grader": entry}
    if not isinstance(entry, Mapping) or not isinstance(entry.get("grader"), str):
        raise DatasetError(f"a grader entry is 'module:attr' or a mapping with 'grader', not {entry!r}")
    found = import_ref(entry["grader"])
    args = entry.get("args")
    if not isinstance(found, Grader) and (args is not None or getattr(found, "__module__", "").startswith("tracedagent.evals")):
        try:
            found = found(**(args or {}))
        except TypeError as exc:
            raise DatasetError(f"grader {entry['grader']!r} with args {args!r}: {exc}") from None
    try:
        return as_grader(found, threshold=entry.get("threshold"), name=entry.get("name"))
    except TypeError as exc:
        raise DatasetError(str(exc)) from None


def _grader_entry(g: Grader, default_threshold: float) -> Any:
    if g.ref is None:
        raise DatasetError(f"grader {g.name!r} has no module:attr name (a lambda or closure): it cannot be saved")
    entry: dict[str, Any] = {"grader": g.ref}
    if g.args:
        entry["args"] = dict(g.args)
    if g.threshold != default_threshold:
        entry["threshold"] = g.threshold
    if g.name != g.ref.rpartition(":")[2].rpartition(".")[2]:
        entry["name"] = g.name
    return entry["grader"] if len(entry) == 1 else entry


def _case(raw: Any, where: str) -> Case:
    if isinstance(raw, str):
        return Case(task=raw)
    if not isinstance(raw, Mapping) or not isinstance(raw.get("task"), str):
        raise DatasetError(f"{where}: a case is a mapping with a 'task' string, not {raw!r}")
    unknown = set(raw) - {"task", "name", "expected_output", "metadata", "recording"}
    if unknown:
        raise DatasetError(f"{where}: unknown case field(s) {sorted(unknown)}")
    recording = None
    if raw.get("recording") is not None:
        try:
            recording = Recording.from_json(raw["recording"])
        except (ReplayError, TypeError, ValueError) as exc:
            raise DatasetError(f"{where}: its recording cannot be read: {exc}") from None
    return Case(task=raw["task"], name=raw.get("name"), expected_output=raw.get("expected_output"),
                metadata=dict(raw.get("metadata") or {}), recording=recording)


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:
        raise DatasetError("YAML datasets need PyYAML: pip install 'tracedagent[evals]' (or use .json)") from None
    return yaml


class Dataset:
    """Cases and the graders every case is graded by: a case passes when every grader passes."""

    def __init__(self, cases: Iterable[Case | str], graders: Iterable[Any] = (), *, name: str | None = None) -> None:
        self.cases: list[Case] = [Case(task=c) if isinstance(c, str) else c for c in cases]
        """The cases, in order (a string is a case with only a task)."""
        self.graders: list[Grader] = [as_grader(g) for g in graders]
        """Each case's graders, as ``Grader`` (a plain callable gets its name, threshold 1.0)."""
        self.name = name
        """The dataset's name in reports (JUnit's suite)."""
        names = [g.name for g in self.graders]
        if len(set(names)) != len(names):
            raise DatasetError(f"two graders share a name in {names}: rename one (dataclasses.replace(g, name=...), "
                               "or name: in a file)")
        case_names = self.case_names()
        if len(set(case_names)) != len(case_names):  # a report's cases are compared by name: one would hide the other
            shared = sorted({n for n in case_names if case_names.count(n) > 1})
            raise DatasetError(f"two cases share a name ({shared}): give one another (Case name=)")

    @classmethod
    def from_traces(cls, source: str | Path | None = None, graders: Iterable[Any] = (), *, name: str | None = None,
                    skipped: list[Any] | None = None, **found: Any) -> Dataset:
        """A case per recorded run (``Case.from_recorded``) that ``recorded_runs(source, **found)``
        finds: e.g. every ``stop_reason="step_budget_exhausted"`` run of a file, each failure a
        case. The runs need their content (recorded with content capture on); ``RecordedRunsError``
        names one that cannot be a case, raised - or, given ``skipped`` (a list), put there while
        every other run still becomes a case."""
        from ._recorded import recordings
        from ._report import numbered
        made = recordings(source, skipped=skipped, **found)
        names = numbered([f"{r.agent} {r.trace_id}" for r in made])
        return cls([Case.from_recorded(r, name=n) for r, n in zip(made, names)], graders, name=name)

    def case_names(self) -> list[str]:
        """Each case's name in reports: its own, or ``case-N``."""
        return [c.name or f"case-{i}" for i, c in enumerate(self.cases)]

    # --- files --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        cases = [{k: v for k, v in (("task", c.task), ("name", c.name), ("expected_output", c.expected_output),
                                    ("metadata", dict(c.metadata)),
                                    ("recording", c.recording and c.recording.to_json())) if v not in (None, {})}
                 for c in self.cases]
        data: dict[str, Any] = {"cases": cases, "graders": [_grader_entry(g, 1.0) for g in self.graders]}
        return {"name": self.name, **data} if self.name else data

    @classmethod
    def from_dict(cls, data: Any, where: str = "dataset") -> Dataset:
        if not isinstance(data, Mapping) or not isinstance(data.get("cases"), list):
            raise DatasetError(f"{where}: a dataset is a mapping with a 'cases' list")
        cases = [_case(raw, f"{where}: case {i}") for i, raw in enumerate(data["cases"])]
        return cls(cases, [resolve_grader(g) for g in data.get("graders") or ()], name=data.get("name"))

    def save(self, path: str | Path) -> None:
        """As JSON, or YAML for a ``.yaml`` / ``.yml`` path (PyYAML)."""
        path = Path(path)
        data = self.to_dict()
        if path.suffix in (".yaml", ".yml"):
            path.write_text(_yaml().safe_dump(data, sort_keys=False, allow_unicode=True))
        else:
            path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Dataset:
        """A dataset file (JSON, or YAML by its suffix); ``DatasetError`` names what is wrong."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise DatasetError(f"{path}: {exc.strerror}") from None
        try:
            data = _yaml().safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
        except DatasetError:
            raise
        except Exception as exc:  # json's and yaml's errors: the file is not that format
            raise DatasetError(f"{path}: not valid {path.suffix.lstrip('.') or 'JSON'}: {exc}") from None
        return cls.from_dict(data, str(path))

    # --- experiments ----------------------------------------------------------------------
    def evaluate(self, agent: Agent | Callable[[Case], Agent] | None = None, *, repeat: int = 1, concurrency: int = 1,
                 max_cost: float | None = None, recorder: Recorder | None = None, **telemetry: Any) -> Report:
        """Each case played ``repeat`` times and graded: ``tracedagent.evals.evaluate``."""
        from ._experiment import evaluate
        return evaluate(self, agent, repeat=repeat, concurrency=concurrency, max_cost=max_cost,
                        recorder=recorder, **telemetry)

    async def aevaluate(self, agent: Agent | Callable[[Case], Agent] | None = None, *, repeat: int = 1, concurrency: int = 1,
                        max_cost: float | None = None, recorder: Recorder | None = None, **telemetry: Any) -> Report:
        """``evaluate`` through ``Agent.arun``, ``concurrency`` runs at a time on the event loop."""
        from ._experiment import aevaluate
        return await aevaluate(self, agent, repeat=repeat, concurrency=concurrency, max_cost=max_cost,
                               recorder=recorder, **telemetry)

    def __len__(self) -> int:
        return len(self.cases)

    def __repr__(self) -> str:
        return f"<Dataset {self.name or ''} cases={len(self.cases)} graders={[g.name for g in self.graders]}>"

