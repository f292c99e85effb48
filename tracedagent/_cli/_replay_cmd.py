"""What ``tracedagent replay`` and ``tracedagent diff`` do, behind their command-line options.

``replay`` writes a pytest file and, beside it, the recording it plays (a ``Recording`` as
JSON): the test is a few lines anyone can read, and the recorded data stays data. ``diff``
reads two runs (content optional) and puts them side by side, with the first step at which
they part. Everything drawn comes from traces a model wrote into, so it goes through ``text``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text

from .._traces._recorded import RecordedStep, Recording, ReplayError
from ._render import format_cost, stop_style, text
from .._testing._replay import TYPE_PATH, first_divergence, imported, load_spans
from .._traces._printable import printable
from .._core._budget import Stop
from .._core._tools import Registry

__all__ = ["load_recording", "write_test", "diff_view", "default_test_path"]

_TRACE_ID = re.compile(r"^[0-9a-fA-F]{1,32}$")
_REAL_TOOLS = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def load_recording(source: str, *, trace_id: str | None, agent: str | None, jaeger: str,
                   require_content: bool = True) -> Recording:
    """``source`` is an OTLP/JSON file, or a trace id to fetch from Jaeger."""
    if _TRACE_ID.match(source) and not Path(source).exists():
        spans, name = load_spans(source, jaeger=jaeger)
    else:
        spans, name = load_spans(source, trace_id=trace_id)
    return Recording.of(spans, agent=agent, require_content=require_content, source=name)


def default_test_path(recording: Recording) -> Path:
    slug = re.sub(r"[^0-9a-z]+", "_", recording.agent.lower()).strip("_")[:40] or "run"
    return Path("tests") / f"test_replay_{slug}.py"


def write_test(recording: Recording, out: Path, *, real_tools: str | None = None,
               output_type: str | None = None) -> Path:
    """Write the test to ``out`` and the recording beside it (same name, ``.json``); returns
    the recording's path. ``real_tools`` (``module:attribute``, a ``Registry``) replaces the
    stubs; a typed run's output type is imported by the test from ``output_type`` or, without
    it, from the path its trace recorded. Both are checked importable now, so that the test
    does not fail on a typo later."""
    if real_tools is not None:
        _check_real_tools(real_tools)
    typed = _output_type_path(recording, output_type)
    data = out.with_suffix(".json")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        data.write_text(json.dumps(recording.to_json(), indent=1) + "\n", encoding="utf-8")
        out.write_text(_test_source(recording, data.name, real_tools, typed), encoding="utf-8")
    except OSError as exc:
        raise ReplayError(f"cannot write {out}: {exc.strerror or exc}") from None
    return data


def _output_type_path(recording: Recording, given: str | None) -> str | None:
    """Where the generated test imports a typed run's output type from (``None``: an untyped run)."""
    if given is None and recording.output_type is None:
        return None
    path = given or recording.output_type_path
    if path is None:
        raise ReplayError(f"the run's output type {printable(recording.output_type)} was recorded without an import "
                          f"path (a type defined in a function or in __main__, or a form like list[int]): name it "
                          f"with --output-type MODULE:NAME")
    if not TYPE_PATH.match(path):
        raise ReplayError(f"output type {printable(path)}: expected module:qualname, e.g. myapp.types:Weather "
                          f"(--output-type)")
    _imported(path, "the output type")
    return path


def _imported(spec: str, what: str) -> object:
    """``module:attribute`` imported, as pytest run from here would (the user's package on the path)."""
    sys.path.insert(0, str(Path.cwd()))  # as pytest's rootdir would: the user's package
    try:
        value: object = imported(spec)
    except Exception as exc:  # the user's module: anything it raises on import
        raise ReplayError(f"{what} {spec}: cannot import it ({type(exc).__name__}: {exc})") from None
    finally:
        sys.path.remove(str(Path.cwd()))
    return value


def _check_real_tools(spec: str) -> None:
    if not _REAL_TOOLS.match(spec):
        raise ReplayError(f"--real-tools {spec!r}: expected module:attribute, e.g. myapp.tools:registry")
    value = _imported(spec, "--real-tools")
    if not isinstance(value, Registry):
        raise ReplayError(f"--real-tools {spec} is a {type(value).__name__}, not a tracedagent Registry")


