"""The import rules of docs/architecture.md ("Layers and what each may import"), checked on the
source: every import, at the top of a file or inside a function, of every module."""

import ast
from pathlib import Path

from mpi_launch import REPO_ROOT

# package -> the gnnscale packages (and `partitioning`, `planning`) it may import;
# docs/architecture.md.
ALLOWED = {
    "errors": set(), "threads": set(), "models": set(), "host_memory": set(), "testing": set(),
    "comm": {"errors"},
    "data": {"errors", "host_memory", "partitioning"},
    "graph": {"comm", "errors"},
    "parallel": {"comm", "errors"},
    "nn": {"graph", "comm", "errors"},
    "engine": {"nn", "graph", "parallel", "comm", "data", "partitioning", "errors"},
    "cli": {"engine", "nn", "graph", "parallel", "comm", "data", "partitioning", "planning",
            "errors", "threads", "models", "host_memory"},
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
