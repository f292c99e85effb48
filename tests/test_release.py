"""``make release-check`` (scripts/release_check.py): what a release needs, checked on every test
run. The wheel is really built (``python -m build`` of a copy of the clone, in a temporary folder)
and read back: the LICENSE, PEP 639's metadata, the stack files ``tracedagent stack`` writes, and
the development tools as dependency groups, never as extras a user could install."""

from __future__ import annotations

import email.parser
import json
import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Callable

import pytest

from _fake_servers import closed_port

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("release_check", ROOT / "scripts" / "release_check.py")
release_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(release_check)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[list[str], Path]:
    """The release check's problems (none expected) and the wheel it built."""
    outdir = tmp_path_factory.mktemp("dist")
    problems = release_check.check(outdir=outdir)
    [wheel] = outdir.glob("tracedagent-*.whl")
    return problems, wheel


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory) -> Path:
    """The wheel installed as pip lays it out (no Makefile beside the package), in a folder of its own."""
    _, wheel = built
    target = tmp_path_factory.mktemp("site-packages")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                           "--disable-pip-version-check", "--target", str(target), str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return target


def wheel_cli(target: Path, cwd: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``tracedagent ARGS`` run in ``cwd`` from the installed wheel (not the clone), no OTEL_ settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACEDAGENT_"))}
    env.update(PYTHONPATH=str(target), COLUMNS="250")

    def tracedagent(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tracedagent", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=120)
    return tracedagent


def test_the_release_check_passes_on_this_clone(built):
    problems, _ = built
    assert problems == []


def test_the_wheel_holds_the_license_and_the_stack_files(built):
    _, wheel = built
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [license_name] = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(license_name) == (ROOT / "LICENSE").read_bytes()
        assert b"Apache License" in archive.read(license_name)
        stack = {n.removeprefix("tracedagent/_cli/stack_files/") for n in names
                 if n.startswith("tracedagent/_cli/stack_files/")}
        local_model = {n.removeprefix("tracedagent/_cli/local_model/") for n in names
                       if n.startswith("tracedagent/_cli/local_model/")}
        metadata = email.parser.Parser().parsestr(archive.read(
            next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
    assert {"README.md", "docker-compose.yml", "collector/otelcol.yaml", "collector/jaeger.yaml"} <= stack
    assert metadata["License-Expression"] == "Apache-2.0"
    # `tracedagent local serve`'s chat template, with llama.cpp's MIT notice beside it
    assert {"Qwen-Qwen2.5-7B-Instruct.jinja", "LICENSE-llama.cpp"} <= local_model
    assert metadata.get_all("Provides-Extra") == ["openai", "anthropic", "temporal", "mcp", "local", "evals"]  # test/bench are groups
    assert any(url.startswith("Source, https://") for url in metadata.get_all("Project-URL"))


def test_a_wheel_without_its_license_or_with_a_stale_stack_file_is_refused(tmp_path):
    wheel = tmp_path / "tracedagent-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("tracedagent-0.1.0.dist-info/METADATA", "Metadata-Version: 2.4\nName: tracedagent\n"
                                                                 "Version: 0.1.0\nLicense: Apache-2.0\n")
        archive.writestr("tracedagent/_cli/stack_files/docker-compose.yml", "services: {}\n")
    problems = release_check.wheel_problems(wheel, "0.1.0")
    assert any("no .dist-info/licenses/LICENSE" in p for p in problems)
    assert any("License-Expression" in p for p in problems)
    assert any("docker-compose.yml differs" in p for p in problems)
    assert any("missing" in p and "collector/otelcol.yaml" in p for p in problems)


def test_the_changelog_must_have_a_section_for_the_version_or_an_unreleased_one():
    check = release_check.changelog_problems
    assert check((ROOT / "CHANGELOG.md").read_text(), release_check.version()) == []
    assert check("# Changelog\n\n## [0.1.0] - 2026-12-04\n", "0.1.0") == []
    assert check("# Changelog\n\n## [Unreleased]\n", "0.2.0") == []
    assert check("# Changelog\n\n## [0.1.0] - 2026-12-04\n", "0.2.0")
    assert check("# Changelog\n\nnothing yet\n", "0.1.0")
    assert release_check.version_problems("0.1.0") == [] and release_check.version_problems("0.1-final")


def test_the_wheel_s_own_files_give_pip_hints_and_write_the_stack_readme(installed, tmp_path):
    """The wheel installed as pip lays it out (no Makefile beside the package): the doctor says
    `tracedagent stack DIR && ... docker compose up -d`, never `make stack-up`, and `tracedagent
    stack` writes the folder's README naming every service."""
    tracedagent = wheel_cli(installed, tmp_path)

    where = tracedagent("doctor", "--help")  # the package imported is the wheel's, not the clone's
    assert where.returncode == 0
    closed = f"http://127.0.0.1:{closed_port()}"
    doctor = tracedagent("doctor", "--timeout", "0.3", "--otlp", closed, "--collector-health", closed,
                         "--jaeger", closed, "--prometheus", closed, "--alertmanager", closed)
    assert doctor.returncode == 1 and "Traceback" not in doctor.stderr
    assert "make stack-up" not in doctor.stdout and "collector/README.md" not in doctor.stdout
    assert "tracedagent stack tracedagent-stack && cd tracedagent-stack && docker compose up -d" in doctor.stdout
    assert "docker compose up -d jaeger" in doctor.stdout
    stack = tracedagent("stack", "s")
    assert stack.returncode == 0, stack.stderr
    readme = (tmp_path / "s" / "README.md").read_text()
    assert "`temporal`" in readme and "`otel-collector`" in readme
    compose = (tmp_path / "s" / "docker-compose.yml").read_text()
    assert "tracedagent stack DIR" in compose


def test_the_wheel_evaluates_the_demo_dataset(installed, tmp_path):
    """A pip user has the demo's dataset and its agent: `tracedagent eval demo` plays the file
    the wheel holds (package data), and `eval run` of the printed path and agent does the same."""
    tracedagent = wheel_cli(installed, tmp_path)

    dataset, agent = tracedagent("eval", "demo", "--path").stdout.split("\n")[:2]
    assert Path(dataset).is_relative_to(installed) and Path(dataset).is_file()  # the wheel's file, not the clone's
    short = tracedagent("eval", "demo", "--json", "short.json")
    long = tracedagent("eval", "run", dataset, *agent.split(), "--json", "long.json")
    assert short.returncode == long.returncode == 0, short.stderr + long.stderr
    for report in ("short.json", "long.json"):
        cases = {c["name"]: c["pass_rate"] for c in json.loads((tmp_path / report).read_text())["cases"]}
        assert cases["help-desk"] == 1.0 and cases["runaway-research"] == 0.0
