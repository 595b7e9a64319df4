"""Under mpirun: overlapped vs waited-at-once exchanges, bf16 halos, exchanges in column
blocks, the constant-input cache; bf16 compute (half-width rows aggregated and exchanged)
against one process.

Usage: mpirun -n P python overlap_driver.py DATASETS_ROOT OUT.npz
"""

import sys

import numpy as np
import torch

from gnnscale.comm import SingleCommunicator, init
from gnnscale.data import load_dataset
from gnnscale.engine import LocalProblem, Trainer
from gnnscale.engine.inference import gather_predictions
from gnnscale.nn import GNN
from partitioning import make_partitioner


def train(problem, comm, data, model_name, overlap, halo_dtype, chunk_bytes=None):
    plan = problem.graph.halo_plan
    # small enough that every exchange of 16-wide rows goes in several column blocks
    plan.configure(overlap=overlap, message_dtype=halo_dtype, chunk_bytes=chunk_bytes)
    assert chunk_bytes is None or len(plan.column_blocks(16, 4)) >= 4
    torch.manual_seed(0)
    model = GNN(model_name, data.num_features, 16, data.num_classes, dropout=0.5)
    trainer = Trainer(model, problem, comm, seed=1)
    losses = [trainer.train_step()[0] for _ in range(3)]
    first, second = trainer.predict(), trainer.predict()  # second one hits the cache
    assert torch.equal(first, second)
    return np.asarray(comm.allreduce(torch.tensor(losses, dtype=torch.float64))), first.numpy()


def train_compute(problem, comm, data, model_name, compute_dtype):
    """3 steps without dropout at 64 hidden units (bf16 rows wide enough for the kernel that
    reads them as bits); logits of every node in global order on rank 0."""
    torch.manual_seed(0)
    model = GNN(model_name, data.num_features, 64, data.num_classes, dropout=0.0)
    trainer = Trainer(model, problem, comm, seed=1, compute_dtype=compute_dtype)
    losses = [trainer.train_step()[0] for _ in range(3)]  # each rank's share of the loss
    losses = comm.allreduce(torch.tensor(losses, dtype=torch.float64)).numpy()
    gathered = gather_predictions(trainer)
    return losses, None if gathered is None else gathered[0]


def main():
    comm = init()
    data = load_dataset("cora", root=sys.argv[1])
    parts = make_partitioner("metis", num_parts=comm.size, seed=0).fit(data).node_parts
    problem = LocalProblem.from_graph_data(data, parts, comm)
    out = {}
    for model_name in ("gcn", "sage", "sage-max", "gat"):
        for name, overlap, dtype, chunk in (("overlap", True, None, None),
                                            ("waited", False, None, None),
                                            ("bf16", True, torch.bfloat16, None),
                                            ("blocks", True, None, 256),
                                            ("blocks-waited", False, None, 256)):
            losses, logits = train(problem, comm, data, model_name, overlap, dtype, chunk)
            out[f"{model_name}/{name}/losses"] = losses
            out[f"{model_name}/{name}/logits_rank{comm.rank}"] = logits
    single = SingleCommunicator()
    whole = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64), single)
    for model_name in ("gcn", "sage"):
        for name, dtype in (("float32", None), ("bf16", torch.bfloat16)):
            losses, logits = train_compute(problem, comm, data, model_name, dtype)
            if comm.rank == 0:
                ref_losses, ref_logits = train_compute(whole, single, data, model_name, dtype)
                for key, value in (("losses", losses), ("logits", logits),
                                   ("reference_losses", ref_losses),
                                   ("reference_logits", ref_logits)):
                    out[f"{model_name}/compute-{name}/{key}"] = np.asarray(value)
    pieces = comm.allgather_object(out)
    if comm.rank == 0:
        merged = {k: v for piece in pieces for k, v in piece.items()}
        np.savez(sys.argv[2], **merged)


if __name__ == "__main__":
    main()
