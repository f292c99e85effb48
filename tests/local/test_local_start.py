"""The server's start, failing: tracedagent local never hangs or skips when the server cannot start.
In this tier (the server installed, or the tier failing under make test), not the service-free one."""

from __future__ import annotations

from tracedagent._cli import _local_model as local

from ._local import missing_or_fail


def test_start_fails_loudly_with_the_servers_log_when_it_cannot_start(tmp_path, monkeypatch):
    """A server that exits at once (here: a context size its command refuses) is a LocalServerError with its log,
    never a hang or a skip."""
    missing_or_fail()
    try:
        server = local.start(context=10**9, timeout=60, log=tmp_path / "server.log")
    except local.LocalServerError as exc:
        assert "did not start" in str(exc) or "does not answer" in str(exc)
        assert str(tmp_path / "server.log") in str(exc)
    else:
        server.stop()
        raise AssertionError("a server with a context of 10**9 tokens started")
