"""capsviz's imports run one way: no module imports itself back through others, no module imports
one of a higher layer, and the core never imports Streamlit.

Every module under capsviz/ is parsed with ast (nothing is imported), and every import statement
counts, those inside functions too: a function-level import runs as surely as a top-level one,
only later. Imports under `if TYPE_CHECKING:` never run and are left out. CONTRIBUTING.md
describes the layers in the order LAYERS gives them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "capsviz"

# Lowest first. A module may import its own layer and those below it, never one above. A module
# belongs to the layer of the longest name below that is it or one of its packages; a name with a
# `*` stands for any one family's folder (capsviz/families/NAME/), so a new family needs no line here.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "base helpers",  # errors, paths, words and rules: what everything else may use
        (
            "capsviz",
            "capsviz.errors",
            "capsviz.i18n",
            "capsviz.memo",
            "capsviz.paths",
            "capsviz.devices",
            "capsviz.progress",
            "capsviz.text",
            "capsviz.store",
            "capsviz.access",
            "capsviz.bounds",
            "capsviz.entries",
            "capsviz.registry",
            "capsviz.config",
            "capsviz.families",
            "capsviz.families.*",  # a family's entry and its config
            "capsviz.analysis.rules",
            "capsviz.glossary",
        ),
    ),
    ("data and kernels", ("capsviz.data", "capsviz.kernels")),
    ("layers and routing", ("capsviz.routing", "capsviz.layers", "capsviz.losses")),
    ("models", ("capsviz.models", "capsviz.families.*.model")),
    (
        "training and checkpoints",
        (
            "capsviz.schema",
            "capsviz.checkpoint",
            "capsviz.model_cache",
            "capsviz.train",
            "capsviz.jobs",
            "capsviz.estimate",
            "capsviz.capsule_weights",
            "capsviz.plausible",
            "capsviz.against",
            "capsviz.adapter",
        ),
    ),
    ("analysis", ("capsviz.analysis", "capsviz.families.*.tour")),
    ("viz", ("capsviz.viz",)),
    (
        "cli, serving and the static site",
        ("capsviz.cli", "capsviz.__main__", "capsviz.serve", "capsviz.bench", "capsviz.site", "capsviz.translations", "capsviz._build"),
    ),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "node_modules" not in p.parts}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(name: str, path: Path, source: str | None = None) -> list[tuple[str, int]]:
    """(imported module, line) for every import in the module `name` (its file's text, or `source`),
    at any depth. `from A import b` imports A.b where that is a module, else A; relative imports
    are resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join(up + ([child.module] if child.module else []))
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    found.append((full if full in MODULES else base, child.lineno))
            visit(child)

    visit(ast.parse(path.read_text() if source is None else source, str(path)))
    return found


def graph() -> dict[str, dict[str, int]]:
    """Each capsviz module's capsviz imports: {module: {imported module: first line}}."""
    edges: dict[str, dict[str, int]] = {}
    for name, path in MODULES.items():
        out = edges.setdefault(name, {})
        for target, line in imports(name, path):
            if target in MODULES and target != name:
                out.setdefault(target, line)
    return edges


def circles(edges: dict[str, dict[str, int]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan): each holds a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def one_circle(edges: dict[str, dict[str, int]], component: set[str]) -> str:
    """The shortest circle through the component's first module, spelled with the line of each
    import (every module of a component reaches every other)."""
    start = min(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while start not in came_from:  # breadth first, so the circle named is a shortest one
        reached = []
        for here in frontier:
            for there in sorted(edges[here]):
                if there in component and there not in came_from:
                    came_from[there] = here
                    reached.append(there)
        frontier = reached
    path = [start]
    while len(path) == 1 or path[-1] != start:
        path.append(came_from[path[-1]])
    path.reverse()
    return " -> ".join(f"{a} (line {edges[a][b]})" for a, b in zip(path[:-1], path[1:], strict=True)) + f" -> {start}"


def matches(name: str, prefix: str) -> bool:
    """Whether module `name` is `prefix` or inside it; a `*` in `prefix` matches one name without dots."""
    if "*" in prefix:
        pattern = re.escape(prefix).replace(r"\*", r"[^.]+")
        return re.fullmatch(pattern + r"(\..+)?", name) is not None
    return name == prefix or (prefix != "capsviz" and name.startswith(prefix + "."))  # the package itself names only its __init__


def layer_of(name: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the matching name, layer)
    for rank, (_, names) in enumerate(LAYERS):
        for prefix in names:
            if matches(name, prefix):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), rank)
    return None if best is None else best[1]


def test_every_module_is_parsed_and_has_a_layer():
    assert {"capsviz.routing", "capsviz.data.upload", "capsviz.kernels.native", "capsviz.cli"} <= set(MODULES)
    missing = [name for name in MODULES if layer_of(name) is None]
    assert not missing, f"no layer for {missing}: add each to LAYERS here and to CONTRIBUTING.md's map"


def test_every_layer_name_is_a_module():
    stale = [prefix for _, names in LAYERS for prefix in names if not any(matches(m, prefix) for m in MODULES)]
    assert not stale, f"LAYERS names modules that are not there: {stale}"


def test_no_import_circles():
    edges = graph()
    found = [one_circle(edges, c) for c in circles(edges)]
    assert not found, "import circles (move the piece both sides need into a module below them):\n" + "\n".join(found)


def test_imports_never_go_up_a_layer():
    upward = []
    for name, targets in graph().items():
        for target, line in targets.items():
            here, there = layer_of(name), layer_of(target)
            if here is not None and there is not None and there > here:
                upward.append(f"{MODULES[name].relative_to(ROOT)}:{line} {name} ({LAYERS[here][0]}) imports {target} ({LAYERS[there][0]})")
    assert not upward, "imports that go up a layer:\n" + "\n".join(upward)


def test_the_core_never_imports_streamlit():
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for name, path in MODULES.items()
        for target, line in imports(name, path)
        if target.split(".")[0] == "streamlit"
    ]
    assert not found, "capsviz is the core under the pages: " + "; ".join(found)


