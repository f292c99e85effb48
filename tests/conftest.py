"""Shared test setup.

``pytester`` runs whole pytest sessions in a temporary directory, which is how the
tracedagent pytest plugin is tested as a user would meet it. The plugin itself is
loaded through its ``pytest11`` entry point (``pip install -e . --group test``).
"""

pytest_plugins = ["pytester"]

import os

TEST_CHECKPOINT_KEY = "tracedagent-tests-checkpoint-key-0123456789abcdef"
"""The key every test's agents sign and check checkpoints with (``TRACEDAGENT_CHECKPOINT_KEY``),
as an application sets one: a checkpoint read from text must be signed (docs/approvals.md).
Set for the whole session (subprocesses inherit it); tests of the keyless and unsigned paths
remove or replace it with ``monkeypatch``."""

os.environ.setdefault("TRACEDAGENT_CHECKPOINT_KEY", TEST_CHECKPOINT_KEY)
