"""The package's wings, checked: imports go down the layers, and no module imports itself
back through another, not even under ``TYPE_CHECKING`` or inside a function.

``docs/architecture.md`` draws the same layers. A new wing, or a new edge between two, is a
decision: make it here and there together.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tracedagent"

LAYERS: dict[str, set[str]] = {
    # wing: the wings it may import (besides itself)
    "_core": set(),
    "_instrumentation": {"_core"},
    "_agent": {"_core", "_instrumentation"},
    "_export": {"_core"},
    "_traces": {"_core", "_instrumentation", "_export"},
    "_testing": {"_core", "_instrumentation", "_agent", "_export", "_traces"},
    # The CLI runs `tracedagent demo --local-model` and `tracedagent local check` through OpenAIChatModel.
    "_cli": {"_core", "_instrumentation", "_agent", "_export", "_traces", "_testing", "models"},
    "models": {"_core"},
    # A Temporal workflow is a driver of the loop (docs/architecture.md, "A new driver"): it
    # makes the same RunState decisions and opens the same span scopes as Agent.arun, and it
    # hosts Agents (the public class) by name.
    "temporal": {"_core", "_instrumentation", "_agent"},
    "mcp": {"_core"},
}
"""Integrations (``models``, and later ``mcp`` and ``temporal``) sit on the public surface and
the core; the top-level modules (``__init__``, ``testing``, ``pytest_plugin``) re-export."""


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every tracedagent module ``name`` imports anywhere in its text (a function's body and
    ``if TYPE_CHECKING:`` included), the package ``tracedagent`` itself left out."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            candidates = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in candidates:
            while target and target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in known and target not in ("tracedagent", name) and not name.startswith(target + "."):
                targets.add(target)
    return targets


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def wing(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else None


def test_no_import_cycle() -> None:
    edges = graph()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


def test_imports_go_down_the_wings() -> None:
    upward = []
    for module, targets in graph().items():
        here = wing(module)
        if here is None or here not in LAYERS:
            continue
        for target in targets:
            there = wing(target)
            if there is None:
                # a top-level module: only the version is below every wing
                if target != "tracedagent._version":
                    upward.append(f"{module} -> {target}")
            elif there != here and there not in LAYERS[here]:
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_every_wing_says_what_it_owns_and_may_import() -> None:
    for name in LAYERS:
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text()))
        assert doc, name
        assert "import" in doc, f"{name}'s docstring says what it may import"


def test_no_product_module_is_over_about_400_lines() -> None:
    long = {str(path.relative_to(PACKAGE)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text().splitlines())) > 430}
    assert long == {}