def _test_source(recording: Recording, data_name: str, real_tools: str | None, output_type: str | None) -> str:
    """The generated test. Nothing the trace holds goes into code but an output type's path,
    checked against ``TYPE_PATH`` (dotted identifiers); the agent's name appears only in a
    comment, escaped, and the tools' module path was checked against ``_REAL_TOOLS``."""
    agent = json.dumps(recording.agent, ensure_ascii=True)  # one line of ASCII: a comment cannot end early
    what = "the recorded model turns against your real tools" if real_tools else "the recorded run"
    lines = ['"""Generated by `tracedagent replay`: replays ' + what + ".",
             "",
             f"Trace {_safe(recording.trace_id)}; the run stopped with {_safe(recording.stop_reason)} after "
             f"{recording.step_count} steps.",
             f"The recording (turns, tool results, budget) is {_safe(data_name)}, beside this file.",
             '"""', "", "from pathlib import Path", "", "from tracedagent.testing import Replay"]
    if real_tools:
        module, attribute = real_tools.split(":")
        head, _, rest = attribute.partition(".")
        lines.append(f"from {module} import {head} as real_tools")
        if rest:
            lines.append(f"real_tools = real_tools.{rest}")
    options = ["real_tools"] if real_tools else []
    if output_type:  # a typed run: the test names its type, which the replay validates answers against
        module, qualname = output_type.split(":")
        head, _, rest = qualname.partition(".")
        alias = head if head not in ("Path", "Replay", "RECORDING", "real_tools") else "OutputType"
        lines.append(f"from {module} import {head}" + (f" as {alias}" if alias != head else ""))
        options.append(f"output_type={alias}{'.' + rest if rest else ''}")
    lines += ["", f"RECORDING = Path(__file__).with_name({json.dumps(data_name, ensure_ascii=True)})", "", "",
              f"def test_replay_reproduces_the_recorded_run():  # agent: {agent}",
              "    replay = Replay.from_file(RECORDING)"]
    lines.append(f"    run = replay.run(replay.agent({', '.join(options)}))" if options else "    run = replay.run()")
    lines += ["    replay.check(run)", ""]
    return "\n".join(lines)


def _safe(value: object) -> str:
    """A value for the generated docstring: letters, digits and a little punctuation only."""
    return re.sub(r"[^\w.\- ]", "?", str(value), flags=re.ASCII)[:80]


# --- diff --------------------------------------------------------------------------------

def _decided(r: Recording) -> str:
    return ", ".join(f"{c.get('name')} {c.get('outcome')}" for c in (r.resumed or {}).get("decided", [])) or "-"


def _output(r: Recording) -> str:
    """An answered run's answer: a typed one's as canonical JSON text (key order and spacing do
    not make two values differ), a text one's as it is; ``-`` when not answered or not captured."""
    answer = r.steps[-1].text if r.stop_reason == Stop.ANSWERED.value and r.steps else None
    if not answer or r.output_type is None:
        return answer or "-"
    try:
        return json.dumps(json.loads(answer), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return answer


def _compared_steps(r: Recording) -> list[RecordedStep]:
    """The steps as ``diff`` compares them: a typed run's answer as its canonical JSON (``_output``),
    so that two answers of the same value do not differ by their spacing or key order."""
    if r.output_type is None or _output(r) == "-":
        return r.steps
    return [*r.steps[:-1], dataclasses.replace(r.steps[-1], text=_output(r))]


def diff_view(a: Recording, b: Recording) -> Group:
    """Two runs side by side, a ``≠`` where they differ, then the first step at which they part."""
    table = Table(header_style="bold", title_justify="left")
    table.add_column("", no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("A")
    table.add_column("B")
    rows = [("trace", a.trace_id, b.trace_id), ("agent", a.agent, b.agent), ("task", a.task, b.task),
            ("stop reason", a.stop_reason, b.stop_reason), ("steps", a.step_count, b.step_count),
            ("input tokens", a.input_tokens, b.input_tokens), ("output tokens", a.output_tokens, b.output_tokens),
            ("cost", format_cost(a.cost or 0.0), format_cost(b.cost or 0.0))]
    rows += [(f"{key.replace('_', ' ')} tools", ", ".join(a.tools.get(key, [])) or "-",
              ", ".join(b.tools.get(key, [])) or "-") for key in ("requested", "executed", "blocked", "pending")]
    rows.append(("decided calls", _decided(a), _decided(b)))  # a resumed run's calls a person decided on
    if a.output_type is not None or b.output_type is not None:  # typed runs: the type, and the answer as JSON
        rows += [("output type", a.output_type or "- (text)", b.output_type or "- (text)"),
                 ("output", _output(a), _output(b))]
    for label, left, right in rows:
        same = left == right or label == "trace"
        style = stop_style(str(left)) if label == "stop reason" else ""
        table.add_row(label, "" if same else Text("≠", "bold red"), text(left, style), text(right, style))
    diverged = first_divergence(_compared_steps(a), _compared_steps(b))
    if diverged is None:
        verdict = Text(f"The runs agree on every one of their {len(a.steps)} steps.", "green")
    else:
        index, left_step, right_step = diverged
        verdict = Text.assemble((f"First difference: step {index}", "bold red"), "\n  A: ", text(left_step, limit=None),
                                "\n  B: ", text(right_step, limit=None))
    if (a.output_type is None) != (b.output_type is None):  # their outputs are not values of one type
        typed, untyped = ("A", "B") if a.output_type is not None else ("B", "A")
        verdict = Text.assemble(f"{typed} is a typed run (", text(a.output_type or b.output_type),
                                f"), {untyped} an untyped one: its output is text.\n", verdict)
    return Group(table, verdict)

