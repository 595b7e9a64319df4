"""gnnscale's one-process engine vs DGL (and PyG, where installed) on one machine, same threads.

Run with the DGL environment's python (`make dgl-env` builds it; DGL 2.1.0 needs torch 2.2.1)
from the repository root:

    PYTHONPATH=. $(make -s dgl-env-path)/bin/python benchmarks/engine_vs_dgl.py

Workload (the README's engine tables): a seeded R-MAT graph (scale 18: 262,144 nodes, about 7.6M directed edges
after symmetrising and de-duplicating; Graph500 parameters, edge factor 16), 128 random
features, 16 classes, 2-layer GCN and GraphSAGE (mean) with 256 hidden units, dropout 0.5,
full batch, Adam (lr 0.01, weight decay 5e-4), cross-entropy on the training nodes.

Variants, per model, all in one process:
  gnnscale       gnnscale.nn.GNN on LocalProblem.from_graph_data(..., init("single")),
                 Trainer.train_step()
  dgl            dgl.nn.GraphConv (norm="both", on the graph with self loops) / SAGEConv("mean")
  pyg_edge_index torch_geometric GCNConv / SAGEConv with its default edge_index input
  pyg_csr        the same layers with a torch.sparse CSR adj_t (PyG's sparse-adjacency input;
                 torch_sparse's SparseTensor has no PyPI wheel for torch 2.2)
Every variant starts from gnnscale's initial weights (copied), so the losses are comparable.
Timing: after warm-up steps, ``--reps`` rounds; in each round every variant runs one full
training step (forward, loss, backward, Adam step), in turn (alternating, so load changes on the
machine hit every variant alike). Reported: median and min seconds per epoch, and ratios
(other / gnnscale: above 1 means gnnscale is faster). The thread count is set for torch,
OpenMP (DGL's kernels) and MKL before anything is imported.
"""

from __future__ import annotations

import argparse
import os
import sys


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=18)
    parser.add_argument("--edge-factor", type=int, default=16)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--classes", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per variant")
    parser.add_argument("--reps", type=int, default=5, help="timed steps per variant")
    parser.add_argument("--models", nargs="+", default=["gcn", "sage"], choices=["gcn", "sage"])
    parser.add_argument("--variants", nargs="+",
                        default=["gnnscale", "dgl", "pyg_edge_index", "pyg_csr"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--memory-fraction", type=float, default=0.5,
                        help="skip pyg_edge_index when its per-edge message tensors (about 3 x "
                             "edges x width x 4 bytes) would exceed this fraction of the "
                             "available memory")
    parser.add_argument("--out", default="benchmarks/results/engine_vs_dgl.json")
    return parser.parse_args(argv)


ARGS = parse_args()
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = str(ARGS.threads)

import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from gnnscale.comm import init  # noqa: E402
from gnnscale.data import generate_rmat  # noqa: E402
from gnnscale.engine import LocalProblem, Trainer  # noqa: E402
from gnnscale.nn import GNN  # noqa: E402

LR, WEIGHT_DECAY = 0.01, 5e-4


def optional(module: str):
    try:
        return __import__(module)
    except Exception as exc:  # not installed, or broken against this torch
        print(f"{module} unavailable ({type(exc).__name__}: {exc}); its variants are skipped",
              file=sys.stderr)
        return None


class Stack(torch.nn.Module):
    """Two (or more) foreign conv layers with ReLU and dropout as gnnscale's GNN has them."""

    def __init__(self, convs, dropout: float):
        super().__init__()
        self.convs = torch.nn.ModuleList(convs)
        self.dropout = dropout

    def forward(self, graph, x):
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, self.dropout, self.training)
            x = conv(graph, x)
            if i < len(self.convs) - 1:
                x = F.relu(x)
        return x


def copy_weights(model_name: str, ours: GNN, convs, library: str) -> None:
    for layer, conv in zip(ours.layers, convs):
        with torch.no_grad():
            if model_name == "gcn":
                weight = layer.lin.weight
                if library == "dgl":
                    conv.weight.copy_(weight.t())
                else:
                    conv.lin.weight.copy_(weight)
                conv.bias.copy_(layer.bias)
            elif library == "dgl":
                conv.fc_neigh.weight.copy_(layer.lin_l.weight)
                conv.fc_self.bias.copy_(layer.lin_l.bias)  # DGL 2.1: the bias is here
                conv.fc_self.weight.copy_(layer.lin_r.weight)
            else:
                conv.lin_l.weight.copy_(layer.lin_l.weight)
                conv.lin_l.bias.copy_(layer.lin_l.bias)
                conv.lin_r.weight.copy_(layer.lin_r.weight)


