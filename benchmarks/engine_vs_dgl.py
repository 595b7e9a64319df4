"""gnnscale's one-process engine vs DGL (and PyG, where installed) on one machine, same threads.

Run with the DGL environment's python (`make dgl-env` builds it; DGL 2.1.0 needs torch 2.2.1)
from the repository root:

    PYTHONPATH=. $(make -s dgl-env-path)/bin/python benchmarks/engine_vs_dgl.py

Workload (docs/performance.md): a seeded R-MAT graph (scale 18: 262,144 nodes, about 7.6M directed edges
after symmetrising and de-duplicating; Graph500 parameters, edge factor 16), 128 random
features, 16 classes, 2-layer GCN and GraphSAGE (mean) with 256 hidden units, dropout 0.5,
full batch, Adam (lr 0.01, weight decay 5e-4), cross-entropy on the training nodes.
``--models gat`` runs a 2-layer GAT on the same graph, built as ``gnnscale train --model gat
--heads 4 --hidden 16 --layers 2`` builds it: a hidden layer of 4 concatenated heads of 16
features (``--gat-heads``, ``--gat-hidden``), ReLU, an output layer of one head, no attention
dropout, the same input dropout before each layer:

    PYTHONPATH=. $(make -s dgl-env-path)/bin/python benchmarks/engine_vs_dgl.py --models gat

Variants, per model, all in one process:
  gnnscale       gnnscale.nn.GNN on LocalProblem.from_graph_data(..., init("single")),
                 Trainer.train_step()
  dgl            dgl.nn.GraphConv (norm="both", on the graph with self loops) / SAGEConv("mean")
                 / GATConv (on the graph with self loops; heads concatenated, or averaged
                 in the output layer)
  pyg_edge_index torch_geometric GCNConv / SAGEConv / GATConv with its default edge_index input
  pyg_csr        the same layers with a torch.sparse CSR adj_t (PyG's sparse-adjacency input;
                 torch_sparse's SparseTensor has no PyPI wheel for torch 2.2). GCNConv and
                 SAGEConv multiply it as a sparse matrix; GATConv takes its edges out of it
                 (and rebuilds it with one self loop per node) on every call, then forms
                 per-edge messages as with edge_index.
  *_bf16         any of the above in bf16: gnnscale with Trainer(compute_dtype=torch.bfloat16)
                 (transforms under autocast, rows dropped out, aggregated and exchanged in
                 bf16, float32 sums, weights and optimiser), the others with their forward
                 pass and loss under torch.autocast("cpu", torch.bfloat16) (DGL's GraphConv and
                 SAGEConv run under it; torch's CSR product has no bf16 CPU kernel, so pyg_csr_bf16
                 fails and is recorded as failed). For the bf16 rows of docs/performance.md:

    PYTHONPATH=. $(make -s dgl-env-path)/bin/python benchmarks/engine_vs_dgl.py \
        --variants gnnscale gnnscale_bf16 dgl dgl_bf16 pyg_edge_index pyg_csr

``--device cuda`` runs every variant on the first GPU (gnnscale's LocalProblem and model, the
peers' graphs, features and layers moved there; bf16 autocast on "cuda"), synchronises around
each timed step and records, per variant, the most a step allocates on the GPU beyond what was
allocated before it (``gpu_step_peak_bytes``). DGL's variants need a CUDA build of DGL; for
docs/performance.md's GPU table, where torch_geometric is installed beside a CUDA build of torch:

    bash benchmarks/gpu_checks.sh OUT_DIR

Every variant starts from gnnscale's initial weights (copied), so the losses are comparable;
with ``--dropout 0`` every variant's first loss is the same up to rounding (about 1e-5).
PyG's GATConv (both inputs) keeps [edges, heads, width] messages and several [edges, heads]
tensors, GCNConv and SAGEConv with edge_index [edges, width] messages: a PyG variant whose
estimate exceeds ``--memory-fraction`` of the available memory is skipped, with the reason
recorded.
Timing: after warm-up steps, ``--reps`` rounds; in each round every variant runs one full
training step (forward, loss, backward, Adam step), in turn (alternating, so load changes on the
machine hit every variant alike). Reported: median and min seconds per epoch, and ratios
(other / gnnscale, and other / gnnscale_bf16 where it ran: above 1 means gnnscale is faster). The thread count is set for torch,
OpenMP (DGL's kernels) and MKL before anything is imported.

Output (``--out``): the run's workload, versions and machine, and one entry per model. An
existing file is updated per model: the models run now replace theirs, the others are kept,
each with the description of the run that measured it under ``run`` (``--replace`` writes
only this run's models).
"""

