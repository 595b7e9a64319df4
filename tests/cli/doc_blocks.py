"""The command blocks of README.md and docs/*.md, run as a new user runs them: shared by
test_readme_commands.py (the README's blocks) and test_docs_commands.py (the docs' blocks),
which run in separate test files so that the suite's workers can take them at the same time.

Blocks are run in a fresh copy of the repository (its files, tracked and new, not ignored ones,
the shipped ``datasets/`` among them) with the project's `.venv` linked in. What is substituted,
and only this:
- ``/path/to/datasets`` (the README's placeholder for the user's data) -> the shipped datasets;
- ``mpirun -n 64`` (the cluster example) -> ``mpirun -n 2``: this machine is not a cluster;
- ``make test`` -> ``make -n test`` (a dry run: the suite cannot run itself from inside);
- commands that download (``datasets download``, ``--download``) are left out: this machine has
  no internet (tests/data and tests/cli/test_cli_datasets.py test downloading against a local
  server);
and the environment has ``GNNSCALE_MAX_EPOCHS=2`` (README: smoke tests), Open MPI's variables for
running as root and oversubscribing (README: On a cluster), and a ``hosts`` file naming this
machine for the cluster example.

Blocks the tests must not run (a cluster's batch script, an install against a cluster's MPI,
an hours-long benchmark) are fenced as ``bash`` or ``text`` instead.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mpi_launch import DATASETS_ROOT, REPO_ROOT, mpi_env, run_command

README = REPO_ROOT / "README.md"
DOCS = sorted((REPO_ROOT / "docs").glob("*.md"))
SUBSTITUTIONS = [("/path/to/datasets", str(DATASETS_ROOT)), ("mpirun -n 64", "mpirun -n 2"),
                 ("make test", "make -n test")]
SMOKE_ENV = {"GNNSCALE_MAX_EPOCHS": "2",
             "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",
             "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def fenced_blocks(language: str, path: Path = README) -> list[str]:
    """The bodies of the fenced blocks in ``language`` of the Markdown file ``path``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def readme_blocks(language: str) -> list[str]:
    """The bodies of the README's fenced blocks in ``language``, in order."""
    return fenced_blocks(language, README)


def heading_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to
    hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def prose(path: Path) -> str:
    """The Markdown file without its fenced blocks (links inside code are not links)."""
    return re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)


def broken_links(path: Path, root: Path = REPO_ROOT) -> list[str]:
    """The relative links of ``path`` (a file under ``root``) whose file or folder, or heading,
    does not exist."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose(path)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part) if file_part else path
        if not linked.exists():
            broken.append(f"{path.relative_to(root)}: {target} (no such file)")
        elif anchor and linked.suffix == ".md":
            anchors = {heading_anchor(h) for h in re.findall(r"^#+ (.+)$", prose(linked),
                                                             flags=re.M)}
            if anchor not in anchors:
                broken.append(f"{path.relative_to(root)}: {target} (no such heading)")
    return broken


def fresh_copy(target: Path) -> Path:
    """The repository's files (as a clone would hold them, plus new ones) under ``target``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=REPO_ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)  # mtimes kept: make sees .venv up to date
    # the compiled kernels too (numba's cache, valid while the sources' mtimes are): a block
    # that imports the copy's gnnscale (`python -c`) would otherwise compile every kernel again
    # (about 35 CPU-s), which the suite does once (tests/kernel_warmup.py)
    for package in ("gnnscale", "partitioning", "planning"):
        for cached in (REPO_ROOT / package).rglob("__pycache__/*.nb[ic]"):
            copied = target / cached.relative_to(REPO_ROOT)
            copied.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(cached, copied)
    (target / ".venv").symlink_to(REPO_ROOT / ".venv")
    (target / "hosts").write_text("localhost slots=64\n")
    return target


def substituted(block: str) -> tuple[str, list[str]]:
    """The block with the substitutions made and download commands left out, and those."""
    for old, new in SUBSTITUTIONS:
        block = block.replace(old, new)
    commands = re.split(r"(?<!\\)\n", block)  # one command per line, with its continuations
    downloads = [c for c in commands if re.search(r"datasets download|--download\b", c)]
    return "\n".join(c for c in commands if c not in downloads), downloads


def copy_and_environment(target: Path) -> tuple[Path, dict]:
    """A fresh copy of the repository under ``target`` and the environment a user's shell would
    give the blocks; fails the test if the project's .venv is out of date."""
    # `make demo` in the copy shares this .venv: if it is out of date, make would reinstall
    # gnnscale from the copy (which the test then deletes), so refuse instead
    if subprocess.run(["make", "-q", ".venv/.installed"], cwd=REPO_ROOT).returncode != 0:
        pytest.fail("the project's .venv is older than pyproject.toml/constraints.txt: run "
                    "`make venv` first")
    repo = fresh_copy(target)
    env = mpi_env({**SMOKE_ENV, "PATH": f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}"
                                       f"{os.environ['PATH']}"})
    env.pop("OMP_NUM_THREADS")  # as a user's shell: the commands set what they need
    env.pop("PYTHONPATH", None)
    return repo, env


def run_sh_blocks(pages, repo: Path, env: dict) -> tuple[list[str], list[str], dict]:
    """Run every ``sh`` block of ``pages`` in order in ``repo``, each as one ``bash -e`` script;
    return the failures (one message each), the download commands left out and each block's
    finished process (its stdout and stderr), keyed by the block's text."""
    failures, left_out, printed = [], [], {}
    for page in pages:
        for number, block in enumerate(fenced_blocks("sh", page), 1):
            commands, downloads = substituted(block)
            left_out += downloads
            done = run_command(["bash", "-c", "set -eo pipefail\n" + commands], timeout=900,
                               env=env, cwd=repo)
            printed[block] = done
            if done.returncode != 0:
                failures.append(f"{page.name} block {number} exited {done.returncode}:\n"
                                f"{block}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return failures, left_out, printed
