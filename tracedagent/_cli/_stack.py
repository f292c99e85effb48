"""``tracedagent stack FOLDER``: the Docker Compose stack for a user who installed the package.

``docker-compose.yml`` and every config file it bind-mounts ship as package data
(``stack_files/``): in the repository those entries are symbolic links to the repository's own
``docker-compose.yml`` and ``collector/`` files, so there is one copy of each, and a wheel or
sdist carries their contents. ``stack_files/README.md`` is the folder's own: what a pip user,
who has no repository to read, needs to start and know each service. The command writes them into a folder with the layout the
compose file expects (``./collector/...`` beside it), and says what to run next.

It never overwrites a file that differs from the packaged one unless told to (``--force``): a
user may have edited it. A file already identical is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

import click

from ._render import printable

__all__ = ["StackFile", "stack_files", "write_stack", "COMPOSE_FILE", "stack"]

COMPOSE_FILE = "docker-compose.yml"


@dataclass(frozen=True, kw_only=True)
class StackFile:
    """One file of the stack: where it goes and what it holds."""

    path: PurePosixPath
    """Relative to the stack's folder: ``docker-compose.yml``, ``collector/otelcol.yaml``..."""
    content: bytes
    """The packaged bytes (the repository's file, through the package's link to it)."""


def _walk(node: Any, prefix: PurePosixPath) -> Iterator[StackFile]:
    """``node`` is an ``importlib.resources`` Traversable (whose ABC moved between Python 3.10 and 3.11)."""
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.is_dir():
            yield from _walk(child, prefix / child.name)
        elif child.is_file():
            yield StackFile(path=prefix / child.name, content=child.read_bytes())


def stack_files() -> list[StackFile]:
    """Every file of the packaged stack, the compose file first."""
    found = list(_walk(files(__package__).joinpath("stack_files"), PurePosixPath()))
    return sorted(found, key=lambda f: (str(f.path) != COMPOSE_FILE, str(f.path)))


@dataclass(frozen=True, kw_only=True)
class Written:
    """What ``write_stack`` did to each file."""

    written: list[Path]
    """Files created, or overwritten with ``force``."""
    unchanged: list[Path]
    """Files already identical to the packaged ones."""
    conflicts: list[Path]
    """Files that differ and were left alone (without ``force``); nothing was written then."""


def write_stack(folder: Path, *, force: bool = False) -> Written:
    """Write the stack into ``folder`` (created if missing). When a file there differs from the
    packaged one and ``force`` is false, nothing is written and the conflicts are returned."""
    plan = [(folder / f.path, f.content) for f in stack_files()]
    unchanged = [path for path, content in plan if path.is_file() and path.read_bytes() == content]
    conflicts = [path for path, content in plan if path.exists() and path not in unchanged]
    if conflicts and not force:
        return Written(written=[], unchanged=unchanged, conflicts=conflicts)
    written = []
    for path, content in plan:
        if path in unchanged:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        written.append(path)
    return Written(written=written, unchanged=unchanged, conflicts=[])


@click.command(short_help="Write the Docker Compose stack (Collector, Jaeger, Prometheus...) into a folder.")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path), default=Path("tracedagent-stack"))
@click.option("--force", is_flag=True, help="Overwrite files there that differ from the packaged ones.")
def stack(folder: Path, force: bool) -> None:
    """Write docker-compose.yml and every config file it mounts into FOLDER (default
    ./tracedagent-stack), then say how to start it: the same files as the repository's, for a
    user who installed tracedagent with pip."""
    shown = printable(str(folder))
    try:
        result = write_stack(folder, force=force)
    except OSError as exc:  # one line, like every expected failure of the command line
        raise click.ClickException(f"cannot write the stack into {shown}: {exc.strerror or exc}") from None
    if result.conflicts:
        raise click.ClickException(
            f"{len(result.conflicts)} file(s) in {shown} differ from tracedagent's (yours to keep?): "
            f"{', '.join(printable(str(p)) for p in result.conflicts)}; nothing was written. --force overwrites them")
    click.echo(f"{len(result.written)} files written to {shown}"
               + (f", {len(result.unchanged)} already up to date" if result.unchanged else "") + ".")
    click.echo(f"Start the Collector, Jaeger, Prometheus, Alertmanager and Temporal's development server "
               f"on 127.0.0.1 ({shown}/README.md says what each is; Temporal only matters to tracedagent.temporal):")
    click.echo(f"  cd {shown} && docker compose up -d")
    click.echo("Then send a demo's runs and open Jaeger at http://localhost:16686:")
    click.echo("  tracedagent demo --otlp http://127.0.0.1:4317")
