"""Every output of every command is checked before any work starts: a path that cannot be
written is refused with one line naming the option and the path, exit code 2, and nothing is
created (not even the folders on the way to it).

The tests run as root, for whom permission bits do not count: the unwritable folders are
``/proc`` and ``/sys`` (pseudo file systems that take no new files) and a regular file used as
a parent folder. Cases run in this process (the console script's entry point); one runs under
a 2-rank ``mpirun``.
"""

import os

import pytest

from gnnscale.cli.main import main as gnnscale_main
from gnnscale.cli.outputs import check_output
from gnnscale.errors import UsageError
from mpi_launch import gnnscale_cli

pytestmark = pytest.mark.timeout(300)

# a dataset that would fail loading naming itself: an output error must come first
MISSING = ["--dataset", "/no/such/dataset"]

# command, option, what the option names (file or folder), arguments the command needs
OUTPUTS = [
    (["train", *MISSING], "--metrics-out", "file"),
    (["train", *MISSING], "--plot", "file"),
    (["train", *MISSING], "--predictions-out", "file"),
    (["train", *MISSING, "--predictions-layout", "per-part"], "--predictions-out", "folder"),
    (["train", *MISSING], "--checkpoint-dir", "folder"),
    (["plot", "/no/such/metrics.jsonl"], "--out", "file"),
    (["partition", *MISSING, "--parts", "2"], "--out", "folder"),
    (["convert", *MISSING], "--out", "folder"),
    (["tune", *MISSING], "--out", "prefix"),
    (["datasets", "download", "cora"], "--data-root", "folder"),
]


def places(tmp_path, kind):
    """name -> (path, fragment of the error line) of each kind of unwritable place."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    folder = tmp_path / "a-folder"
    folder.mkdir()
    cases = {"under /proc": ("/proc/gnnscale-out/deeper/x", "/proc"),
             "under /sys": ("/sys/gnnscale-out/x", "/sys"),
             "under a regular file": (str(blocker / "sub" / "x"), "is a file, not a folder")}
    if kind == "file":
        cases["an existing folder"] = (str(folder), "is a folder")
    elif kind == "folder":
        cases["an existing file"] = (str(blocker), "is a file, not a folder")
    return cases


PLACES = ["under /proc", "under /sys", "under a regular file", "an existing folder",
          "an existing file"]


def run_in_process(argv, capsys):
    """``gnnscale <argv>`` in this process: (exit code, stdout, stderr)."""
    try:
        code = gnnscale_main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("command,option,kind", OUTPUTS,
                         ids=[f"{c[0]} {o} {k}" for c, o, k in OUTPUTS])
def test_unwritable_output_is_refused_up_front(command, option, kind, place, tmp_path, capsys,
                                               monkeypatch):
    cases = places(tmp_path, kind)  # a prefix may name a folder: PREFIX.json goes beside it
    if place not in cases:
        pytest.skip(f"{place} is a valid {kind}")
    path, fragment = cases[place]
    monkeypatch.chdir(tmp_path)  # anything written by mistake would land here
    before = listing(tmp_path)
    code, out, err = run_in_process([*command, option, path], capsys)
    assert code == 2, (code, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert f"{option} {path}" in lines[0], lines[0]
    assert fragment in lines[0], lines[0]
    assert "/no/such" not in lines[0]  # refused before the input was touched
    assert listing(tmp_path) == before  # nothing created, no probe left behind
    assert not os.path.exists("/proc/gnnscale-out")


def test_a_writable_path_passes_and_creates_nothing(tmp_path):
    target = tmp_path / "new" / "deeper" / "m.jsonl"
    assert check_output(target, "--metrics-out") == target
    assert check_output(tmp_path / "ck", "--checkpoint-dir", "folder") == tmp_path / "ck"
    existing = tmp_path / "old.jsonl"
    existing.write_text("kept\n")
    check_output(existing, "--metrics-out")
    assert existing.read_text() == "kept\n"  # opened for writing, never truncated
    assert listing(tmp_path) == ["old.jsonl"]


def test_a_read_only_mount_is_refused(tmp_path):
    """Where this host lets root mount a read-only tmpfs (a container may not)."""
    mount = tmp_path / "ro"
    mount.mkdir()
    if os.system(f"mount -t tmpfs -o ro tmpfs {mount} 2>/dev/null") != 0:
        pytest.skip("cannot mount a read-only tmpfs here")
    try:
        with pytest.raises(UsageError, match=r"--plot .*ro/x.png: folder .* does not take new "
                                             r"files \(Read-only file system\)"):
            check_output(mount / "x.png", "--plot")
    finally:
        os.system(f"umount {mount}")


def test_under_mpirun_every_rank_stops_with_one_line(tmp_path):
    result = gnnscale_cli(2, ["train", *MISSING, "--metrics-out", "/proc/m/x.jsonl"],
                          timeout=120)
    assert result.returncode == 2, (result.stdout, result.stderr)
    ours = [line for line in result.stderr.splitlines() if line.startswith("gnnscale")]
    assert ours == ["gnnscale train: error: --metrics-out /proc/m/x.jsonl: folder /proc does "
                    "not take new files (No such file or directory)"], result.stderr
    assert "Traceback" not in result.stderr and "MPI_ABORT" not in result.stderr


def test_what_commands_write_into_the_checkout_is_ignored_by_git():
    import subprocess

    from mpi_launch import REPO_ROOT

    written = ["data/Cora/raw/ind.cora.x", "parts/cora-4/manifest.json", "graphs/g/x.npy",
               "plots/m.png", "train.log", "tune.json", "tune.png", "tune-sweep.json",
               "tune-cost-model.json", "tune-sweep.png", "runs/m.jsonl"]
    source = ["gnnscale/data/load.py", "datasets/Cora/raw/ind.cora.x", "tests/data/x.py",
              "benchmarks/results/tune.json"]
    done = subprocess.run(["git", "check-ignore", "--no-index", *written, *source],
                          cwd=REPO_ROOT, capture_output=True, text=True)
    assert sorted(done.stdout.split()) == sorted(written), done.stdout
