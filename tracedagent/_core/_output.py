"""A run's typed output as the core sees it: a specification its answer is checked against.

The core imports no validation library: it sees an ``OutputSpec`` (a name, a JSON schema and
``validate``), which ``tracedagent._typed`` implements with pydantic for a Python type. The run
machine asks it of each answer (``RunMachine.answer``): a turn whose text does not validate is
not the answer, and the model is told why (``retry_message``) until ``Budget.max_output_retries``
runs out (``Stop.INVALID_OUTPUT``).

How the model is asked for the JSON is the output *mode*, carried by every ``ModelRequest``
(``OutputRequest``): ``prompted`` (an instruction with the schema in the system prompt: works
with any model), ``native`` (the provider's structured output, e.g. OpenAI's ``response_format``)
or ``tool`` (a forced output tool, e.g. Anthropic's). Whatever the mode, an answer that is JSON
text is accepted and validated: a server that ignores the mode loses nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["OutputSpec", "OutputCheck", "OutputRequest", "OUTPUT_MODES", "OUTPUT_TOOL_NAME", "MAX_PROBLEM_LENGTH",
           "MAX_TYPE_PATH_LENGTH",
           "output_mode", "output_request", "type_path", "instruction", "with_instruction", "retry_message", "bounded_problem"]

OUTPUT_MODES = ("auto", "prompted", "native", "tool")
"""How a typed answer is asked for: ``auto`` is the model's first declared mode (its
``output_modes`` attribute), else ``prompted``."""

OUTPUT_TOOL_NAME = "final_result"
"""The output tool's name, in the ``tool`` mode: the adapter turns a call of it into the turn's
text, so it is never a requested tool call."""

MAX_TYPE_PATH_LENGTH = 256
"""A type path longer than this is not recorded (a cut path imports nothing)."""

MAX_PROBLEM_LENGTH = 1000
"""A validation problem shown to the model and in a stopped run's output is cut to this length."""


@dataclass(frozen=True)
class OutputCheck:
    """What ``OutputSpec.validate`` found: the typed ``value``, or the ``problem`` (``None`` if valid)."""

    value: Any = None
    """The answer as the output type (meaningful only when ``problem`` is ``None``)."""
    problem: str | None = None
    """Why the text is not a value of the type, for the model to correct (no input values: it
    can end up in a span's status); ``None``: valid."""


@runtime_checkable
class OutputSpec(Protocol):
    """A run's output type as the machine checks it (``tracedagent._typed.output_spec`` builds one)."""

    name: str
    """The type's name (``tracedagent.output.type_name``; the output tool's description)."""
    schema: dict[str, Any]
    """Its JSON schema, sent to the model (in the instruction, or as the provider's structured output)."""

    def validate(self, text: str) -> OutputCheck:
        """The answer's text, as a value of the type or a problem; never raises."""
        ...

    # Optional, read with getattr (a spec of your own may leave either out): ``path``, where the
    # type lives (``module:qualname``, ``tracedagent.output.type_path``; ``None``: not importable),
    # and ``partial(text) -> OutputCheck``, the value so far of a JSON text still arriving
    # (``stream`` / ``astream`` yield it as ``partial_output`` events); never raises.


@dataclass(frozen=True, kw_only=True)
class OutputRequest:
    """What a model call is asked to answer with (``ModelRequest.output``), for adapters that can
    ask their provider for it; a model that ignores it still gets the prompted instruction when
    the mode is ``prompted``."""

    name: str
    """The output type's name."""
    schema: dict[str, Any]
    """The JSON schema of the answer."""
    mode: str
    """``prompted``, ``native`` or ``tool`` (``OUTPUT_MODES``, ``auto`` resolved)."""


def type_path(spec: OutputSpec | None) -> str | None:
    """The spec's optional ``path`` (``module:qualname``), when it is a bounded string; else ``None``."""
    path = getattr(spec, "path", None)
    return path if isinstance(path, str) and 0 < len(path) <= MAX_TYPE_PATH_LENGTH and ":" in path else None


def output_request(spec: OutputSpec | None, mode: str) -> OutputRequest | None:
    """What each model call of a run with output type ``spec`` is asked for (``None``: untyped):
    the machine's calls and a durable workflow's model activity ask the same."""
    return None if spec is None else OutputRequest(name=spec.name, schema=spec.schema, mode=mode)


def output_mode(asked: str, model: Any) -> str:
    """The mode a run asks for: ``asked``, or with ``auto`` the model's first declared mode
    (``output_modes``), else ``prompted``. A mode the model does not declare is a ``ValueError``
    (``prompted`` works with every model)."""
    if asked not in OUTPUT_MODES:
        raise ValueError(f"output_mode must be one of {', '.join(OUTPUT_MODES)}, got {asked!r}")
    declared = tuple(getattr(model, "output_modes", ()) or ())
    if asked == "auto":
        return declared[0] if declared else "prompted"
    if asked != "prompted" and asked not in declared:
        raise ValueError(f"output_mode {asked!r}: the model declares {list(declared) or 'no modes'} "
                         f"(its output_modes); 'prompted' works with every model")
    return asked


def instruction(spec: OutputSpec) -> str:
    """The prompted mode's instruction: answer with JSON matching the schema, nothing else."""
    schema = json.dumps(spec.schema, separators=(",", ":"), sort_keys=True)
    return (f"When you give your final answer, answer only with a JSON value (no prose, no code fence) "
            f"matching this JSON schema of {spec.name}: {schema}")


def with_instruction(system_prompt: str | None, spec: OutputSpec | None, mode: str) -> str | None:
    """The system prompt a typed run starts from: in the prompted mode, the instruction after it."""
    if spec is None or mode != "prompted":
        return system_prompt
    return f"{system_prompt}\n\n{instruction(spec)}" if system_prompt else instruction(spec)


def bounded_problem(problem: str) -> str:
    """A problem cut to ``MAX_PROBLEM_LENGTH``."""
    return problem if len(problem) <= MAX_PROBLEM_LENGTH else problem[:MAX_PROBLEM_LENGTH] + "..."


def retry_message(spec: OutputSpec, problem: str) -> str:
    """What the model is told of an answer that did not validate (a user message)."""
    return (f"Your answer is not a valid {spec.name}: {bounded_problem(problem)}\n"
            f"Answer again with only the corrected JSON value.")
