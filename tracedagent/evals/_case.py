"""``Case``: one task of a dataset, and what to expect of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["Case"]


@dataclass(frozen=True, kw_only=True)
class Case:
    """One task to run, and what to expect of it."""

    task: str
    """What the agent is asked."""
    name: str | None = None
    """How reports name the case (default: ``case-N``, its place in the dataset)."""
    expected_output: Any = None
    """What ``output_equals`` / ``output_contains`` compare with when not given their own."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Anything else (a tag, a difficulty) a grader or a report reader may use."""