class ForeignStep:
    """One full-batch training step of a DGL or PyG stack."""

    def __init__(self, module, graph, x, y, train):
        self.module, self.graph, self.x, self.y, self.train = module, graph, x, y, train
        self.optimizer = torch.optim.Adam(module.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)

    def __call__(self) -> float:
        self.module.train()
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.module(self.graph, self.x)
        loss = F.cross_entropy(logits[self.train], self.y[self.train])
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())


class PygAdapter(torch.nn.Module):
    """PyG convs take (x, edge_index or adj_t); Stack calls conv(graph, x)."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, graph, x):
        return self.conv(x, graph)


def available_memory_bytes() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def edge_index_skip_reason(model_name: str, data, widths) -> str | None:
    """PyG's edge_index path materialises [E, width] messages; refuse what would not fit."""
    # GCNConv transforms first (messages at the output width); SAGEConv aggregates its input.
    width = max(widths[1:]) if model_name == "gcn" else max(widths[:2])
    need = 3 * data.num_edges * width * 4
    have = available_memory_bytes()
    if need > ARGS.memory_fraction * have:
        return (f"skipped: per-edge messages need about {need / 2**30:.1f} GiB "
                f"(3 x {data.num_edges:,} edges x {width} x 4 B), over "
                f"{ARGS.memory_fraction:.0%} of the {have / 2**30:.1f} GiB available")
    return None


def build_steps(model_name: str, data, widths, libs) -> dict:
    dgl, pyg = libs
    torch.manual_seed(ARGS.seed)
    ours = GNN(model_name, *widths, num_layers=2, dropout=ARGS.dropout)
    initial = {k: v.clone() for k, v in ours.state_dict().items()}
    steps, skipped = {}, {}
    t = time.perf_counter()
    problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64),
                                           init("single"))
    trainer = Trainer(ours, problem, init("single"), lr=LR, weight_decay=WEIGHT_DECAY,
                      seed=ARGS.seed)
    setup = {"gnnscale": time.perf_counter() - t}
    steps["gnnscale"] = lambda: trainer.train_step()[0]
    x = torch.from_numpy(data.x)
    y = torch.from_numpy(data.y)
    train = torch.from_numpy(data.train_mask)
    dims = list(zip([widths[0], widths[1]], [widths[1], widths[2]]))
    reference = GNN(model_name, *widths, num_layers=2, dropout=ARGS.dropout)
    reference.load_state_dict(initial)
    if dgl is not None and "dgl" in ARGS.variants:
        from dgl.nn import GraphConv, SAGEConv

        from gnnscale.data import to_dgl

        t = time.perf_counter()
        graph = to_dgl(data)
        if model_name == "gcn":
            graph = dgl.add_self_loop(dgl.remove_self_loop(graph))
        convs = [GraphConv(a, b, norm="both") if model_name == "gcn" else SAGEConv(a, b, "mean")
                 for a, b in dims]
        copy_weights(model_name, reference, convs, "dgl")
        graph.create_formats_()  # build the sparse formats once, outside the timed steps
        setup["dgl"] = time.perf_counter() - t
        steps["dgl"] = ForeignStep(Stack(convs, ARGS.dropout), graph, x, y, train)
    if pyg is not None:
        from torch_geometric.nn import GCNConv, SAGEConv as PygSAGEConv

        edge_index = torch.from_numpy(data.edge_index())
        for variant in ("pyg_edge_index", "pyg_csr"):
            if variant not in ARGS.variants:
                continue
            if variant == "pyg_edge_index":
                reason = edge_index_skip_reason(model_name, data, widths)
                if reason:
                    print(f"  {model_name} {variant}: {reason}", flush=True)
                    skipped[variant] = reason
                    continue
            t = time.perf_counter()
            convs = [GCNConv(a, b) if model_name == "gcn" else PygSAGEConv(a, b)
                     for a, b in dims]
            copy_weights(model_name, reference, convs, "pyg")
            if variant == "pyg_edge_index":
                graph = edge_index
            else:  # adj_t: row = destination, columns = its sources (gnnscale's CSR exactly)
                graph = torch.sparse_csr_tensor(
                    torch.from_numpy(data.indptr), torch.from_numpy(data.indices),
                    torch.ones(data.num_edges), size=(data.num_nodes, data.num_nodes))
            setup[variant] = time.perf_counter() - t
            steps[variant] = ForeignStep(Stack([PygAdapter(c) for c in convs], ARGS.dropout),
                                         graph, x, y, train)
    return steps, setup, skipped