from __future__ import annotations

import argparse
import os
import sys

from _workload import add_rmat_arguments, rmat_graph


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_rmat_arguments(parser)
    parser.add_argument("--hidden", type=int, default=256, help="hidden width of gcn and sage")
    parser.add_argument("--gat-heads", type=int, default=4,
                        help="attention heads of gat's hidden layer (concatenated)")
    parser.add_argument("--gat-hidden", type=int, default=16,
                        help="width per head of gat's hidden layer")
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="where every variant computes (cuda: the first GPU; DGL's "
                             "variants need a CUDA build of DGL)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per variant")
    parser.add_argument("--reps", type=int, default=5, help="timed steps per variant")
    parser.add_argument("--models", nargs="+", default=["gcn", "sage"],
                        choices=["gcn", "sage", "gat"])
    parser.add_argument("--variants", nargs="+",
                        default=["gnnscale", "dgl", "pyg_edge_index", "pyg_csr"],
                        choices=[v + suffix for v in ("gnnscale", "dgl", "pyg_edge_index",
                                                      "pyg_csr") for suffix in ("", "_bf16")],
                        help="a _bf16 variant runs under bf16 autocast: gnnscale's "
                             "Trainer(compute_dtype=torch.bfloat16), the others' forward "
                             "pass and loss in torch.autocast('cpu', torch.bfloat16)")
    parser.add_argument("--memory-fraction", type=float, default=0.5,
                        help="skip a PyG variant when its per-edge tensors (gcn/sage with "
                             "edge_index: about 3 x edges x width x 4 bytes; gat: see "
                             "edge_index_skip_reason) would exceed this fraction of the "
                             "available memory")
    parser.add_argument("--out", default="benchmarks/results/engine_vs_dgl.json")
    parser.add_argument("--replace", action="store_true",
                        help="write only this run's models, not those already in --out")
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
from gnnscale.engine import LocalProblem, Trainer  # noqa: E402
from gnnscale.nn import GNN  # noqa: E402
from partitioning.local_view import out_degree_and_self_loops  # noqa: E402
from peer_stack import PygAdapter, Stack, copy_weights  # noqa: E402

LR, WEIGHT_DECAY = 0.01, 5e-4


def optional(module: str):
    try:
        return __import__(module)
    except Exception as exc:  # not installed, or broken against this torch
        print(f"{module} unavailable ({type(exc).__name__}: {exc}); its variants are skipped",
              file=sys.stderr)
        return None


def layer_specs(model_name: str, data) -> list[tuple[int, int, int, bool]]:
    """Each layer's (input width, output width per head, heads, concatenated), as gnnscale's
    GNN builds them (``gnnscale train --model gat --heads H --hidden C --layers 2``: H
    concatenated heads of C, then one head, averaged)."""
    f, classes = data.num_features, data.num_classes
    if model_name == "gat":
        heads, hidden = ARGS.gat_heads, ARGS.gat_hidden
        return [(f, hidden, heads, True), (heads * hidden, classes, 1, False)]
    return [(f, ARGS.hidden, 1, True), (ARGS.hidden, classes, 1, True)]


def make_gnn(model_name: str, data) -> GNN:
    if model_name == "gat":
        return GNN("gat", data.num_features, ARGS.gat_hidden, data.num_classes, num_layers=2,
                   dropout=ARGS.dropout, heads=ARGS.gat_heads, out_heads=1, attn_dropout=0.0,
                   activation="relu")
    return GNN(model_name, data.num_features, ARGS.hidden, data.num_classes, num_layers=2,
               dropout=ARGS.dropout)


def model_description(model_name: str) -> dict:
    if model_name == "gat":
        return {"layers": 2, "heads": ARGS.gat_heads, "hidden_per_head": ARGS.gat_hidden,
                "hidden": ARGS.gat_heads * ARGS.gat_hidden, "out_heads": 1,
                "attn_dropout": 0.0, "activation": "relu", "dropout": ARGS.dropout}
    return {"layers": 2, "hidden": ARGS.hidden, "activation": "relu", "dropout": ARGS.dropout}


