"""``tracedagent stack``: the compose file and every config it mounts, from package data, equal
to the repository's - in the source tree, in a folder the command writes, and in a wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tracedagent._cli._stack import COMPOSE_FILE, stack_files

ROOT = Path(__file__).resolve().parents[1]


def _bind_mounts() -> set[str]:
    """Every repository file docker-compose.yml bind-mounts, relative to it."""
    compose = yaml.safe_load((ROOT / COMPOSE_FILE).read_text())
    return {volume.split(":", 1)[0].removeprefix("./") for service in compose["services"].values()
            for volume in service.get("volumes", []) if volume.startswith("./")}


def _tracedagent(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracedagent", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60)


def test_the_package_holds_the_compose_file_and_exactly_what_it_mounts():
    packaged = {str(f.path): f.content for f in stack_files()}
    assert set(packaged) == {COMPOSE_FILE} | _bind_mounts()
    for path, content in packaged.items():
        assert content == (ROOT / path).read_bytes(), path


def test_stack_writes_the_repository_s_files_and_says_what_to_run(tmp_path):
    done = _tracedagent("stack", "my-stack", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = sorted(p.relative_to(tmp_path / "my-stack").as_posix() for p in (tmp_path / "my-stack").rglob("*")
                     if p.is_file())
    assert written == sorted({COMPOSE_FILE} | _bind_mounts())
    for path in written:
        assert (tmp_path / "my-stack" / path).read_bytes() == (ROOT / path).read_bytes(), path
    assert "cd my-stack && docker compose up -d" in done.stdout
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


def test_a_wheel_carries_the_files_themselves(tmp_path):
    """In the repository the package's stack files are links to docker-compose.yml and collector/:
    a built wheel must hold their contents, which is what a pip user gets."""
    # Built from a copy of what a build reads (links kept as links), so that no build/ folder a
    # previous build left in the repository can put stale files into this wheel.
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "tracedagent", source / "tracedagent", symlinks=True, ignore=ignore)
    shutil.copytree(ROOT / "collector", source / "collector", symlinks=True, ignore=ignore)
    for name in ("pyproject.toml", "README.md", COMPOSE_FILE):
        shutil.copy2(ROOT / name, source / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check",
                           "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = (tmp_path / "dist").glob("tracedagent-*.whl")
    prefix = "tracedagent/_cli/stack_files/"
    with zipfile.ZipFile(wheel) as archive:
        packaged = {name[len(prefix):]: archive.read(name) for name in archive.namelist() if name.startswith(prefix)}
    assert set(packaged) == {COMPOSE_FILE} | _bind_mounts()
    for path, content in packaged.items():
        assert content == (ROOT / path).read_bytes(), path
