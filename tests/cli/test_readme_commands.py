"""Every ```sh block of README.md and of docs/*.md, and the README's Python example, run as
written in a fresh copy of the repository, the way a new user follows the README; and the
manual's shape: at most 300 lines, every relative link in it and in docs/ pointing at a file
(and heading) that exists, every ``GNNSCALE_*`` variable the code reads in its table.

Blocks the test must not run (a cluster's batch script, an install against a cluster's MPI,
an hours-long benchmark) are fenced as ``bash`` or ``text`` instead.

The copy holds the repository's files (tracked and new, not ignored ones, the shipped
``datasets/`` among them) with the project's `.venv` linked in. What is substituted, and only
this:
- ``/path/to/datasets`` (the README's placeholder for the user's data) -> the shipped datasets;
- ``mpirun -n 64`` (the cluster example) -> ``mpirun -n 2``: this machine is not a cluster;
- ``make test`` -> ``make -n test`` (a dry run: the suite cannot run itself from inside);
- commands that download (``datasets download``, ``--download``) are left out: this machine has
  no internet (tests/data and tests/cli/test_cli_datasets.py test downloading against a local
  server);
and the environment has ``GNNSCALE_MAX_EPOCHS=2`` (README: smoke tests), Open MPI's variables for
running as root and oversubscribing (README: On a cluster), and a ``hosts`` file naming this
machine for the cluster example. Every command must exit 0, and the outputs the README names
must exist afterwards.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mpi_launch import DATASETS_ROOT, REPO_ROOT, mpi_env, run_command

pytestmark = pytest.mark.timeout(1500)

README = REPO_ROOT / "README.md"
DOCS = sorted((REPO_ROOT / "docs").glob("*.md"))
README_MAX_LINES = 300
CODE_PACKAGES = ("gnnscale", "partitioning", "planning")
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


def test_readme_is_a_manual_of_at_most_300_lines():
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; the evidence goes in docs/"


def test_every_relative_link_of_the_readme_and_docs_exists():
    assert DOCS, "docs/ holds no Markdown files"
    broken = [link for path in (README, *DOCS) for link in broken_links(path)]
    assert not broken, "\n".join(broken)


def test_broken_links_are_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Top: the manual\n```sh\n[x](in-code.md)\n```\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text("# Here\n[a](../README.md) [b](missing.md) [c](#here) [d](#nowhere)\n"
                    "[e](../README.md#top-the-manual) [f](../README.md#in-code)\n"
                    "[g](https://example.org/x) [h](../docs)\n")
    assert broken_links(page, tmp_path) == [
        "docs/page.md: missing.md (no such file)", "docs/page.md: #nowhere (no such heading)",
        "docs/page.md: ../README.md#in-code (no such heading)"]
    assert broken_links(tmp_path / "README.md", tmp_path) == []  # links in code are code


def test_readme_lists_every_environment_variable_the_code_reads():
    read = set()
    for package in CODE_PACKAGES:
        for source in (REPO_ROOT / package).rglob("*.py"):
            read |= set(re.findall(r"GNNSCALE_[A-Z0-9_]*[A-Z0-9]", source.read_text()))
    table = README.read_text().split("## Environment variables", 1)[-1]
    listed = set(re.findall(r"^\| `(GNNSCALE_[A-Z0-9_]+)` \|", table, flags=re.M))
    assert read and not read - listed, f"missing from the README's table: {sorted(read - listed)}"
    assert not listed - read, f"the code reads none of {sorted(listed - read)}"


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


def test_readme_has_the_blocks_this_test_runs():
    blocks = readme_blocks("sh")
    assert len(blocks) >= 4 and readme_blocks("python")
    assert any("make demo" in b for b in blocks) and any("--resume" in b for b in blocks)
    assert all(old in README.read_text() for old, _ in SUBSTITUTIONS)


def test_no_command_block_is_a_benchmark():
    # the test below runs every sh block; benchmarks (which take the benchmark lock) are
    # fenced as bash
    benchmarks = [f"{page.name} block {number}" for page in (README, *DOCS)
                  for number, block in enumerate(fenced_blocks("sh", page), 1)
                  if "gnnscale-bench.lock" in block]
    assert not benchmarks, f"fence these as bash, not sh: {benchmarks}"


def test_every_readme_command_block_runs_as_written(tmp_path, datasets_root):
    # `make demo` in the copy shares this .venv: if it is out of date, make would reinstall
    # gnnscale from the copy (which this test then deletes), so refuse instead
    if subprocess.run(["make", "-q", ".venv/.installed"], cwd=REPO_ROOT).returncode != 0:
        pytest.fail("the project's .venv is older than pyproject.toml/constraints.txt: run "
                    "`make venv` first")
    repo = fresh_copy(tmp_path / "gnnscale")
    env = mpi_env({**SMOKE_ENV, "PATH": f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}"
                                       f"{os.environ['PATH']}"})
    env.pop("OMP_NUM_THREADS")  # as a user's shell: the commands set what they need
    env.pop("PYTHONPATH", None)
    failures = []
    left_out = []
    for page in (README, *DOCS):  # the README first: the docs' blocks may use its outputs
        for number, block in enumerate(fenced_blocks("sh", page), 1):
            commands, downloads = substituted(block)
            left_out += downloads
            script = "set -eo pipefail\n" + commands
            done = run_command(["bash", "-c", script], timeout=900, env=env, cwd=repo)
            if done.returncode != 0:
                failures.append(f"{page.name} block {number} exited {done.returncode}:\n"
                                f"{block}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    for number, block in enumerate(readme_blocks("python"), 1):
        done = run_command([sys.executable, "-c", block], timeout=600, env=env, cwd=repo)
        if done.returncode != 0:
            failures.append(f"python block {number}:\n{done.stderr[-3000:]}")
    assert not failures, "\n\n".join(failures)
    assert all("download" in command for command in left_out)

    for output in ("runs/metrics.jsonl", "runs/cora-ckpt/latest.pt", "runs/cora.jsonl",
                   "runs/cora.png", "runs/cora-predictions.npz", "plots/cora.png",
                   "parts/cora-8/manifest.json", "tune-cora.json", "tune-cora.png"):
        assert (repo / output).is_file(), output
    log = (repo / "train.log").read_text()
    assert "\r" not in log and re.findall(r"^epoch", log, flags=re.M), log
    mode = (repo / "parts" / "cora-8").stat().st_mode & 0o777
    assert mode == 0o777 & ~_umask(), oct(mode)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
