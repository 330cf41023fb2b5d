"""The package's layering, read from the source: every import, lazy ones inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.joinpath("artune").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """The artune modules ``name`` imports anywhere in its file."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name) for name in MODULES}


def _cycle_through(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A path of imports from ``start`` back to itself, if there is one."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in graph.get(node, ()):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_no_module_imports_itself_back() -> None:
    """A package's ``__init__`` re-exporting its modules is not a circle; a module importing back its importer is."""
    packages = {m for m, p in MODULES.items() if p.name == "__init__.py"}
    graph = {m: deps - packages for m, deps in GRAPH.items() if m not in packages}
    circles = [c for m in sorted(graph) if (c := _cycle_through(m, graph))]
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_the_table_model_is_a_leaf() -> None:
    assert GRAPH["artune.table.model"] <= {"artune.errors", "artune.sizes"}


def test_algorithms_never_import_tune_report_or_cli() -> None:
    upward = {
        (m, dep)
        for m, deps in GRAPH.items()
        if m.startswith("artune.algorithms")
        for dep in deps
        if f"{dep}.".startswith(("artune.tune.", "artune.report.", "artune.cli."))
    }
    assert not upward


def test_the_reader_sees_lazy_and_relative_imports() -> None:
    """The checks above are only as good as the import reader: it must see what a function imports late."""
    assert "artune.measure.cuda_timing" in GRAPH["artune.measure.harness"]
    assert "artune.model.hardware" in GRAPH["artune.review.evidence"]  # imported inside a function
    assert _cycle_through("a", {"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
