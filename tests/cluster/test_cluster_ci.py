"""The short cross-host check: 2 hosts x 2 ranks with only TCP between them train Cora as one host
does, and a host whose link goes down mid-epoch ends the job within a minute, naming the host.

Skipped with the reason where namespaces cannot be made (not root).
"""

from cluster_runs import (assert_close, cora_args, cross_host, fault_mid_training, gnnscale_argv,
                          metrics_losses)
from mpi_launch import gnnscale_cli

EPOCHS = "3"


def test_cora_across_hosts_equals_one_host(cluster, tmp_path):
    one_host = tmp_path / "one-host.jsonl"
    done = gnnscale_cli(4, cora_args("--epochs", EPOCHS, "--metrics-out", str(one_host)))
    assert done.returncode == 0, done.stderr[-2000:]
    across = tmp_path / "across.jsonl"
    done = cross_host(cluster, 2, gnnscale_argv(*cora_args("--epochs", EPOCHS, "--metrics-out",
                                                           str(across))))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "4 ranks" in done.stdout
    assert_close(metrics_losses(across), metrics_losses(one_host))
    sent, received = cluster.link_bytes("node1")
    assert sent > 0 and received > 0  # the halo rows really crossed node1's link


def test_link_down_mid_epoch_ends_the_job_naming_the_host(cluster, tmp_path):
    ended, code, output, _ = fault_mid_training(cluster, tmp_path, lambda: cluster.link_down("node1"))
    assert ended < 60  # about LOST_HOST_S (20 s): the daemons' keepalive declares node1 lost
    assert "node1" in output and "lost communication" in output, output[-3000:]
    assert "done:" not in output
