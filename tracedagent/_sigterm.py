"""Flush pending telemetry when the process is told to stop (SIGTERM), then stop as SIGTERM would.

A container stop or a rolling deploy sends SIGTERM, and Python's default for it ends the
process at once: no ``atexit`` hook runs, so the span processor's queue - every run since
the last export, the ones that explain the restart among them - dies with the process.
``configure()`` therefore installs a handler, but only where that takes nothing from the
application: when no handler is set yet (it is still ``SIG_DFL``) and ``configure`` runs
in the main thread (the only one that may set one). An application with its own handler
keeps it, and can flush by calling ``Telemetry.shutdown()`` there.

The handler shuts every live pipeline down within the exit bound (``EXIT_FLUSH_TIMEOUT``,
1.5 s for all of them together), then restores ``SIG_DFL`` and sends the process SIGTERM
again: it ends as it would have without tracedagent (exit status -15, or 143 in a shell).
``configure(handle_sigterm=False)`` or ``TRACEDAGENT_HANDLE_SIGTERM=false`` turns this off.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from types import FrameType
from typing import Callable

from . import _names as N

__all__ = ["forget", "wanted", "watch"]

_log = logging.getLogger("tracedagent")

_OFF = frozenset({"0", "false", "no", "off"})
_lock = threading.RLock()  # reentrant: the handler runs in the main thread, which may hold it
_pipelines: list[Callable[[float], object]] = []
"""``shutdown(timeout)`` of each pipeline to flush on SIGTERM."""
_installed = False


def wanted(handle_sigterm: bool | None) -> bool:
    """The ``handle_sigterm`` argument, else on unless ``TRACEDAGENT_HANDLE_SIGTERM`` says off."""
    if handle_sigterm is not None:
        return handle_sigterm
    return os.environ.get(N.ENV_HANDLE_SIGTERM, "").strip().lower() not in _OFF


def watch(shutdown: Callable[[float], object]) -> None:
    """Call ``shutdown(seconds)`` on SIGTERM, installing the handler if the process has none."""
    global _installed
    with _lock:
        _pipelines.append(shutdown)
        if _installed or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:  # the application's (or SIG_IGN): keep it
            return
        signal.signal(signal.SIGTERM, _on_sigterm)
        _installed = True


def forget(shutdown: Callable[[float], object]) -> None:
    """``shutdown``'s pipeline is stopped: nothing to flush for it any more."""
    with _lock:
        if shutdown in _pipelines:
            _pipelines.remove(shutdown)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    deadline = time.monotonic() + N.EXIT_FLUSH_TIMEOUT
    try:
        for shutdown in list(_pipelines):
            shutdown(max(0.0, deadline - time.monotonic()))
    except Exception:  # flushing must not keep the process from ending
        _log.debug("tracedagent: flushing telemetry on SIGTERM failed", exc_info=True)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
