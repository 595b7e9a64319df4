"""Under mpirun: on each rank of a METIS partition of a sparse generated graph, the training
rows' logits and every parameter gradient of a model whose earlier layers compute only the
rows read after them (the rows sent to peers' halos among them) against the same model
computing every row, dropout 0, with exact halos and in a staleness policy's first step
(which fetches every halo synchronously). Prints one JSON line per rank and case.

Usage: mpirun -n P python narrowed_ranks_driver.py
"""

import json

import numpy as np
import torch

from gnnscale.comm import init
from gnnscale.data import generate_sbm
from gnnscale.engine import LocalProblem
from gnnscale.graph.staleness import make_policy
from gnnscale.nn import GNN
from partitioning import make_partitioner

#: (model, its options, staleness policy: its first step fetches every halo synchronously)
CASES = [("gcn", {}, None), ("sage", {}, None), ("gcn", {"order": "aggregate_first"}, None),
         ("sage", {"num_layers": 3}, None),
         ("gcn", {"num_layers": 3, "order": "aggregate_first"}, None),
         ("gcn", {}, "pipelined"), ("sage", {"num_layers": 3}, "delayed:2")]


def main() -> None:
    comm = init()
    data = generate_sbm(num_nodes=600, num_classes=4, avg_degree=3.0, num_features=20,
                        train_per_class=25, num_val=40, num_test=40, seed=7)
    parts = make_partitioner("metis", num_parts=comm.size, seed=0).fit(data).node_parts
    problem = LocalProblem.from_graph_data(data, parts, comm)
    graph, x = problem.graph, problem.x
    rows = problem.masks["train"].nonzero().squeeze(1)
    read = graph.rows_read_by(rows)
    for model, kwargs, staleness in CASES:
        outputs = []
        for narrowed in (True, False):
            torch.manual_seed(0)
            net = GNN(model, data.num_features, 32, data.num_classes, dropout=0.0, **kwargs)
            if not narrowed:  # every row computed before the last layer
                graph.rows_read_by = lambda _rows: None
            graph.staleness = make_policy(staleness)
            if graph.staleness is not None:
                graph.staleness.begin_step()
            logits = net(x, graph, rows=rows)
            grad = torch.randn(logits.shape, generator=torch.Generator().manual_seed(comm.rank))
            logits.backward(grad)
            if graph.staleness is not None:
                graph.staleness.end_step()
                graph.staleness.close()
            outputs.append((logits.detach(), [p.grad.clone() for p in net.parameters()]))
        del graph.rows_read_by  # back to the class's method
        graph.staleness = None
        (subset, subset_grads), (whole, whole_grads) = outputs
        # each rank's gradients are its own share (no allreduce here)
        errors = [float((a - b).abs().max() / b.abs().max().clamp_min(1e-12))
                  if a.numel() else 0.0
                  for a, b in zip([subset, *subset_grads], [whole, *whole_grads])]
        print(json.dumps({"rank": comm.rank, "case": f"{model} {kwargs} {staleness or 'exact'}",
                          "owned": graph.num_owned, "halo": graph.num_halo,
                          "sent": int(np.unique(graph.halo_plan.send_index.numpy()).size),
                          "read": None if read is None else int(read.numel()),
                          "largest_relative_error": max(errors)}), flush=True)


if __name__ == "__main__":
    main()