def run_model(model_name: str, data, libs) -> dict:
    widths = (data.num_features, ARGS.hidden, data.num_classes)
    steps, setup, skipped = build_steps(model_name, data, widths, libs)
    losses = {name: [] for name in steps}
    times = {name: [] for name in steps}
    failed = {}
    for rep in range(ARGS.warmup + ARGS.reps):
        for name, step in steps.items():
            if name in failed:
                continue
            t = time.perf_counter()
            try:
                loss = step()
            except RuntimeError as exc:  # e.g. out of memory for per-edge messages
                failed[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
                print(f"  {model_name} {name}: failed: {failed[name]}", flush=True)
                continue
            elapsed = time.perf_counter() - t
            losses[name].append(loss)
            if rep >= ARGS.warmup:
                times[name].append(elapsed)
            print(f"  {model_name} {name:15s} step {rep}: {elapsed:7.3f} s  loss {loss:.4f}",
                  flush=True)
    result = {name: {"error": reason} for name, reason in skipped.items()}
    for name in steps:
        if name in failed:
            result[name] = {"error": failed[name], "setup_s": setup[name]}
            continue
        result[name] = {"median_s": statistics.median(times[name]), "min_s": min(times[name]),
                        "times_s": times[name], "losses": losses[name],
                        "setup_s": setup[name]}
    base = result["gnnscale"]["median_s"]
    ratios = {f"{name}_over_gnnscale": r["median_s"] / base
              for name, r in result.items() if name != "gnnscale" and "median_s" in r}
    pyg = [result[n]["median_s"] for n in ("pyg_edge_index", "pyg_csr")
           if "median_s" in result.get(n, {})]
    if pyg:
        ratios["fastest_pyg_over_gnnscale"] = min(pyg) / base
    return {"variants": result, "ratios_median": ratios}


def main() -> None:
    torch.set_num_threads(ARGS.threads)
    dgl = optional("dgl") if "dgl" in ARGS.variants else None
    pyg = (optional("torch_geometric")
           if {"pyg_edge_index", "pyg_csr"} & set(ARGS.variants) else None)
    t = time.perf_counter()
    data = generate_rmat(scale=ARGS.scale, edge_factor=ARGS.edge_factor, seed=ARGS.seed,
                         num_features=ARGS.features, num_classes=ARGS.classes)
    print(f"{data.summary()} (generated in {time.perf_counter() - t:.1f} s); "
          f"{ARGS.threads} threads", flush=True)
    report = {
        "benchmark": "engine_vs_dgl",
        "workload": {"graph": data.name, "scale": ARGS.scale, "edge_factor": ARGS.edge_factor,
                     "num_nodes": data.num_nodes, "num_edges": data.num_edges,
                     "features": ARGS.features, "classes": ARGS.classes,
                     "hidden": ARGS.hidden, "layers": 2, "dropout": ARGS.dropout,
                     "optimizer": f"Adam lr={LR} weight_decay={WEIGHT_DECAY}",
                     "train_nodes": int(data.train_mask.sum()), "seed": ARGS.seed},
        "threads": ARGS.threads, "warmup": ARGS.warmup, "reps": ARGS.reps,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "numpy": np.__version__,
                     "dgl": getattr(dgl, "__version__", None),
                     "torch_geometric": getattr(pyg, "__version__", None)},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "loadavg_start": os.getloadavg()},
        "models": {},
    }
    for model_name in ARGS.models:
        print(f"{model_name}:", flush=True)
        report["models"][model_name] = run_model(model_name, data, (dgl, pyg))
        print(f"  ratios (median s, other / gnnscale): "
              f"{json.dumps(report['models'][model_name]['ratios_median'])}", flush=True)
    report["machine"]["loadavg_end"] = os.getloadavg()
    report["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    os.makedirs(os.path.dirname(os.path.abspath(ARGS.out)), exist_ok=True)
    with open(ARGS.out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {ARGS.out}")


if __name__ == "__main__":
    main()
