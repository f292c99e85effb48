"""The named errors of a checkpoint that cannot be resumed: one family, ``CheckpointError``
(a ``ValueError``), each raised before anything of the resumed run has happened."""

from __future__ import annotations

__all__ = ["CheckpointError", "MalformedCheckpoint", "UnknownCheckpointVersion", "WrongAgent", "BadDecisions",
           "DecisionMismatch", "AlreadyResumed", "TamperedCheckpoint", "UnsignedCheckpoint", "ExpiredCheckpoint"]


class CheckpointError(ValueError):
    """A checkpoint (or the decisions given with it) that cannot be resumed: nothing ran."""


class MalformedCheckpoint(CheckpointError):
    """Not JSON, or JSON without the fields, or with fields of the wrong type."""


class UnknownCheckpointVersion(CheckpointError):
    """Written by a format this version of tracedagent does not read."""


class WrongAgent(CheckpointError):
    """Paused by another agent: a different name or different tools."""


class BadDecisions(CheckpointError):
    """A decision for a call that is not waiting, a waiting call without one, or a value that
    is neither a bool nor a string."""


class DecisionMismatch(BadDecisions):
    """An ``Approve`` whose digest is not the waiting call's: the call under that id is not the
    one the person saw (its tool or its arguments changed since), so nothing runs."""


class AlreadyResumed(CheckpointError):
    """This checkpoint (its ``id``) was resumed before - or a resume of it began and was
    interrupted: its approved calls may have run (docs/approvals.md, "Interrupted resumes")."""


class TamperedCheckpoint(CheckpointError):
    """A signed checkpoint whose signature does not match its content (it was changed after it
    was signed), or signed with a key this agent does not have (another application's, a key
    rotated out, or no key configured to check it)."""


class UnsignedCheckpoint(CheckpointError):
    """A checkpoint without a signature (version 1, or written with no key), read from outside
    by an agent that does not accept unsigned checkpoints (``accept_unsigned_checkpoints``)."""


class ExpiredCheckpoint(CheckpointError):
    """A signed checkpoint past its signed ``expires`` (``Agent(checkpoint_max_age=...)``): an
    approval that came too late."""
