"""``tracedagent stack``: the compose file and every config it mounts, from package data, equal
to the repository's - in the source tree and in a folder the command writes (in a wheel:
tests/test_release.py) - and the stack folder's own README, which names every service."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tracedagent._cli._stack import COMPOSE_FILE, stack_files

ROOT = Path(__file__).resolve().parents[1]
STACK_README = "README.md"
"""The stack folder's own README (package data, not the repository's): the one file not mounted."""


def _bind_mounts() -> set[str]:
    """Every repository file docker-compose.yml bind-mounts, relative to it."""
    compose = yaml.safe_load((ROOT / COMPOSE_FILE).read_text())
    return {volume.split(":", 1)[0].removeprefix("./") for service in compose["services"].values()
            for volume in service.get("volumes", []) if volume.startswith("./")}


def _tracedagent(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m tracedagent ARGS`` in ``cwd``, importing this checkout's package (whatever
    another checkout an editable install points at)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "tracedagent", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60, env=env)


def test_the_package_holds_the_compose_file_and_exactly_what_it_mounts():
    packaged = {str(f.path): f.content for f in stack_files()}
    assert set(packaged) == {COMPOSE_FILE, STACK_README} | _bind_mounts()
    for path, content in packaged.items():
        if path != STACK_README:
            assert content == (ROOT / path).read_bytes(), path


def test_the_stack_readme_names_every_service_compose_starts():
    """A pip user's only guide to the folder: every service `docker compose up -d` starts (the
    default profile: Temporal included) is named in it, with its ports."""
    compose = yaml.safe_load((ROOT / COMPOSE_FILE).read_text())
    readme = next(f.content for f in stack_files() if str(f.path) == STACK_README).decode()
    started = [name for name, service in compose["services"].items() if not service.get("profiles")]
    assert "temporal" in started
    for name in started:
        assert f"`{name}`" in readme, name
    published = {port.split(":")[1] for service in compose["services"].values() if not service.get("profiles")
                 for port in service.get("ports", [])}
    for port in published:
        assert port in readme, port


def test_stack_writes_the_repository_s_files_and_says_what_to_run(tmp_path):
    done = _tracedagent("stack", "my-stack", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = sorted(p.relative_to(tmp_path / "my-stack").as_posix() for p in (tmp_path / "my-stack").rglob("*")
                     if p.is_file())
    assert written == sorted({COMPOSE_FILE, STACK_README} | _bind_mounts())
    for path in written:
        if path != STACK_README:
            assert (tmp_path / "my-stack" / path).read_bytes() == (ROOT / path).read_bytes(), path
    assert "cd my-stack && docker compose up -d" in done.stdout
    compose = yaml.safe_load((ROOT / COMPOSE_FILE).read_text())
    for name, service in compose["services"].items():  # the message names every service it starts
        if not service.get("profiles"):
            assert name.removeprefix("otel-") in done.stdout.lower(), name
    assert f"{len(written)} files written" in done.stdout


def test_stack_keeps_a_file_the_user_changed_unless_forced(tmp_path):
    assert _tracedagent("stack", "s", cwd=tmp_path).returncode == 0
    edited = tmp_path / "s" / "collector" / "alertmanager.yml"
    edited.write_text("route: {receiver: mine}\n")
    (tmp_path / "s" / COMPOSE_FILE).unlink()

    done = _tracedagent("stack", "s", cwd=tmp_path)
    assert done.returncode == 1 and "alertmanager.yml" in done.stderr and "--force" in done.stderr
    assert "Traceback" not in done.stderr
    assert edited.read_text() == "route: {receiver: mine}\n"
    assert not (tmp_path / "s" / COMPOSE_FILE).exists()  # nothing at all was written

    done = _tracedagent("stack", "s", "--force", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert edited.read_bytes() == (ROOT / "collector" / "alertmanager.yml").read_bytes()
    assert "1 already up to date" not in done.stdout and "files written" in done.stdout


def test_a_stack_that_cannot_be_written_is_one_error_line(tmp_path):
    (tmp_path / "taken").write_text("a file, not a folder")
    done = _tracedagent("stack", "taken", cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
