"""One peer (DGL or PyG) training full-batch in one process on a converted graph: time, memory.

Run by benchmarks/large_graphs.py (step rmat21-peers); by hand, from the repository root:

    PYTHONPATH=. $(make -s dgl-env-path)/bin/python benchmarks/large_graph_peer.py \\
        --library dgl --model gcn --dataset /tmp/gnnscale-large/rmat21
    .venv/bin/python benchmarks/large_graph_peer.py --library pyg --model sage --dataset DIR

The model is what ``gnnscale train --model M --layers 3 --hidden 256`` builds: DGL GraphConv
(norm="both", on the graph with self loops) or SAGEConv("mean"); PyG GCNConv or SAGEConv on a
torch.sparse CSR adjacency (PyG's sparse input, row = destination); ReLU and dropout 0.5 between
layers, Adam (lr 0.01, weight decay 5e-4), cross-entropy on the training nodes
(``--compute-dtype bfloat16``: forward and loss under bf16 autocast). Prints one JSON
line: median training-step time after ``--warmup`` steps, one evaluation forward pass, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", required=True, choices=["dgl", "pyg"])
    parser.add_argument("--model", required=True, choices=["gcn", "sage"])
    parser.add_argument("--dataset", required=True, help="converted graph folder")
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compute-dtype", default="float32", choices=["float32", "bfloat16"],
                        help="bfloat16: forward pass and loss under torch.autocast('cpu', "
                             "torch.bfloat16), as gnnscale train --compute-dtype runs them")
    return parser.parse_args()


ARGS = parse_args()
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(ARGS.threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from gnnscale.data.converted import open_converted  # noqa: E402
from peer_stack import PygAdapter, Stack  # noqa: E402


def build(data, widths):
    dims = list(zip(widths[:-1], widths[1:]))
    if ARGS.library == "dgl":
        import dgl
        from dgl.nn import GraphConv, SAGEConv

        from gnnscale.data import to_dgl

        graph = to_dgl(data)
        if ARGS.model == "gcn":
            graph = dgl.add_self_loop(dgl.remove_self_loop(graph))
        graph.create_formats_()
        convs = [GraphConv(a, b, norm="both") if ARGS.model == "gcn" else SAGEConv(a, b, "mean")
                 for a, b in dims]
        return Stack(convs, ARGS.dropout), graph, dgl.__version__
    import torch_geometric
    from torch_geometric.nn import GCNConv, SAGEConv

    graph = torch.sparse_csr_tensor(torch.from_numpy(np.asarray(data.indptr)),
                                    torch.from_numpy(np.asarray(data.indices)),
                                    torch.ones(data.num_edges), size=(data.num_nodes,) * 2)
    convs = [GCNConv(a, b) if ARGS.model == "gcn" else SAGEConv(a, b) for a, b in dims]
    return Stack([PygAdapter(c) for c in convs], ARGS.dropout), graph, torch_geometric.__version__


def main() -> None:
    torch.set_num_threads(ARGS.threads)
    torch.manual_seed(0)
    start = time.perf_counter()
    data = open_converted(ARGS.dataset)
    x = torch.from_numpy(np.array(data.x))
    y = torch.from_numpy(np.array(data.y))
    train = torch.from_numpy(np.array(data.train_mask))
    widths = [data.num_features] + [ARGS.hidden] * (ARGS.layers - 1) + [data.num_classes]
    model, graph, version = build(data, widths)
    setup = time.perf_counter() - start
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    times, losses = [], []
    for step in range(ARGS.warmup + ARGS.steps):
        t = time.perf_counter()
        model.train()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=ARGS.compute_dtype == "bfloat16"):
            loss = F.cross_entropy(model(graph, x)[train], y[train])
        loss.backward()
        optimizer.step()
        elapsed = time.perf_counter() - t
        losses.append(float(loss))
        print(f"step {step}: {elapsed:.2f} s loss {losses[-1]:.4f}", file=sys.stderr, flush=True)
        if step >= ARGS.warmup:
            times.append(elapsed)
    model.eval()
    t = time.perf_counter()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16,
                                         enabled=ARGS.compute_dtype == "bfloat16"):
        model(graph, x).argmax(1)
    evaluation = time.perf_counter() - t
    print(json.dumps({"library": ARGS.library, "version": version, "model": ARGS.model,
                      "compute_dtype": ARGS.compute_dtype,
                      "step_s_median": statistics.median(times), "step_times_s": times,
                      "evaluation_s": evaluation, "setup_s": setup, "losses": losses,
                      "torch": torch.__version__,
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                      * 1024}), flush=True)


if __name__ == "__main__":
    main()
