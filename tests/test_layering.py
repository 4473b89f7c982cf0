"""Layers import downward only (docs/architecture.md): dialects <- passes, interpreters, frontend <-
backend <- perf <- tune <- driver, api, stamp <- cli, fuzz.

Every `import` of a `deplodock` module, at module level or inside a function, is an edge of
the import graph. An edge from a lower layer to a higher one, or between two different
packages of one layer (other than the driver group and the entry points), fails the test
with the importing file, the imported module and both layers.

Inside a layer, modules may import each other, but never in a circle: a cycle of modules
that import one another (each through any of its imports, module-level or in a function)
fails the test with the cycle spelled out. `from package import module` is an edge to the
module, not to the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "deplodock"

#: Top-level module or package of `deplodock` -> its layer (lowest first).
LAYERS: dict[str, int] = {
    "files": 0,
    "numerics": 0,
    "dialects": 0,
    "passes": 1,
    "interpreters": 1,
    "frontend": 1,
    "backend": 2,
    "perf": 3,
    "tune": 4,
    "driver": 5,
    "api": 5,
    "generation": 5,
    "stamp": 5,
    "torch_backend": 5,
    "explorer": 5,
    "cli": 6,
    "fuzz": 6,
    "__main__": 6,
    "__init__": 6,
}

#: Packages of one layer that may import each other (they are one component).
GROUPS: tuple[frozenset[str], ...] = (
    frozenset({"driver", "api", "generation", "stamp", "torch_backend", "explorer"}),
    frozenset({"cli", "__main__", "__init__"}),
)


def component(module: str) -> str:
    """`deplodock.passes.tile.schedule` -> `passes`; the package itself -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, root: Path) -> set[str]:
    """The `deplodock` modules `path` imports anywhere in its body."""
    importer = module_name(path, root)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base == root.name:  # `from deplodock import api`: the submodules themselves
                found |= {f"{base}.{alias.name}" for alias in node.names}
            else:
                found |= {_module_or_package(base, alias.name, root) for alias in node.names}
    return {m for m in found if m == root.name or m.startswith(root.name + ".")}


def _module_or_package(package: str, name: str, root: Path) -> str:
    """`package.name` when that is a module (`from deplodock.driver import capture_cache`),
    else `package` (`from deplodock.driver import Program`)."""
    folder = root.parent.joinpath(*package.split("."), name)
    is_module = folder.with_suffix(".py").is_file() or (folder / "__init__.py").is_file()
    return f"{package}.{name}" if is_module else package


def allowed(source: str, target: str) -> bool:
    if source == target:
        return True
    low, high = LAYERS[target], LAYERS[source]
    if low < high:
        return True
    return low == high and any(source in g and target in g for g in GROUPS)


def upward_imports(root: Path = PACKAGE) -> list[str]:
    """One line per import that goes up (or sideways) in the layering."""
    problems: list[str] = []
    for path in sorted(root.rglob("*.py")):
        source = component(module_name(path, root))
        for imported in sorted(imported_modules(path, root)):
            target = component(imported)
            if source not in LAYERS or target not in LAYERS:
                problems.append(f"{path.relative_to(root.parent)}: {imported} has no layer")
            elif not allowed(source, target):
                problems.append(
                    f"{path.relative_to(root.parent)} ({source}, layer {LAYERS[source]}) "
                    f"imports {imported} ({target}, layer {LAYERS[target]})"
                )
    return problems


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of `root` -> the modules of `root` it imports (itself left out)."""
    files = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    return {
        module: {m for m in imported_modules(path, root) if m in files and m != module}
        for module, path in files.items()
    }


def import_cycles(root: Path = PACKAGE) -> list[str]:
    """One line per circle of imports: `a -> b -> a`, from the first module of each
    strongly connected part of the import graph (Tarjan's algorithm)."""
    graph = import_graph(root)
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    parts: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            part = []
            while (top := stack.pop()) != module:
                part.append(top)
            parts.append(sorted([*part, module]))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return [" -> ".join(_cycle(graph, part)) for part in parts if len(part) > 1]


def _cycle(graph: dict[str, set[str]], part: list[str]) -> list[str]:
    """A circle through the first module of `part`, by breadth-first search back to it."""
    start, members = part[0], set(part)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        module = frontier.pop(0)
        for imported in sorted(graph[module] & members):
            if imported == start:
                return [*paths[module], start]
            if imported not in paths:
                paths[imported] = [*paths[module], imported]
                frontier.append(imported)
    raise AssertionError(f"{part} is not a cycle")


def test_no_module_imports_upward() -> None:
    problems = upward_imports()
    assert not problems, "imports against the layering:\n" + "\n".join(problems)


def test_no_import_circles() -> None:
    cycles = import_cycles()
    assert not cycles, "modules that import each other in a circle:\n" + "\n".join(cycles)


def test_every_package_has_a_layer() -> None:
    present = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()}
    present = {n for n in present if not n.startswith(".") and n != "__pycache__"}
    modules = {n for n in present if (PACKAGE / n).is_dir() or (PACKAGE / f"{n}.py").exists()}
    assert modules <= set(LAYERS), f"give these a layer: {sorted(modules - set(LAYERS))}"


def test_the_checker_reports_an_upward_and_a_sideways_import(tmp_path: Path) -> None:
    root = tmp_path / "deplodock"
    for package in ("dialects", "passes", "interpreters", "backend"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "dialects" / "tile.py").write_text(
        "def f():\n    from deplodock.backend import runtime\n"
    )
    (root / "passes" / "fuse.py").write_text("from ..interpreters import loop\n")
    (root / "backend" / "build.py").write_text("from deplodock.dialects import tile\n")
    problems = upward_imports(root)
    assert problems == [
        "deplodock/dialects/tile.py (dialects, layer 0) imports deplodock.backend "
        "(backend, layer 2)",
        "deplodock/passes/fuse.py (passes, layer 1) imports deplodock.interpreters "
        "(interpreters, layer 1)",
    ]


def test_the_checker_reports_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    root = tmp_path / "deplodock"
    (root / "cli").mkdir(parents=True)
    for init in (root / "__init__.py", root / "cli" / "__init__.py"):
        init.write_text("")
    (root / "cli" / "main.py").write_text("from deplodock.cli import tune\n")
    (root / "cli" / "tune.py").write_text("def run():\n    from .main import load\n")
    (root / "cli" / "errors.py").write_text("from deplodock.cli import main\n")
    assert import_cycles(root) == ["deplodock.cli.main -> deplodock.cli.tune -> deplodock.cli.main"]
