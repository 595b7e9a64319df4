"""Under mpirun (2 ranks): the quality bars of test_quality_bars.py, 3 seeds each (GCN
CiteSeer 5), written as JSON. Each case's score is the test metric at the epoch with the best
validation metric, except GCN Cora's: the final epoch's, as the CLI reports it.

Usage: mpirun -n 2 python quality_driver.py DATASETS_ROOT OUT.json
"""

import json
import sys

import numpy as np
import torch

from gnnscale.comm import init
from gnnscale.data import load_dataset
from gnnscale.engine import LocalProblem, Trainer, summarise
from gnnscale.nn import GNN
from partitioning import make_partitioner

# name: (dataset, metric, model kwargs, optimiser kwargs, epochs)
CASES = {
    "gcn-cora-final": ("cora", "acc", dict(model="gcn", hidden_dim=16, dropout=0.5),
                       dict(lr=0.01, weight_decay=5e-4), 200),
    "gcn-citeseer": ("citeseer", "acc", dict(model="gcn", hidden_dim=16, dropout=0.5),
                     dict(lr=0.01, weight_decay=5e-4), 200),
    "gat-cora": ("cora", "acc", dict(model="gat", hidden_dim=8, heads=8, out_heads=1,
                                     dropout=0.6, attn_dropout=0.6, activation="elu"),
                 dict(lr=0.005, weight_decay=5e-4), 200),
    "sage-tolokers": ("tolokers", "auc", dict(model="sage", hidden_dim=64, dropout=0.2),
                      dict(lr=0.01, weight_decay=0.0), 100),
}
SEEDS = (0, 1, 2)
#: more seeds where 3 leave the mean within its spread of the bar: GCN CiteSeer's test
#: accuracy spreads by about 0.01 seed to seed (10 seeds, one process: 0.667-0.698)
MORE_SEEDS = {"gcn-citeseer": (0, 1, 2, 3, 4)}
#: cases scored at the final epoch (Kipf & Welling's Cora figure), not at the best validation
FINAL_EPOCH = {"gcn-cora-final"}


def main():
    root, out = sys.argv[1], sys.argv[2]
    comm = init()
    torch.set_num_threads(1)
    results, problems = {}, {}
    for name, (dataset, metric, model_kw, optim_kw, epochs) in CASES.items():
        if dataset not in problems:
            data = load_dataset(dataset, root=root)
            parts = make_partitioner("metis", num_parts=comm.size, seed=0).fit(data).node_parts
            problems[dataset] = data, LocalProblem.from_graph_data(data, parts, comm)
        data, problem = problems[dataset]
        scores = []
        for seed in MORE_SEEDS.get(name, SEEDS):
            torch.manual_seed(seed)
            kw = dict(model_kw)
            model = GNN(kw.pop("model"), data.num_features, kw.pop("hidden_dim"),
                        data.num_classes, **kw)
            trainer = Trainer(model, problem, comm, seed=seed, metrics=(metric,), **optim_kw)
            records = trainer.fit(epochs, eval_every=epochs if name in FINAL_EPOCH else 1)
            if name in FINAL_EPOCH:
                scores.append(records[-1].metrics[f"test_{metric}"])
                continue
            # model selection as in the GCN and GAT papers: the epoch with the best validation
            # metric (every rank sees the same numbers, so every rank picks the same epoch)
            best = summarise(records, monitor=f"val_{metric}")["best_metrics"]
            scores.append(best[f"test_{metric}"])
        results[name] = {"metric": metric, "scores": scores, "mean": float(np.mean(scores))}
    if comm.rank == 0:
        print(json.dumps(results), flush=True)
        with open(out, "w") as handle:
            json.dump(results, handle)


if __name__ == "__main__":
    main()
