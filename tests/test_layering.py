"""Layers import downward only (docs/architecture.md): dialects <- passes, interpreters, frontend <-
backend <- perf <- tune <- driver, api, stamp <- cli, fuzz.

Every `import` of a `deplodock` module, at module level or inside a function, is an edge of
the import graph. An edge from a lower layer to a higher one, or between two different
packages of one layer (other than the driver group and the entry points), fails the test
with the importing file, the imported module and both layers.
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
    frozenset({"driver", "api", "stamp", "torch_backend", "explorer"}),
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
                found.add(base)
    return {m for m in found if m == root.name or m.startswith(root.name + ".")}


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


def test_no_module_imports_upward() -> None:
    problems = upward_imports()
    assert not problems, "imports against the layering:\n" + "\n".join(problems)


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
