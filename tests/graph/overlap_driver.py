"""Under mpirun: overlapped vs waited-at-once exchanges, bf16 halos, exchanges in column
blocks, the constant-input cache.

Usage: mpirun -n P python overlap_driver.py DATASETS_ROOT OUT.npz
"""

import sys

import numpy as np
import torch

from gnnscale.comm import init
from gnnscale.data import load_dataset
from gnnscale.engine import LocalProblem, Trainer
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
    pieces = comm.allgather_object(out)
    if comm.rank == 0:
        merged = {k: v for piece in pieces for k, v in piece.items()}
        np.savez(sys.argv[2], **merged)


if __name__ == "__main__":
    main()