@pytest.mark.parametrize(
    "source,expected",
    [
        ("def f():\n    from capsviz import cli\n", [("capsviz.cli", 2)]),
        ("from . import idx\n", [("capsviz.data.idx", 1)]),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import capsviz.cli\n", [("typing", 1)]),
    ],
)
def test_the_parser_sees_function_level_and_relative_imports(source, expected):
    path = PACKAGE / "data" / "planted.py"  # a module of capsviz.data that is never written
    assert imports("capsviz.data.planted", path, source) == expected


def test_a_new_familys_folder_is_installed_without_being_listed(tmp_path):
    """The wheel carries every package under capsviz/ (capsviz/_build.py), a family's folder that
    nothing else names among them, and the app's top level as capsviz._app: built from a copy of
    the sources with a toy family added (the shipped checkpoints left out, for speed)."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"
    skip = shutil.ignore_patterns("node_modules", "__pycache__", "*.safetensors", "build", "*.egg-info")
    for name in ("capsviz", "pages", "checkpoints"):
        shutil.copytree(ROOT / name, src / name, ignore=skip)
    for name in ("pyproject.toml", "README.md", "app.py", ".streamlit/config.toml"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, src / name)
    toy = src / "capsviz" / "families" / "toy_folder"
    toy.mkdir()
    (toy / "__init__.py").write_text('"""A family no list names."""\n')
    (toy / "model.py").write_text("LAYERS = 1\n")
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "wheel"), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("capsviz-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {f"{module_name(p).replace('.', '/')}/__init__.py" for p in PACKAGE.rglob("__init__.py") if "node_modules" not in p.parts}
    assert not packages - names, sorted(packages - names)  # every package of the repository
    assert {"capsviz/families/toy_folder/__init__.py", "capsviz/families/toy_folder/model.py"} <= names
    assert {"capsviz/_app/app.py", "capsviz/_app/pages/tour.py", "capsviz/_app/.streamlit/config.toml"} <= names


def test_contributing_maps_the_same_layers_in_the_same_order():
    text = (ROOT / "CONTRIBUTING.md").read_text().split("## How the code is laid out", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| ")]
    rows = rows[1:]  # the header row
    assert [r[0] for r in rows] == [name for name, _ in LAYERS]
    for (name, prefixes), row in zip(LAYERS, rows, strict=True):
        named = {m.rstrip("/") for m in re.findall(r"`([^`]+)`", row[1])}
        wanted = {p.removeprefix("capsviz.").replace(".", "/") for p in prefixes if p != "capsviz"}
        assert named >= wanted, f"CONTRIBUTING.md's {name} row lacks {sorted(wanted - named)}"