class DglGat(torch.nn.Module):
    """DGL's GATConv returns [N, heads, width]: concatenated (flattened) or averaged."""

    def __init__(self, conv, concat: bool):
        super().__init__()
        self.conv, self.concat = conv, concat

    def forward(self, graph, x):
        out = self.conv(graph, x)
        return out.flatten(1) if self.concat else out.mean(dim=1)


class ForeignStep:
    """One full-batch training step of a DGL or PyG stack (``bf16``: forward and loss under
    bf16 autocast, as gnnscale's ``compute_dtype`` runs them)."""

    def __init__(self, module, graph, x, y, train, bf16=False):
        self.module, self.graph, self.x, self.y, self.train = module, graph, x, y, train
        self.bf16 = bf16
        self.optimizer = torch.optim.Adam(module.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)

    def __call__(self) -> float:
        self.module.train()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(ARGS.device, dtype=torch.bfloat16, enabled=self.bf16):
            logits = self.module(self.graph, self.x)
            loss = F.cross_entropy(logits[self.train], self.y[self.train])
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())


def available_memory_bytes() -> int:
    """Free memory where the variants compute: the GPU's (cuda) or the host's."""
    if ARGS.device == "cuda":
        return torch.cuda.mem_get_info()[0]
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


# PyG's GATConv per layer of H heads of width C, per edge (one self loop per node included):
# kept for backward, the gathered source rows x_j [E, H, C], about 10 [E, H] float tensors
# (gathered attention terms, their sum, LeakyReLU, softmax's maximum, exp, sums and output)
# and the int64 edge list; at the peak (a layer's backward) 4 [E, H, C] more (message,
# gradients). Measured at scale 13 (4 heads of 16, 16 classes): 1,600 (edge_index) and 1,560
# (CSR) bytes per edge at the step's peak over the memory before it; this estimate: 1,576.
GAT_EDGE_HEAD_TENSORS = 10
GAT_PEAK_MESSAGES = 4


def edge_index_skip_reason(model_name: str, data, specs, variant: str) -> str | None:
    """PyG's per-edge message tensors; refuse a variant whose estimate would not fit.

    GCNConv and SAGEConv form [E, width] messages only with edge_index (with a CSR adj_t they
    multiply a sparse matrix); GATConv forms [E, H, C] messages with either input."""
    have = available_memory_bytes()
    if model_name == "gat":
        loops = out_degree_and_self_loops(data.indptr, data.indices, data.num_nodes)[1]
        edges = data.num_edges - int(loops.sum()) + data.num_nodes
        kept = sum(edges * ((heads * width + GAT_EDGE_HEAD_TENSORS * heads) * 4 + 2 * 8)
                   for _, width, heads, _ in specs)
        peak = GAT_PEAK_MESSAGES * edges * max(heads * width for _, width, heads, _ in specs) * 4
        need = kept + peak
        detail = (f"{edges:,} edges with self loops x (per layer [heads x width] rows, "
                  f"{GAT_EDGE_HEAD_TENSORS} [heads] floats and the edge list kept, "
                  f"{GAT_PEAK_MESSAGES} [heads x width] at the peak)")
    else:
        if variant != "pyg_edge_index":
            return None
        # GCNConv transforms first (messages at the output width); SAGEConv aggregates its
        # input.
        widths = [specs[0][0]] + [out for _, out, _, _ in specs]
        width = max(widths[1:]) if model_name == "gcn" else max(widths[:2])
        need = 3 * data.num_edges * width * 4
        detail = f"3 x {data.num_edges:,} edges x {width} x 4 B"
    if need > ARGS.memory_fraction * have:
        return (f"skipped: per-edge messages need about {need / 2**30:.1f} GiB "
                f"({detail}), over {ARGS.memory_fraction:.0%} of the "
                f"{have / 2**30:.1f} GiB available")
    return None


def _requested(base: str) -> list[tuple[str, bool]]:
    """(variant name, bf16) for each requested precision of ``base``."""
    return [(name, name.endswith("_bf16")) for name in (base, base + "_bf16")
            if name in ARGS.variants]


