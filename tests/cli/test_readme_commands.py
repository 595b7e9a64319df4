"""Every ```sh block of README.md and the README's Python example, run as written in a fresh
copy of the repository, the way a new user follows the README (tests/cli/doc_blocks.py says
what is substituted, and only that; the docs' blocks run in test_docs_commands.py); and the
manual's shape: at most 300 lines, every relative link in it and in docs/ pointing at a file
(and heading) that exists, every ``GNNSCALE_*`` variable the code reads in its table. Every
command must exit 0, and the outputs the README names must exist afterwards.
"""

import json
import os
import re
import sys

import pytest

from doc_blocks import (DOCS, README, SUBSTITUTIONS, broken_links, copy_and_environment,
                        fenced_blocks, readme_blocks, run_sh_blocks)
from mpi_launch import REPO_ROOT, run_command

pytestmark = pytest.mark.timeout(1500)

README_MAX_LINES = 300
CODE_PACKAGES = ("gnnscale", "partitioning", "planning")

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
    repo, env = copy_and_environment(tmp_path / "gnnscale")
    failures, left_out, printed = run_sh_blocks([README], repo, env)
    for number, block in enumerate(readme_blocks("python"), 1):
        done = run_command([sys.executable, "-c", block], timeout=600, env=env, cwd=repo)
        if done.returncode != 0:
            failures.append(f"python block {number}:\n{done.stderr[-3000:]}")
    assert not failures, "\n\n".join(failures)
    assert all("download" in command for command in left_out)

    for output in ("runs/metrics.jsonl", "runs/cora-ckpt/latest.pt", "runs/cora.jsonl",
                   "runs/cora.png", "runs/cora-predictions.npz", "plots/cora.png",
                   "parts/cora-4/manifest.json", "tune-cora.json", "tune-cora.png"):
        assert (repo / output).is_file(), output
    log = (repo / "train.log").read_text()
    assert "\r" not in log and re.findall(r"^epoch", log, flags=re.M), log
    mode = (repo / "parts" / "cora-4").stat().st_mode & 0o777
    assert mode == 0o777 & ~_umask(), oct(mode)
    assert_calibrated_then_reused(repo, printed)


def assert_calibrated_then_reused(repo, printed: dict) -> None:
    """`tune --calibrate` saved the constants it measured (also in its results) and the second
    `tune` predicted with them: plausible compute constants at every thread count, the 2-rank
    shared-memory alltoallv and the job's fixed cost per exchange; no warning from torch."""
    [tuned] = [done for block, done in printed.items() if "--calibrate" in block]
    saved = json.loads((repo / "tune-fb-cost-model.json").read_text())
    assert saved == json.loads((repo / "tune-fb.json").read_text())["cost_model"]
    for values in saved["compute"].values():
        # the aggregation's cost per edge and per output row, and the outputs' per row, may be
        # 0 (all per value) where the host was too noisy to tell them apart, and the small
        # rows' cost per value 0 (flat beyond the cache); a row of the loss or the metrics
        # costs some 100 ns on an idle host, and several times that on one as loaded as the
        # test suite leaves it
        rows = ("gamma_loss_row", "gamma_eval_row")
        maybe_zero = ("gamma_nnz", "gamma_row", "gamma_edge_narrow")
        assert all(0 < values[k] < 1e-6 for k in values
                   if not k.startswith((*maybe_zero, *rows))), values
        assert all(0 <= values[k] < 1e-6 for k in values if k.startswith(maybe_zero)), values
        assert all(0 <= values[k] < 1e-4 for k in rows), {k: values[k] for k in rows}
    assert 0 < saved["shm_alpha"] < 1e-2 and saved["shm_beta"] < 1e-7, saved
    assert 0 <= saved["exchange_overhead_s"] < 0.1, saved
    assert "fixed cost per exchange on 2 ranks" in tuned.stdout, tuned.stdout
    assert "Warning" not in tuned.stderr, tuned.stderr
    assert json.loads((repo / "tune-fb-ib.json").read_text())["rows"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
