"""The package's wings, checked: imports go down the layers, and no module imports itself
back through another, not even under ``TYPE_CHECKING`` or inside a function; and each wing
imports only the third-party packages it is meant to (``_core`` none: the standard library only).

``docs/architecture.md`` draws the same layers. A new wing, or a new edge between two, is a
decision: make it here and there together.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tracedagent"

LAYERS: dict[str, set[str]] = {
    # wing: the wings it may import (besides itself)
    "_core": set(),
    # Python types checked by pydantic (tool arguments, typed output): the core sees protocols.
    "_typed": {"_core"},
    "_instrumentation": {"_core"},
    "_agent": {"_core", "_typed", "_instrumentation"},
    "_export": {"_core"},
    "_traces": {"_core", "_instrumentation", "_export"},
    "_testing": {"_core", "_typed", "_instrumentation", "_agent", "_export", "_traces"},
    # The CLI runs `tracedagent demo --local-model` and `tracedagent local check` through OpenAIChatModel.
    "_cli": {"_core", "_typed", "_instrumentation", "_agent", "_export", "_traces", "_testing", "models", "evals"},
    "models": {"_core"},
    # A Temporal workflow is a driver of the loop (docs/architecture.md, "A new driver"): it
    # makes the same RunState decisions and opens the same span scopes as Agent.arun, and it
    # hosts Agents (the public class) by name.
    "temporal": {"_core", "_instrumentation", "_agent"},
    "mcp": {"_core"},
    # Evals grade runs through the testing toolkit's play (the seam live and replayed runs share).
    "evals": {"_core", "_typed", "_instrumentation", "_agent", "_traces", "_testing"},
}
"""Integrations (``models``, and later ``mcp`` and ``temporal``) sit on the public surface and
the core; the top-level modules (``__init__``, ``testing``, ``pytest_plugin``) re-export."""


API = {"opentelemetry-api"}
SDK = API | {"opentelemetry-sdk"}
OTLP = {"opentelemetry-exporter-otlp-proto-grpc", "opentelemetry-exporter-otlp-proto-http",
        "opentelemetry-exporter-otlp-proto-common", "opentelemetry-proto", "protobuf", "grpcio"}

THIRD_PARTY: dict[str, set[str]] = {
    # wing: the distributions it may import (besides the standard library)
    "_core": set(),
    "_typed": {"pydantic", "pydantic-core", "typing-extensions"},
    # Instrument through the API; only configure(), the testing toolkit and the command line
    # (which make providers and exporters) touch the SDK.
    "_instrumentation": API,
    "_agent": API,
    "_export": SDK | OTLP,
    "_traces": SDK | OTLP,
    "_testing": SDK,
    "_cli": SDK | OTLP | {"click", "rich", "xllamacpp"},  # xllamacpp: `tracedagent local serve` (extra local)
    # The adapters note what a server did with tool_choice on the current chat span (API only).
    "models": API | {"openai", "anthropic"},
    "temporal": API | {"temporalio"},
    # The MCP SDK's messages are pydantic models; a tool's input is checked by jsonschema (which it brings).
    "mcp": API | {"mcp", "mcp-types", "pydantic", "jsonschema"},
    # output_validates checks a type with pydantic; YAML datasets need PyYAML, the comparison
    # picture matplotlib (both extra evals, imported lazily); parametrize makes pytest's mark
    # (imported when called).
    "evals": SDK | {"pydantic", "pydantic-core", "pyyaml", "matplotlib", "pytest"},
}
"""``docs/architecture.md``'s table: an optional integration's SDK is its wing's alone."""

DISTRIBUTIONS = {
    # the import names of the distributions above (the longest prefix wins)
    "opentelemetry": "opentelemetry-api",  # the namespace's rest: trace, metrics, context, propagate, util...
    "opentelemetry.sdk": "opentelemetry-sdk",
    "opentelemetry.semconv": "opentelemetry-semantic-conventions",
    "opentelemetry.exporter.otlp.proto.grpc": "opentelemetry-exporter-otlp-proto-grpc",
    "opentelemetry.exporter.otlp.proto.http": "opentelemetry-exporter-otlp-proto-http",
    "opentelemetry.exporter.otlp.proto.common": "opentelemetry-exporter-otlp-proto-common",
    "opentelemetry.proto": "opentelemetry-proto",
    "google.protobuf": "protobuf",
    "grpc": "grpcio",
    "click": "click",
    "xllamacpp": "xllamacpp",
    "rich": "rich",
    "openai": "openai",
    "anthropic": "anthropic",
    "temporalio": "temporalio",
    "mcp": "mcp",
    "mcp_types": "mcp-types",
    "pydantic": "pydantic",
    "pydantic_core": "pydantic-core",
    "typing_extensions": "typing-extensions",
    "jsonschema": "jsonschema",
    "yaml": "pyyaml",
    "matplotlib": "matplotlib",
    "pytest": "pytest",
}


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


def third_party_imports(path: Path) -> set[str]:
    """Every module outside the standard library and tracedagent that ``path`` imports
    anywhere (``from a import b`` as ``a.b`` where that is a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top != "tracedagent":
                found.add(name)
    return found


def distribution(module: str) -> str | None:
    """The distribution ``module`` comes from, by the longest prefix ``DISTRIBUTIONS`` knows."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if (found := DISTRIBUTIONS.get(".".join(parts[:n]))) is not None:
            return found
    return None


def test_each_wing_imports_only_its_own_third_party_packages() -> None:
    wrong = []
    for module, path in modules().items():
        here = wing(module)
        if here is None:
            continue
        for name in sorted(third_party_imports(path)):
            dist = distribution(name)
            if dist is None or dist not in THIRD_PARTY[here]:
                wrong.append(f"{module} imports {name} ({dist or 'an unknown distribution'})")
    assert wrong == []


@functools.cache
def files_of(dist: str) -> set[str]:
    return {str(f.locate().resolve()) for f in importlib.metadata.files(dist) or () if f.suffix == ".py"}


def test_the_import_names_belong_to_their_distributions() -> None:
    # What THIRD_PARTY calls the API is the API's files: opentelemetry is a namespace the
    # SDK, the conventions and the exporters share, so each module is checked by its file.
    imported = {name for path in modules().values() for name in third_party_imports(path)}
    misplaced = []
    for name in sorted(imported):
        dist = distribution(name)
        try:
            spec = importlib.util.find_spec(name)
        except ImportError:  # ``from a import b`` where b is not a module: a's file is checked
            spec = importlib.util.find_spec(name.rsplit(".", 1)[0])
        if spec is None or spec.origin is None:  # a name inside a module, or a namespace package
            spec = importlib.util.find_spec(name.rsplit(".", 1)[0])
        if spec is None or spec.origin is None or dist is None:
            continue
        if str(Path(spec.origin).resolve()) not in files_of(dist):
            misplaced.append(f"{name}: {spec.origin} is not {dist}'s")
    assert misplaced == []