def build_steps(model_name: str, data, libs) -> dict:
    dgl, pyg = libs
    specs = layer_specs(model_name, data)
    torch.manual_seed(ARGS.seed)
    initial = {k: v.clone() for k, v in make_gnn(model_name, data).state_dict().items()}
    steps, skipped, setup = {}, {}, {}

    def reference():
        """gnnscale's model with the initial weights (the foreign stacks copy them)."""
        net = make_gnn(model_name, data)
        net.load_state_dict(initial)
        return net

    device = torch.device(ARGS.device)

    for name, bf16 in [("gnnscale", False)] + [v for v in _requested("gnnscale") if v[1]]:
        t = time.perf_counter()
        problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64),
                                               init("single"), device=device)
        trainer = Trainer(reference().to(device), problem, init("single"), lr=LR,
                          weight_decay=WEIGHT_DECAY, seed=ARGS.seed,
                          compute_dtype=torch.bfloat16 if bf16 else None)
        setup[name] = time.perf_counter() - t
        steps[name] = lambda trainer=trainer: trainer.train_step()[0]
    x = torch.from_numpy(data.x).to(device)
    y = torch.from_numpy(data.y).to(device)
    train = torch.from_numpy(data.train_mask).to(device)
    if dgl is not None and _requested("dgl"):
        from dgl.nn import GATConv, GraphConv, SAGEConv

        from gnnscale.data import to_dgl

        t = time.perf_counter()
        graph = to_dgl(data)
        if model_name in ("gcn", "gat"):
            graph = dgl.add_self_loop(dgl.remove_self_loop(graph))
        graph = graph.to(device)
        graph.create_formats_()  # build the sparse formats once, outside the timed steps
        graph_setup = time.perf_counter() - t
        for name, bf16 in _requested("dgl"):
            t = time.perf_counter()
            if model_name == "gat":
                convs = [GATConv(a, b, heads, feat_drop=0.0, attn_drop=0.0,
                                 negative_slope=0.2, residual=False,
                                 allow_zero_in_degree=True, bias=True)
                         for a, b, heads, _ in specs]
            else:
                convs = [GraphConv(a, b, norm="both") if model_name == "gcn"
                         else SAGEConv(a, b, "mean") for a, b, _, _ in specs]
            copy_weights(model_name, reference(), convs, "dgl")
            if model_name == "gat":
                convs = [DglGat(conv, concat) for conv, (_, _, _, concat) in zip(convs, specs)]
            setup[name] = graph_setup + time.perf_counter() - t
            steps[name] = ForeignStep(Stack(convs, ARGS.dropout).to(device), graph, x, y,
                                      train, bf16)
    if pyg is not None:
        from torch_geometric.nn import GATConv as PygGATConv, GCNConv, SAGEConv as PygSAGEConv

        edge_index = torch.from_numpy(data.edge_index()).to(device)
        for base in ("pyg_edge_index", "pyg_csr"):
            for variant, bf16 in _requested(base):
                reason = edge_index_skip_reason(model_name, data, specs, base)
                if reason:
                    print(f"  {model_name} {variant}: {reason}", flush=True)
                    skipped[variant] = reason
                    continue
                t = time.perf_counter()
                if model_name == "gat":
                    convs = [PygGATConv(a, b, heads, concat=concat, negative_slope=0.2,
                                        dropout=0.0, add_self_loops=True)
                             for a, b, heads, concat in specs]
                else:
                    convs = [GCNConv(a, b) if model_name == "gcn" else PygSAGEConv(a, b)
                             for a, b, _, _ in specs]
                copy_weights(model_name, reference(), convs, "pyg")
                if base == "pyg_edge_index":
                    graph = edge_index
                else:  # adj_t: row = destination, columns = its sources (gnnscale's CSR)
                    graph = torch.sparse_csr_tensor(
                        torch.from_numpy(data.indptr), torch.from_numpy(data.indices),
                        torch.ones(data.num_edges), size=(data.num_nodes, data.num_nodes),
                        device=device)
                setup[variant] = time.perf_counter() - t
                steps[variant] = ForeignStep(Stack([PygAdapter(c) for c in convs],
                                                   ARGS.dropout).to(device),
                                             graph, x, y, train, bf16)
    return steps, setup, skipped


