"""Run several ``gnnscale`` commands in one process, one after the other, as ``python -m
gnnscale ARGS`` runs each (under ``mpirun``: one process per rank, every rank running every
command). A test that needs many short runs pays one interpreter and one ``import torch`` per
rank instead of one per run.

Usage: [mpirun -n N] python cli_batch_driver.py COMMANDS.json OUT_DIR
COMMANDS.json holds a list of argument lists; each rank writes OUT_DIR/rank-R.json, a list of
``{"returncode", "stdout", "stderr"}`` in the commands' order. What a command prints on the
Python level is captured; what the C level writes (MPI, a crashing rank's traceback before it
aborts the job) goes to the process's own stderr.
"""

import contextlib
import io
import json
import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # tests/partitioning is not the package
from gnnscale.cli.main import main  # noqa: E402
from gnnscale.comm import env_rank  # noqa: E402


def run_one(argv: list[str]) -> dict:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return {"returncode": int(code or 0), "stdout": out.getvalue(), "stderr": err.getvalue()}


if __name__ == "__main__":
    commands, out_dir = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])
    results = [run_one(argv) for argv in commands]
    (out_dir / f"rank-{env_rank()}.json").write_text(json.dumps(results))
