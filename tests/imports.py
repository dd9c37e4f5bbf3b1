"""The package's import graph, read from its source with `ast` (tests/test_layers.py holds it to the rules of
docs/design.md). Every import of a lossops module counts, at the top of a module or inside a function; one under
`if TYPE_CHECKING:` is type-only and counts for nothing."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root is the package `lossops`
NOT_PACKAGE = {"setup.py", "build_backend.py"}  # the build's own scripts sit at the root but are not modules


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] in ("tests", ".venv", "build", "venv", "docs") or relative.as_posix() in NOT_PACKAGE:
            continue
        if any(part.startswith(".") for part in relative.parts):
            continue
        parts = ["lossops", *relative.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of a module, outside `if TYPE_CHECKING:` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_only(child):
                stack.extend(child.orelse)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child
            stack.append(child)


def edges(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the lossops modules it imports (`from X import name` names X.name where that is a module)."""
    known = modules(root)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for statement in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(statement, ast.Import):
                targets = [alias.name for alias in statement.names]
            else:
                base = statement.module or ""
                if statement.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - statement.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in statement.names]
            for target in targets:
                while target and target not in known:  # `import lossops.x.y` of a name inside a module
                    target = target.rpartition(".")[0]
                if target.startswith("lossops") and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


if __name__ == "__main__":
    for component in cycles(edges()):
        print(f"{len(component)} modules: {', '.join(component)}")
