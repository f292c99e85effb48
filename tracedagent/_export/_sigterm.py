"""Flush pending telemetry when the process ends: at interpreter exit, and when it is told to
stop (SIGTERM), then stop as SIGTERM would. Every pipeline shares one bound.

**One bound for the process.** ``configure(set_global=False)`` builds a pipeline per call;
each flushed at exit with a bound of its own, a process with four of them and a hung
collector would wait four bounds. So every live pipeline is shut down at once, each on a
thread of its own, against one deadline: ``EXIT_FLUSH_TIMEOUT`` (1.5 s) after exit began,
for all of them together. At once rather than one after another, so that a pipeline whose
collector hangs cannot use up the time of one whose collector answers.

**SIGTERM.** A container stop or a rolling deploy sends SIGTERM, and Python's default for
it ends the process at once: no ``atexit`` hook runs, so the span processor's queue - every
run since the last export, the ones that explain the restart among them - dies with the
process. ``configure()`` therefore installs a handler, but only where that takes nothing
from the application: when no handler is set yet (it is still ``SIG_DFL``) and
``configure`` runs in the main thread (the only one that may set one). An application with
its own handler keeps it, and can flush by calling ``Telemetry.shutdown()`` there. The
handler shuts the pipelines that asked for it down within the same bound, then restores
``SIG_DFL`` and sends the process SIGTERM again: it ends as it would have without
tracedagent (exit status -15, or 143 in a shell). ``configure(handle_sigterm=False)`` or
``TRACEDAGENT_HANDLE_SIGTERM=false`` turns this off.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import time
from types import FrameType
from typing import Callable, Iterable

from .._core import _names as N

__all__ = ["forget", "wanted", "watch"]

_log = logging.getLogger("tracedagent")

_OFF = frozenset({"0", "false", "no", "off"})
_CLOSE_GRACE = 0.2
"""Seconds past the deadline to wait for the shutdowns that gave up at it to close their
exporters (which aborts what they still had in flight)."""
_lock = threading.RLock()  # reentrant: the handler runs in the main thread, which may hold it
_pipelines: dict[Callable[[float], object], bool] = {}
"""``shutdown(timeout)`` of each live pipeline, and whether SIGTERM shuts it down too."""
_exit_hook = False
"""Whether the ``atexit`` hook is registered (once, by the first pipeline)."""
_installed = False
"""Whether the SIGTERM handler is installed."""


def wanted(handle_sigterm: bool | None) -> bool:
    """The ``handle_sigterm`` argument, else on unless ``TRACEDAGENT_HANDLE_SIGTERM`` says off."""
    if handle_sigterm is not None:
        return handle_sigterm
    return os.environ.get(N.ENV_HANDLE_SIGTERM, "").strip().lower() not in _OFF


def watch(shutdown: Callable[[float], object], *, sigterm: bool) -> None:
    """Call ``shutdown(seconds)`` at interpreter exit and, if ``sigterm``, on SIGTERM
    (installing the handler if the process has none), within the bound every pipeline shares."""
    global _exit_hook, _installed
    with _lock:
        _pipelines[shutdown] = sigterm
        if not _exit_hook:
            atexit.register(_at_exit)
            _exit_hook = True
        if not sigterm or _installed or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:  # the application's (or SIG_IGN): keep it
            return
        signal.signal(signal.SIGTERM, _on_sigterm)
        _installed = True


def forget(shutdown: Callable[[float], object]) -> None:
    """``shutdown``'s pipeline is stopped: nothing to flush for it any more.

    Takes no lock: the shutdowns that call it run on threads of their own while the SIGTERM
    handler, which may have interrupted a holder of the lock, waits for them; removing one
    key is a single operation on the dict.
    """
    _pipelines.pop(shutdown, None)


def _at_exit() -> None:
    _shutdown_all(list(_pipelines))


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    try:
        _shutdown_all([shutdown for shutdown, on_sigterm in list(_pipelines.items()) if on_sigterm])
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _shutdown_all(shutdowns: Iterable[Callable[[float], object]]) -> None:
    """Every ``shutdown`` at once, each on a thread of its own, all against one deadline
    ``EXIT_FLUSH_TIMEOUT`` from now. If the interpreter refuses new threads (some Python 3.12
    releases, at exit), the rest run one after another, still against the same deadline."""
    deadline = time.monotonic() + N.EXIT_FLUSH_TIMEOUT

    def stop(shutdown: Callable[[float], object]) -> None:
        try:
            shutdown(max(0.0, deadline - time.monotonic()))
        except Exception:  # flushing must not keep the process from ending
            _log.debug("tracedagent: flushing telemetry at exit failed", exc_info=True)

    threads = []
    for shutdown in shutdowns:
        thread = threading.Thread(target=stop, args=(shutdown,), name="tracedagent-exit", daemon=True)
        try:
            thread.start()
        except RuntimeError:
            stop(shutdown)
        else:
            threads.append(thread)
    for thread in threads:
        thread.join(max(0.0, deadline + _CLOSE_GRACE - time.monotonic()))
