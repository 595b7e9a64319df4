"""Every ```sh block of README.md, and its Python example, run as written in a fresh copy of the
repository, the way a new user follows the README.

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
SUBSTITUTIONS = [("/path/to/datasets", str(DATASETS_ROOT)), ("mpirun -n 64", "mpirun -n 2"),
                 ("make test", "make -n test")]
SMOKE_ENV = {"GNNSCALE_MAX_EPOCHS": "2",
             "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",
             "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def readme_blocks(language: str) -> list[str]:
    """The bodies of the README's fenced blocks in ``language``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", README.read_text(), flags=re.S | re.M)


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
    for number, block in enumerate(readme_blocks("sh"), 1):
        commands, downloads = substituted(block)
        left_out += downloads
        script = "set -eo pipefail\n" + commands
        done = run_command(["bash", "-c", script], timeout=900, env=env, cwd=repo)
        if done.returncode != 0:
            failures.append(f"block {number} exited {done.returncode}:\n{block}\n"
                            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
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
