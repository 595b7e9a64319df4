"""The import rules of docs/architecture.md ("Layers and what each may import"), checked on the
source: every import, at the top of a file or inside a function, of every module; and no import
cycles among the modules."""

import ast
from pathlib import Path

import pytest

from mpi_launch import REPO_ROOT

# package -> the gnnscale packages (and `partitioning`, `planning`) it may import;
# docs/architecture.md.
ALLOWED = {
    "errors": set(), "threads": set(), "cnn": set(), "host_memory": set(), "testing": set(),
    "lazy_names": set(),
    "comm": {"errors", "lazy_names"},
    "data": {"errors", "host_memory", "partitioning"},
    "graph": {"comm", "errors"},
    "parallel": {"comm", "errors"},
    "nn": {"graph", "comm", "errors", "lazy_names"},
    "engine": {"nn", "graph", "parallel", "comm", "data", "partitioning", "errors"},
    "cli": {"engine", "nn", "graph", "parallel", "comm", "data", "partitioning", "planning",
            "errors", "threads", "cnn", "host_memory"},
    "recipes": {"engine", "nn", "comm", "data", "partitioning", "errors", "threads"},
    "__init__": {"threads"}, "__main__": {"cli"},
}


def imported_modules(text: str, package: tuple) -> set:
    """Dotted names of the modules ``text`` imports; relative imports are resolved against
    ``package`` (the importing file's package, e.g. ``("gnnscale", "comm")``)."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.update([module] if node.module else
                         [f"{module}.{alias.name}" for alias in node.names])
    return found


def layers_used(path: Path) -> set:
    """gnnscale sub-packages (``comm``, ``graph``, ...), ``partitioning`` and ``planning`` that
    ``path`` imports."""
    package = path.relative_to(REPO_ROOT).parent.parts
    used = set()
    for name in imported_modules(path.read_text(), package):
        parts = name.split(".")
        if parts[0] == "gnnscale":
            used.add(parts[1] if len(parts) > 1 else "gnnscale")
        elif parts[0] in ("partitioning", "planning"):
            used.add(parts[0])
    return used


def test_gnnscale_packages_import_only_the_layers_below_them():
    problems = []
    for path in sorted((REPO_ROOT / "gnnscale").rglob("*.py")):
        relative = path.relative_to(REPO_ROOT / "gnnscale")
        own = relative.parts[0].removesuffix(".py")
        wrong = sorted(layers_used(path) - ALLOWED[own] - {own})
        if wrong:
            problems.append(f"gnnscale/{relative} imports {', '.join(wrong)}")
    assert not problems, "\n".join(problems)


# The packages beside gnnscale -> the top-level packages they never import.
STANDALONE = {"partitioning": {"gnnscale", "planning", "torch", "mpi4py"},
              "planning": {"gnnscale", "torch", "mpi4py"}}


def test_partitioning_and_planning_import_neither_gnnscale_nor_torch_nor_mpi():
    problems = []
    for top, forbidden in STANDALONE.items():
        for path in sorted((REPO_ROOT / top).rglob("*.py")):
            package = path.relative_to(REPO_ROOT).parent.parts
            roots = {name.split(".")[0] for name in imported_modules(path.read_text(), package)}
            if roots & forbidden:
                problems.append(f"{path.relative_to(REPO_ROOT)} imports "
                                f"{', '.join(sorted(roots & forbidden))}")
    assert not problems, "\n".join(problems)


def test_relative_and_lazy_imports_are_seen():
    text = "from ..graph import LocalGraph\ndef f():\n    from . import single\n"
    assert imported_modules(text, ("gnnscale", "comm")) == {"gnnscale.graph",
                                                             "gnnscale.comm.single"}


def _outside_main_guard(tree: ast.Module) -> ast.Module:
    """``tree`` without its ``if __name__ == "__main__":`` blocks: what they import runs only
    when the file is the program, never when another module imports it."""
    def is_main_guard(node):
        test = getattr(node, "test", None)
        return (isinstance(node, ast.If) and isinstance(test, ast.Compare)
                and isinstance(test.left, ast.Name) and test.left.id == "__name__"
                and any(isinstance(c, ast.Constant) and c.value == "__main__"
                        for c in test.comparators))
    return ast.Module(body=[n for n in tree.body if not is_main_guard(n)], type_ignores=[])


def module_graph(top: str = "gnnscale") -> dict:
    """Module -> the modules of ``top`` it imports (at the top of the file or inside functions;
    ``from package import name`` counts as the module ``package.name`` where that is one)."""
    files = {}
    for path in sorted((REPO_ROOT / top).rglob("*.py")):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def module_of(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in files.items():
        tree = _outside_main_guard(ast.parse(path.read_text()))
        package = path.relative_to(REPO_ROOT).parent.parts
        imported = {module_of(name) for name in imported_modules(ast.unparse(tree), package)}
        graph[module] = sorted(imported - {None, module})
    return graph


def import_cycles(graph: dict) -> list:
    """One cycle (a list of modules, the first repeated at the end) through every strongly
    connected group of ``graph`` that has more than one module."""
    order, low, on_stack, stack, cycles = {}, {}, set(), [], []

    def visit(start):  # Tarjan's algorithm, iterative
        work = [(start, iter(graph[start]))]
        order[start] = low[start] = len(order)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in order:
                    order[child] = low[child] = len(order)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], order[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    cycles.append(_cycle_within(graph, group))

    for node in graph:
        if node not in order:
            visit(node)
    return cycles


def _cycle_within(graph: dict, group: set) -> list:
    """A shortest cycle through the first module of a strongly connected ``group``."""
    start = min(group)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for child in graph[path[-1]]:
            if child == start:
                return path + [start]
            if child in group and child not in seen:
                seen.add(child)
                paths.append(path + [child])
    raise AssertionError(f"{sorted(group)} is not strongly connected")


@pytest.mark.parametrize("top", ["gnnscale", "partitioning", "planning"])
def test_no_import_cycles_among_modules(top):
    cycles = import_cycles(module_graph(top))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_import_cycles_are_found_also_through_lazy_imports_and_packages():
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e2"], "e2": ["e"]}
    assert import_cycles(graph) == [["a", "b", "c", "a"], ["e", "e2", "e"]]
    assert import_cycles({"a": ["b"], "b": [], "c": ["a", "b"]}) == []
    text = ("import os\ndef f():\n    from .b import g\n"
            "if __name__ == '__main__':\n    from .c import main\n")
    tree = _outside_main_guard(ast.parse(text))
    assert imported_modules(ast.unparse(tree), ("gnnscale", "x")) == {"os", "gnnscale.x.b"}


MAPPED = ("gnnscale", "partitioning", "planning")
DOC = REPO_ROOT / "docs" / "architecture.md"


def doc_sections(text: str) -> dict:
    """``"gnnscale/nn/"`` (a "### `gnnscale/nn/`" heading) -> the lines of its section."""
    sections, current = {}, None
    for line in text.splitlines():
        if line.startswith("#"):
            current = line.split("`")[1] if line.startswith("### `") else None
            if current is not None:
                sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return sections


def unmapped_modules(text: str, paths) -> list:
    """Of ``paths`` (relative, e.g. ``gnnscale/nn/conv.py``), those the map does not name: a
    module of a package with a section (### `gnnscale/nn/`) is named by a line of that section
    holding `conv.py` (and, inside a sub-folder, that folder's ``name/`` too); a package's
    ``__init__.py`` by the section or its folder; any module by its whole path in `backticks`."""
    sections = doc_sections(text)
    subfolders = {}  # section -> the sub-folders of its package ("edge_cut/", ...)
    for path in paths:
        parts = Path(path).parts
        for depth in range(1, len(parts) - 1):
            key = "/".join(parts[:depth]) + "/"
            subfolders.setdefault(key, set()).add(f"{parts[depth]}/")
    missing = []
    for path in paths:
        parts = Path(path).parts
        if f"`{path}`" in text:
            continue
        for depth in range(len(parts) - 1, 0, -1):
            key = "/".join(parts[:depth]) + "/"
            if key in sections:
                inner = parts[depth:]
                break
        else:
            missing.append(str(path))
            continue
        folders = [f"{folder}/" for folder in inner[:-1]]
        # a line naming a file inside a sub-folder names that folder; a top-level file's none
        others = set() if folders else subfolders.get(key, set())
        if inner[-1] == "__init__.py":
            named = not folders or any(folders[-1] in line for line in sections[key])
        else:
            named = any(f"`{inner[-1]}`" in line or f"/{inner[-1]}`" in line
                        for line in sections[key]
                        if all(folder in line for folder in folders)
                        and not any(f"`{folder}" in line for folder in others))
        if not named:
            missing.append(str(path))
    return missing


def test_every_module_is_on_the_map():
    paths = [path.relative_to(REPO_ROOT).as_posix() for top in MAPPED
             for path in sorted((REPO_ROOT / top).rglob("*.py"))]
    missing = unmapped_modules(DOC.read_text(), paths)
    assert not missing, "not named in docs/architecture.md:\n" + "\n".join(missing)


def test_a_module_off_the_map_is_found():
    text = ("### `gnnscale/nn/`\n| `conv.py` | layers |\n| `guard/` | `a.py` |\n"
            "### `partitioning/`\n| `edge_cut/random.py`, `block.py` | |\n"
            "Beside: `gnnscale/threads.py`.\n")
    paths = ["gnnscale/nn/conv.py", "gnnscale/nn/gat.py", "gnnscale/nn/guard/a.py",
             "gnnscale/nn/guard/__init__.py", "gnnscale/nn/other/a.py",
             "gnnscale/nn/other/__init__.py", "partitioning/edge_cut/block.py",
             "partitioning/block.py", "gnnscale/threads.py", "gnnscale/errors.py",
             "planning/tune.py"]
    assert unmapped_modules(text, paths) == [
        "gnnscale/nn/gat.py", "gnnscale/nn/other/a.py", "gnnscale/nn/other/__init__.py",
        "partitioning/block.py", "gnnscale/errors.py", "planning/tune.py"]
