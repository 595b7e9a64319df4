"""Under mpirun, on one host or across the virtual cluster's hosts: train every multi-host case a
few Adam steps on Cora and save losses and logits, plus what each rank saw of its host.

Usage: mpirun ... python cross_host_driver.py DATASETS_ROOT OUT.npz

Cases (METIS parts, one per rank, 3 steps, dropout 0):
- GCN, SAGE and GAT with the halo exchange overlapped and not;
- GCN under every staleness policy (its first step is the exact exchange's);
- GCN and SAGE on a Libra vertex cut.
Rank facts: host name, ranks on this host and default threads (gnnscale.threads), the node
index the hierarchical allreduce groups this rank in, whether the world's gradient buffer and
the host group's buffer live in shared memory, the ``/dev/shm`` entries this rank sees, and the
work per byte it measures exchanging with the other host (none on one host).
"""

import json
import os
import socket
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from exactness_cases import LR, SEED, WEIGHT_DECAY  # noqa: E402

from gnnscale.cli.calibrate import exchange_byte_work  # noqa: E402
from gnnscale.comm import HierarchicalCommunicator, init, node_groups  # noqa: E402
from gnnscale.comm.eager_pieces import EAGER_PIECE_BYTES  # noqa: E402
from gnnscale.data import load_dataset  # noqa: E402
from gnnscale.engine import LocalProblem, Trainer, gather_predictions  # noqa: E402
from gnnscale.engine.vertex_cut_problem import vertex_cut_problem  # noqa: E402
from gnnscale.graph.staleness import make_policy  # noqa: E402
from gnnscale.nn import GNN  # noqa: E402
from gnnscale.threads import default_threads, local_ranks  # noqa: E402
from partitioning import make_partitioner  # noqa: E402

STEPS = 3
POLICIES = ("exact", "pipelined", "delayed:2", "local")


def train(problem, data, model_name, comm, overlap=True, staleness=None):
    """STEPS Adam steps from the seeded weights: (global losses, logits on rank 0)."""
    problem.graph.halo_plan.configure(overlap=overlap)
    problem.graph.staleness = make_policy(staleness)
    torch.manual_seed(SEED)
    model = GNN(model_name, data.num_features, 16, data.num_classes, num_layers=2, dropout=0.0)
    trainer = Trainer(model, problem, comm, lr=LR, weight_decay=WEIGHT_DECAY, seed=SEED)
    losses = [trainer.evaluate(trainer.train_step()[0])[0] for _ in range(STEPS)]
    gathered = gather_predictions(trainer)
    if problem.graph.staleness is not None:
        problem.graph.staleness.close()
        problem.graph.staleness = None
    problem.graph.halo_plan.configure(overlap=True)
    return np.asarray(losses), gathered[0] if gathered else None


def alltoallv_around_the_eager_limit(comm) -> bool:
    """Alltoallvs whose messages are around the sizes sent as pieces between hosts (a message
    differs per pair and direction): whether every rank received exactly what was sent."""
    piece = EAGER_PIECE_BYTES // 4  # float32 values per piece
    exact = True
    for n in (1, piece, piece + 1, 3 * piece + 7, 4 * piece, 4 * piece + 1, 9 * piece):
        sent = [n + 13 * q * (comm.rank + 1) for q in range(comm.size)]
        received = [n + 13 * comm.rank * (q + 1) for q in range(comm.size)]
        rows = torch.cat([torch.arange(sent[q], dtype=torch.float32) + 1e6 * comm.rank + 1e3 * q
                          for q in range(comm.size)])
        out = comm.alltoallv(rows.reshape(-1, 1), sent, received).reshape(-1)
        expected = torch.cat([torch.arange(received[q], dtype=torch.float32) + 1e6 * q
                              + 1e3 * comm.rank for q in range(comm.size)])
        exact = exact and torch.equal(out, expected)
    return exact


def rank_facts(comm) -> dict:
    """What this rank sees of its host, gathered from every rank."""
    world_buffer = comm.alloc_buffer(1024)
    world_shared = bool(getattr(comm, "_shared", {}))
    hierarchical = HierarchicalCommunicator(comm)
    local_buffer = hierarchical.local.alloc_buffer(1024)
    local_shared = bool(getattr(hierarchical.local, "_shared", {}))
    omp = os.environ.pop("OMP_NUM_THREADS", None)  # the host's share, as where it is unset
    share = default_threads()
    if omp is not None:
        os.environ["OMP_NUM_THREADS"] = omp
    facts = {"rank": comm.rank, "host": socket.gethostname(), "local_ranks": local_ranks(),
             "default_threads": share, "cpus": os.cpu_count(),
             "node": node_groups(comm)[comm.rank], "nodes": hierarchical.num_nodes,
             "local_group_size": hierarchical.local.size, "world_buffer_shared": world_shared,
             "host_buffer_shared": local_shared, "dev_shm": sorted(os.listdir("/dev/shm"))}
    facts["alltoallv_exact"] = alltoallv_around_the_eager_limit(comm)
    facts["eager_pieces_posted"] = comm.eager_pieces_posted
    hosts = comm.allgather_object(socket.gethostname())
    facts["exchange_byte_s"] = exchange_byte_work(comm, hosts, megabytes=1.0, repeats=3)
    total = hierarchical.allreduce(torch.ones(4))  # the two-level path across hosts
    facts["hierarchical_sum"] = float(total[0])
    comm.free_buffer(world_buffer)
    hierarchical.local.free_buffer(local_buffer)
    return comm.allgather_object(facts)


def main() -> None:
    datasets_root, out_path = sys.argv[1], sys.argv[2]
    comm = init()
    results = {}
    data = load_dataset("cora", root=datasets_root)
    parts = make_partitioner("metis", num_parts=comm.size, seed=SEED).fit(data).node_parts
    problem = LocalProblem.from_graph_data(data, parts, comm)
    for model_name in ("gcn", "sage", "gat"):
        for overlap in (True, False):
            key = f"{model_name}-overlap{int(overlap)}"
            results[f"{key}/losses"], results[f"{key}/logits"] = \
                train(problem, data, model_name, comm, overlap=overlap)
    for policy in POLICIES:
        key = f"gcn-{policy}"
        results[f"{key}/losses"], results[f"{key}/logits"] = \
            train(problem, data, "gcn", comm, staleness=policy)
    cut = make_partitioner("libra", num_parts=comm.size, seed=SEED).fit(data)
    vproblem = vertex_cut_problem(data, cut.node_parts, cut.edge_parts, comm)
    for model_name in ("gcn", "sage"):
        key = f"libra-{model_name}"
        results[f"{key}/losses"], results[f"{key}/logits"] = \
            train(vproblem, data, model_name, comm)
    facts = rank_facts(comm)
    if comm.rank == 0:
        results = {k: v for k, v in results.items() if v is not None}
        np.savez(out_path, facts=np.array(json.dumps(facts)), **results)
    print(f"rank {comm.rank} on {socket.gethostname()} done", flush=True)


if __name__ == "__main__":
    main()
