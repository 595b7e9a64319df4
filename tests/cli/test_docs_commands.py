"""Every ```sh block of docs/*.md, run as written in a fresh copy of the repository, page by
page in order (tests/cli/doc_blocks.py says what is substituted, and only that). Each page's
blocks stand on their own: none reads what the README's blocks write, so this runs beside
test_readme_commands.py."""

import pytest

from doc_blocks import DOCS, copy_and_environment, run_sh_blocks

pytestmark = pytest.mark.timeout(1500)


def test_every_docs_command_block_runs_as_written(tmp_path, datasets_root):
    assert DOCS, "docs/ holds no Markdown files"
    repo, env = copy_and_environment(tmp_path / "gnnscale")
    failures, left_out, _ = run_sh_blocks(DOCS, repo, env)
    assert not failures, "\n\n".join(failures)
    assert all("download" in command for command in left_out)
