"""A tool's description and its parameters' descriptions, read from the function's docstring.

The three styles people write are read: Google (``Args:``), NumPy (``Parameters`` underlined
with dashes) and Sphinx (``:param name: ...``). The summary is the first paragraph, up to the
first section, so a Sphinx docstring with no blank line before its ``:param`` lines still
gives a one-line description.
"""

from __future__ import annotations

import re

__all__ = ["parse_docstring"]

_GOOGLE_SECTIONS = ("Args:", "Arguments:", "Parameters:", "Params:", "Keyword Args:", "Keyword Arguments:")
_GOOGLE_ARG = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_SECTIONS = ("Parameters", "Other Parameters", "Keyword Arguments")
_NUMPY_ARG = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$")
_SPHINX_PARAM = re.compile(r"^:(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?(\*{0,2}\w+)\s*:\s*(.*)$")
_SPHINX_FIELD = re.compile(r"^:\w+")
_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary (the first paragraph, to the first section) and each parameter's description
    (``**kwargs`` documented as ``kwargs``), from a Google, NumPy or Sphinx docstring."""
    lines = doc.splitlines()
    arg_docs: dict[str, str] = {}
    first_section = len(lines)
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped in _GOOGLE_SECTIONS:
            first_section = min(first_section, i)
            arg_docs.update(_google(lines[i + 1:]))
        elif stripped in _NUMPY_SECTIONS and i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]):
            first_section = min(first_section, i)
            arg_docs.update(_numpy(lines[i + 2:], indent=_indent(line)))
        elif _SPHINX_FIELD.match(stripped):
            first_section = min(first_section, i)
            if (match := _SPHINX_PARAM.match(stripped)) is not None:
                arg_docs[match.group(1).lstrip("*")] = _continued(match.group(2), lines[i + 1:])
    intro = "\n".join(lines[:first_section]).strip()
    summary = intro.split("\n\n", 1)[0].strip().replace("\n", " ")
    return summary, arg_docs


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _google(lines: list[str]) -> dict[str, str]:
    """An ``Args:`` section's entries: ``name (type): text``, continued on deeper lines."""
    found: dict[str, str] = {}
    current: str | None = None
    base: int | None = None
    for line in lines:
        if not line.strip() or not line.startswith((" ", "\t")):
            break  # the section ends at a blank line or the next section
        base = _indent(line) if base is None else base
        match = _GOOGLE_ARG.match(line)
        if match and _indent(line) <= base:
            current = match.group(1).lstrip("*")
            found[current] = match.group(2).strip()
        elif current is not None:
            found[current] = (found[current] + " " + line.strip()).strip()
    return found


def _numpy(lines: list[str], *, indent: int) -> dict[str, str]:
    """A NumPy ``Parameters`` section: ``name : type`` at the section's indent, the text below it
    indented further; it ends at the next underlined header or a line at the indent that is no
    parameter."""
    found: dict[str, str] = {}
    names: list[str] = []  # the entry being read: "x, y : int" documents both
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        if _indent(line) <= indent:
            if i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]):
                break  # the next section's header
            match = _NUMPY_ARG.match(line.strip())
            if match is None:
                break
            names = [name.strip().lstrip("*") for name in match.group(1).split(",")]
            found.update(dict.fromkeys(names, ""))
        else:
            for name in names:
                found[name] = (found[name] + " " + line.strip()).strip()
    return {name: text for name, text in found.items() if text}


def _continued(text: str, rest: list[str]) -> str:
    """A Sphinx field's text with the indented lines that continue it."""
    parts = [text.strip()]
    for line in rest:
        if not line.strip() or not line.startswith((" ", "\t")):
            break
        parts.append(line.strip())
    return " ".join(p for p in parts if p)
