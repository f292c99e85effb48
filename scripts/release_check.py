#!/usr/bin/env python3
"""What a release needs, checked before there is one: ``make release-check`` (tests/test_release.py
runs the same checks).

1. The version (``tracedagent/_version.py``) is a PEP 440 version.
2. ``CHANGELOG.md`` has a section for it: ``## [VERSION]``, or ``## [Unreleased]`` before a release.
3. ``python -m build`` makes the sdist and the wheel, from a copy of what a build reads (so no
   ``build/`` or ``*.egg-info`` left in the clone can slip stale files in, and none is left behind).
4. ``twine check --strict`` passes on both (the metadata PyPI would show).
5. The wheel carries the LICENSE (PEP 639: ``License-Expression`` and ``License-File``), the
   version, and the stack files ``tracedagent stack`` writes, byte for byte the repository's;
   the sdist carries the LICENSE too.

The build is isolated (pip fetches ``setuptools>=77`` from PyPI, or from its cache);
``--no-isolation`` builds with the setuptools installed here instead, offline. ``build`` and
``twine`` come from the ``test`` dependency group. Exit status 0 when everything holds, 1 with one
line per problem otherwise.
"""

from __future__ import annotations

import argparse
import email.parser
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STACK_FILES = "tracedagent/_cli/stack_files"
BUILD_INPUTS = ("tracedagent", "collector", "pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md",
                "docker-compose.yml")
"""What a build reads: the package (whose stack files link into collector/ and to the compose file)
and the files pyproject.toml names."""
LICENSE_EXPRESSION = "Apache-2.0"
_PEP440 = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")


def version(root: Path = ROOT) -> str:
    """``__version__`` as ``tracedagent/_version.py`` states it (read, not imported)."""
    match = re.search(r'^__version__ = "([^"]+)"', (root / "tracedagent" / "_version.py").read_text(), re.M)
    if not match:
        raise SystemExit("tracedagent/_version.py states no __version__")
    return match.group(1)


def version_problems(value: str) -> list[str]:
    return [] if _PEP440.match(value) else [f"version {value!r} is not a PEP 440 release version"]


def changelog_problems(text: str, value: str) -> list[str]:
    """A Keep a Changelog file must have a section for ``value``, or an Unreleased one."""
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    if not headings:
        return ["CHANGELOG.md has no '## [VERSION]' or '## [Unreleased]' section"]
    if value not in headings and "Unreleased" not in headings:
        return [f"CHANGELOG.md has no section for {value} (nor an Unreleased one): it has {', '.join(headings)}"]
    return []


def copy_build_inputs(root: Path, into: Path) -> Path:
    """What a build reads, copied with the package's links kept as links (they point into the copy)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in BUILD_INPUTS:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, into / name, symlinks=True, ignore=ignore)
        elif source.exists():
            shutil.copy2(source, into / name)
    return into


def build(source: Path, outdir: Path, *, isolation: bool = True) -> tuple[Path, Path]:
    """``python -m build`` of ``source`` into ``outdir``: the sdist and the wheel."""
    command = [sys.executable, "-m", "build", "--outdir", str(outdir), *([] if isolation else ["--no-isolation"]),
               str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"python -m build failed:\n{(done.stdout + done.stderr)[-4000:]}")
    [sdist] = outdir.glob("tracedagent-*.tar.gz")
    [wheel] = outdir.glob("tracedagent-*.whl")
    return sdist, wheel


def twine_problems(*dists: Path) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dists)],
                          capture_output=True, text=True, timeout=300)
    return [] if done.returncode == 0 else [f"twine check failed: {(done.stdout + done.stderr).strip()[-2000:]}"]


def repository_stack_files(root: Path = ROOT) -> dict[str, bytes]:
    """The stack files as the package holds them in the clone (links followed): what a wheel must carry."""
    base = root / STACK_FILES
    return {path.relative_to(base).as_posix(): path.read_bytes() for path in sorted(base.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts}


def wheel_problems(wheel: Path, value: str, root: Path = ROOT) -> list[str]:
    """What the wheel must hold: its version, the LICENSE and its PEP 639 metadata, the stack files."""
    problems = []
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata_name] = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(archive.read(metadata_name).decode())
        licenses = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        if not licenses:
            problems.append(f"{wheel.name} has no .dist-info/licenses/LICENSE")
        elif archive.read(licenses[0]) != (root / "LICENSE").read_bytes():
            problems.append(f"{wheel.name}'s LICENSE is not the repository's")
        prefix = STACK_FILES + "/"
        packaged = {n[len(prefix):]: archive.read(n) for n in names if n.startswith(prefix) and not n.endswith("/")}
    if metadata["Version"] != value:
        problems.append(f"{wheel.name} is version {metadata['Version']}, not {value}")
    if metadata["License-Expression"] != LICENSE_EXPRESSION:
        problems.append(f"{wheel.name}'s License-Expression is {metadata['License-Expression']!r}, "
                        f"not {LICENSE_EXPRESSION!r}")
    if "LICENSE" not in (metadata.get_all("License-File") or []):
        problems.append(f"{wheel.name}'s metadata names no License-File LICENSE")
    expected = repository_stack_files(root)
    if set(packaged) != set(expected):
        problems.append(f"{wheel.name}'s stack files differ from the repository's: missing "
                        f"{sorted(set(expected) - set(packaged))}, extra {sorted(set(packaged) - set(expected))}")
    problems += [f"{wheel.name}: {STACK_FILES}/{name} differs from the repository's"
                 for name in sorted(set(packaged) & set(expected)) if packaged[name] != expected[name]]
    return problems


def sdist_problems(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as archive:
        if not any(name.endswith("/LICENSE") and name.count("/") == 1 for name in archive.getnames()):
            return [f"{sdist.name} has no LICENSE at its top"]
    return []


def check(root: Path = ROOT, *, outdir: Path | None = None, isolation: bool = True) -> list[str]:
    """Every check above; the problems found (none: ready to release)."""
    value = version(root)
    problems = version_problems(value)
    changelog = root / "CHANGELOG.md"
    problems += changelog_problems(changelog.read_text(), value) if changelog.is_file() else ["no CHANGELOG.md"]
    with tempfile.TemporaryDirectory(prefix="tracedagent-release-") as scratch:
        source = copy_build_inputs(root, Path(scratch) / "source")
        out = outdir or Path(scratch) / "dist"
        sdist, wheel = build(source, out, isolation=isolation)
        problems += twine_problems(sdist, wheel)
        problems += wheel_problems(wheel, value, root)
        problems += sdist_problems(sdist)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outdir", type=Path, help="keep the sdist and wheel here (default: a temporary folder)")
    parser.add_argument("--no-isolation", action="store_true",
                        help="build with the setuptools installed here (77 or newer), offline")
    args = parser.parse_args(argv)
    if args.outdir:
        args.outdir.mkdir(parents=True, exist_ok=True)
    problems = check(outdir=args.outdir.resolve() if args.outdir else None, isolation=not args.no_isolation)
    for problem in problems:
        print(f"release-check: {problem}", file=sys.stderr)
    if not problems:
        print(f"release-check: tracedagent {version()} is ready: sdist and wheel build, twine check passes, "
              f"the wheel holds the LICENSE and the stack files")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