def run_model(model_name: str, data, libs) -> dict:
    steps, setup, skipped = build_steps(model_name, data, libs)
    losses = {name: [] for name in steps}
    times = {name: [] for name in steps}
    gpu_peaks = {name: [] for name in steps}  # cuda: bytes a step adds at its peak
    failed = {}
    cuda = ARGS.device == "cuda"
    for rep in range(ARGS.warmup + ARGS.reps):
        for name, step in steps.items():
            if name in failed:
                continue
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
            t = time.perf_counter()
            try:
                loss = step()
                if cuda:
                    torch.cuda.synchronize()
            except RuntimeError as exc:  # e.g. out of memory for per-edge messages
                failed[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
                print(f"  {model_name} {name}: failed: {failed[name]}", flush=True)
                continue
            elapsed = time.perf_counter() - t
            if cuda:
                gpu_peaks[name].append(torch.cuda.max_memory_allocated() - before)
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
        if gpu_peaks[name]:
            result[name]["gpu_step_peak_bytes"] = max(gpu_peaks[name])
    base = result["gnnscale"]["median_s"]
    ratios = {f"{name}_over_gnnscale": r["median_s"] / base
              for name, r in result.items() if name != "gnnscale" and "median_s" in r}
    pyg = [result[n]["median_s"] for n in ("pyg_edge_index", "pyg_csr")
           if "median_s" in result.get(n, {})]
    if pyg:
        ratios["fastest_pyg_over_gnnscale"] = min(pyg) / base
    if "median_s" in result.get("gnnscale_bf16", {}):
        half = result["gnnscale_bf16"]["median_s"]
        ratios.update({f"{name}_over_gnnscale_bf16": r["median_s"] / half
                       for name, r in result.items()
                       if name != "gnnscale_bf16" and "median_s" in r})
    first = {name: r["losses"][0] for name, r in result.items() if r.get("losses")}
    print(f"  {model_name} step-0 losses: "
          + ", ".join(f"{name} {loss:.6f}" for name, loss in first.items())
          + (f"; largest difference from gnnscale "
             f"{max(abs(v - first['gnnscale']) for v in first.values()):.2e}"
             if "gnnscale" in first else ""), flush=True)
    return {"model": model_description(model_name), "variants": result,
            "ratios_median": ratios}


def merge_previous(report: dict, path: str) -> None:
    """Keep the models of an earlier report at ``path`` that this run did not measure, each
    with its run's description under ``run`` (an entry already carrying one keeps it)."""
    try:
        with open(path) as f:
            previous = json.load(f)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        print(f"{path}: not read ({type(exc).__name__}: {exc}); overwritten", flush=True)
        return
    if not isinstance(previous, dict) or previous.get("benchmark") != report["benchmark"] \
            or not isinstance(previous.get("models"), dict):
        print(f"{path}: not an {report['benchmark']} report; overwritten", flush=True)
        return
    run = {k: v for k, v in previous.items() if k != "models"}
    models, kept = {}, []  # the file's order, then models new to it
    for name, entry in previous["models"].items():
        if name in report["models"]:
            models[name] = report["models"][name]
        elif isinstance(entry, dict):
            models[name] = {**entry, "run": entry.get("run", run)}
            kept.append(name)
    report["models"] = {**models, **report["models"]}
    if kept:
        print(f"kept from {path}: {', '.join(kept)}", flush=True)


def main() -> None:
    torch.set_num_threads(ARGS.threads)
    if ARGS.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: torch sees no CUDA device on this host")
    dgl = optional("dgl") if _requested("dgl") else None
    pyg = (optional("torch_geometric")
           if _requested("pyg_edge_index") or _requested("pyg_csr") else None)
    t = time.perf_counter()
    data = rmat_graph(ARGS)
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
        "device": (torch.cuda.get_device_name(0) if ARGS.device == "cuda" else "cpu"),
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
    if not ARGS.replace:
        merge_previous(report, ARGS.out)
    os.makedirs(os.path.dirname(os.path.abspath(ARGS.out)), exist_ok=True)
    with open(ARGS.out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {ARGS.out}")


if __name__ == "__main__":
    main()
