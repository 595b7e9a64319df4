"""Under mpirun: every path that sends halo rows, with the rows on the wire as float32, int8 and
int2: overlapped and waited-at-once aggregation, column blocks, GAT and SAGE-max (the
``halo_async`` / ``gather_with_halo`` posts), the staleness policies, and a vertex cut.

Usage: mpirun -n P python quantized_driver.py DATASETS_ROOT OUT.npz
"""

import sys

import numpy as np
import torch

from gnnscale.comm import init
from gnnscale.data import load_dataset
from gnnscale.engine import LocalProblem, Trainer
from gnnscale.engine.vertex_cut_problem import vertex_cut_problem
from gnnscale.graph.quantize import WIRE_FORMATS
from gnnscale.graph.staleness import make_policy
from gnnscale.nn import GNN
from partitioning import make_partitioner

STEPS = 5
#: (name, model, overlap, chunk_bytes, staleness, vertex cut)
PATHS = [("gcn-overlap", "gcn", True, None, None, False),
         ("gcn-waited", "gcn", False, None, None, False),
         ("gcn-blocks", "gcn", True, "4 blocks", None, False),
         ("sage-overlap", "sage", True, None, None, False),
         ("sage-max", "sage-max", True, None, None, False),
         ("sage-max-waited", "sage-max", False, None, None, False),
         ("gat", "gat", True, None, None, False),
         ("gat-pipelined", "gat", True, None, "pipelined", False),
         ("gcn-pipelined", "gcn", True, None, "pipelined", False),
         ("gcn-delayed", "gcn", True, None, "delayed:2", False),
         ("gcn-local", "gcn", True, None, "local", False),
         ("vcut-gcn", "gcn", True, None, None, True),
         ("vcut-gcn-delayed", "gcn", True, None, "delayed:2", True)]


def train(problem, comm, data, path, wire):
    _, model_name, overlap, chunk, staleness, _ = path
    plan = problem.graph.halo_plan
    plan.configure(overlap=overlap, chunk_bytes=None, quantize_seed=5,
                   message_dtype=WIRE_FORMATS.get(wire), gradient_dtype=None)
    if chunk is not None:  # rows of 16 go in 4 blocks of 4 columns as they travel (a quantized
        # block of a row has its own scale and offset, so 1-column blocks would be exact)
        rows = max(sum(plan.send_counts), plan.num_halo)
        chunk = int(comm.allreduce_scalar(float(rows), op="max")) * plan.wire_row_bytes(4)(4)
        plan.configure(chunk_bytes=chunk)
    assert chunk is None or len(plan.column_blocks(16, 4)) == 4
    problem.graph.staleness = make_policy(staleness)
    torch.manual_seed(0)
    model = GNN(model_name, data.num_features, 16, data.num_classes, dropout=0.5)
    trainer = Trainer(model, problem, comm, seed=1)
    records = [trainer.run_epoch(evaluate=False) for _ in range(STEPS)]
    if problem.graph.staleness is not None:
        problem.graph.staleness.close()
        problem.graph.staleness = None
    halo_bytes = comm.allreduce(torch.tensor([float(r.halo_bytes_sent) for r in records],
                                             dtype=torch.float64)).numpy()
    return np.array([r.loss for r in records]), halo_bytes, trainer.predict().numpy()


def main():
    comm = init()
    data = load_dataset("cora", root=sys.argv[1])
    parts = make_partitioner("metis", num_parts=comm.size, seed=0).fit(data).node_parts
    edge_cut = LocalProblem.from_graph_data(data, parts, comm)
    cut = make_partitioner("libra", num_parts=comm.size, seed=0).fit(data)
    vertex = vertex_cut_problem(data, cut.node_parts, cut.edge_parts, comm)
    out = {}
    for path in PATHS:
        problem = vertex if path[5] else edge_cut
        for wire in ("float32", "int8", "int2", "int8-again"):
            losses, halo_bytes, logits = train(problem, comm, data, path,
                                               wire.removesuffix("-again"))
            key = f"{path[0]}/{wire}"
            out[f"{key}/losses"], out[f"{key}/bytes"] = losses, halo_bytes
            out[f"{key}/logits_rank{comm.rank}"] = logits
    pieces = comm.allgather_object(out)
    if comm.rank == 0:
        np.savez(sys.argv[2], **{k: v for piece in pieces for k, v in piece.items()})


if __name__ == "__main__":
    main()
