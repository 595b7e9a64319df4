"""Faults across hosts (2 hosts x 2 ranks, Cora): a remote daemon or a remote rank killed mid-epoch
ends the job within 60 s naming the host (and the rank where one died); the last checkpoint is
intact and ``--resume`` across the hosts continues from it. A link shaped to 10 Mbit/s slows the
run without stopping it, and the per-rank table puts the time in halo wait.

The link-down fault is in test_cluster_ci.py.
"""

import re

from cluster_runs import cross_host, fault_mid_training, gnnscale_argv, kill_on, cora_args


def test_remote_daemon_killed_ends_the_job_naming_the_host(cluster, tmp_path):
    ended, code, output, _ = fault_mid_training(
        cluster, tmp_path, lambda: kill_on(cluster, "node1", b"prted"))
    assert ended < 60
    assert "node1" in output, output[-3000:]
    assert "done:" not in output


def test_remote_rank_killed_ends_the_job_and_resume_continues(cluster, tmp_path):
    from gnnscale.engine import read_checkpoint

    ended, code, output, checkpoints = fault_mid_training(
        cluster, tmp_path, lambda: kill_on(cluster, "node1", b"gnnscale\0train", first_only=True))
    assert ended < 60 and code != 0
    # the launcher names the dead rank and its host: the surviving ranks that lost their TCP
    # connections to it wait (gnnscale.comm.mpi_library.ABORT_DELAY_S) before they abort
    assert re.search(r"rank [23] with PID \d+ on node node1 exited on\s+signal 9", output), \
        output[-3000:]
    assert "done:" not in output
    state = read_checkpoint(checkpoints / "latest.pt")  # intact: its checksum verifies
    saved_epoch = int(state["epoch"])
    assert saved_epoch >= 2

    epochs = saved_epoch + 3
    done = cross_host(cluster, 2, gnnscale_argv(*cora_args(
        "--epochs", str(epochs), "--log-every", "1", "--checkpoint-dir", str(checkpoints),
        "--resume")))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    logged = [int(n) for n in re.findall(r"^epoch\s+(\d+)", done.stdout, flags=re.M)]
    assert logged == list(range(saved_epoch + 1, epochs + 1)), done.stdout[-2000:]
    assert "done:" in done.stdout


def _table_row(output: str, name: str) -> list[float]:
    row = next(line for line in output.splitlines() if line.startswith(name))
    return [float(value) for value in row[len(name):].split()]


def test_slow_link_carries_on_and_the_time_is_halo_wait(cluster, tmp_path):
    cluster.set_rate("node1", "10mbit")
    try:
        done = cross_host(cluster, 2, gnnscale_argv(
            "train", "--dataset", "sbm", "--num-nodes", "8000", "--partitioner", "random",
            "--hidden", "64", "--epochs", "3", "--no-progress"), timeout=300)
    finally:
        cluster.set_rate("node1", None)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    halo = _table_row(done.stdout, "halo wait")
    for other in ("compute (fwd + bwd)", "grad. sync wait", "optimiser step"):
        values = _table_row(done.stdout, other)
        assert max(halo) > max(values), (other, halo, values, done.stdout[-2000:])
