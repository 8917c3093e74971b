"""The layering docs/architecture.md states, held: imports go one way, nothing imports the command
line package, and no module edits sys.path.

Why a test: a cycle or an upward import is one line in any file and nothing else would notice it
(Python tolerates most cycles until the day an import order changes). The graph is read from the
sources with ``ast``, every import statement of a module counted wherever it stands (one inside a
function that closes a cycle is still a cycle in the design)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the packages and modules below model/, and the command-line package below tools/
SOURCES = (ROOT / "model", ROOT / "tools")
# docs/architecture.md: capra.config <- capra.isa <- the rest of capra <- tiny_lm <- host <- paged_lm <- serving
LAYERS = ("capra", "tiny_lm", "host", "paged_lm", "serving")
CLI = "capra_cli"


def project_modules() -> dict[str, Path]:
    """Dotted name -> file of every project module: model/**.py by its path below model/, and
    tools/capra_cli/**.py (the scripts in tools/ are shims that only run it)."""
    mods = {}
    for base in SOURCES:
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("")
            if "__pycache__" in rel.parts or (base.name == "tools" and rel.parts[0] != CLI):
                continue
            parts = rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts
            mods[".".join(parts)] = path
    return mods


def imports_of(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, anywhere in its file: a module, or for `from x import y`
    the submodule x.y when there is one, else x (or the nearest package above that is one)."""

    def known(dotted: str) -> str | None:
        while dotted and dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(m for a in node.names if (m := known(a.name)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}".strip(".")
            for a in node.names:
                target = f"{base}.{a.name}" if f"{base}.{a.name}" in mods else known(base)
                if target:
                    found.add(target)
    found.discard(name)
    return found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (read once per test process)."""
    mods = project_modules()
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return found


def test_the_module_list_is_the_project():
    """The graph below is only as good as its list of modules: the ones the map names are in it."""
    mods = project_modules()
    for name in ("capra.config", "capra.isa", "tiny_lm", "host", "paged_lm", "serving", "replay", CLI):
        assert name in mods, f"{name} is missing from the modules the layering tests read"


def test_no_import_cycle():
    graph = import_graph()
    assert not cycles(graph), f"modules that import each other, directly or through others: {cycles(graph)}"


def test_the_cycle_finder_finds_a_cycle():
    """The check above can fail: a chain closed back on itself is reported, a chain alone is not."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_imports_go_down_the_layers():
    """capra (config below isa below the rest) <- tiny_lm <- host <- paged_lm <- serving; replay reads
    capra only; nothing outside the command-line package imports it."""
    problems = []
    for name, deps in import_graph().items():
        top = name.split(".")[0]
        for dep in deps:
            dep_top = dep.split(".")[0]
            if top in LAYERS and dep_top in LAYERS and LAYERS.index(dep_top) > LAYERS.index(top):
                problems.append(f"{name} imports {dep}, a layer above it")
            if top == "replay" and dep_top not in ("replay", "capra"):
                problems.append(f"{name} imports {dep}: replay reads capra only")
            if dep_top == CLI and top != CLI:
                problems.append(f"{name} imports {dep}: nothing outside {CLI} may")
            if name == "capra.config" and dep.startswith("capra."):
                problems.append(f"capra.config imports {dep}: the configuration is read by the ISA, not the reverse")
    assert not problems, "\n".join(problems)


def test_no_module_edits_sys_path():
    """Every module imports by name from the installed project (pyproject.toml): none appends to,
    inserts into or replaces sys.path (the chapter's own listings do, in the book's text, and are
    not modules of the project)."""
    offenders = []
    for path in [*project_modules().values(), *sorted((ROOT / "tools").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
                    and node.value.id == "sys"):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"sys.path is touched at {', '.join(offenders)}"
