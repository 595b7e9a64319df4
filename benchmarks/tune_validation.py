"""Time model vs measurement: predicted and measured training-step time per cell.

A cell is (dataset, partitioner, ranks, network). For each (dataset, partitioner, ranks) the
driver launches one ``mpirun`` of this script (``--rank-main``), which loads the graph,
partitions it as ``gnnscale train`` does (rank 0, seed 0), and trains a 2-layer GCN (hidden 16,
dropout 0.5) for ``--epochs`` epochs on each network: the real shared-memory transport and
``train --simulate-network``'s :class:`SlowNetwork` at each ``--networks`` value. Measured: the
median over epochs 2.. of rank 0's training step (forward + backward + optimiser; every rank
leaves it together after the gradient allreduce) and of its evaluation pass. Predicted:
:func:`planning.cost_model.predict` for the same partition, threads per rank as ``train``
picks them, every rank on this host sharing its ``--host-cores`` as the model spreads them,
with two sets of constants: ``predicted_*`` with those the ranks of the job measured just
before training, as many at once as the host has cores for
(:func:`gnnscale.cli.calibrate.calibrate_in_job`: whatever else runs on this shared 2-core host
at the time is in them; a cell's ``calibration`` says so, cells without it were measured one
rank at a time), and ``file_predicted_*`` with ``--cost-model`` (``gnnscale tune
--calibrate``, one process).

Results are appended to ``--out`` (one entry per cell), so a sweep can be split into several
runs, each under the benchmark lock::

    flock /tmp/gnnscale-bench.lock python benchmarks/tune_validation.py \
        --datasets rmat-18 --methods metis libra random --ranks 1 2 4 8 \
        --cost-model benchmarks/results/cost_model_here.json \
        --out benchmarks/results/tune_validation.json

``--runs 1 2`` measures every cell again as runs 1 and 2 (run 0 is the default), methods
interleaved within a run; the report takes each cell's medians over its runs.

``--report`` prints the table and the summary (median absolute relative error, whether the
predicted order of the partitioners equals the measured one at 4 and 8 ranks per network).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DATA_ROOT = REPO / "datasets"  # the datasets shipped with the repository
NETWORKS = ("real", "100,1", "50,10")


def load(name: str):
    """``rmat-S``: R-MAT scale S with 128 random features, 16 classes; else a dataset name or
    a folder under the repository's datasets/."""
    from gnnscale.data import load_dataset

    if name.startswith("rmat-"):
        return load_dataset("rmat", scale=int(name[5:]), num_features=128, num_classes=16,
                            seed=0)
    path = DATA_ROOT / name
    return load_dataset(str(path) if path.exists() else name, root=str(DATA_ROOT))


def network_of(text: str):
    """``real`` -> None; ``LAT_US,GBIT`` -> (latency s, bytes/s) as train parses it."""
    from gnnscale.cli.arguments import simulated_network

    return None if text == "real" else simulated_network(text)


def rank_main(args) -> None:
    """One (dataset, method, ranks): train on every network, print rank 0's medians."""
    import torch

    from gnnscale.comm import init
    from gnnscale.engine import LocalProblem, Trainer
    from gnnscale.engine.vertex_cut_problem import broadcast_vertex_cut_problem
    from gnnscale.graph.staleness_netsim import SlowNetwork
    from gnnscale.nn import GNN
    from gnnscale.threads import default_threads
    from partitioning import make_partitioner

    torch.set_num_threads(default_threads())
    comm = init()
    data = load(args.datasets[0])
    method = args.methods[0]
    from planning.workload import part_workload

    partition = make_partitioner(method, num_parts=comm.size, seed=0).fit(data) \
        if comm.rank == 0 else None
    workload = part_workload(data, partition) if comm.rank == 0 else None
    if method in ("libra", "hdrf") and comm.size > 1:
        problem = broadcast_vertex_cut_problem(data, partition, comm)
    else:
        parts = torch.from_numpy(partition.node_parts.astype(np.int64)) if comm.rank == 0 \
            else torch.empty(data.num_nodes, dtype=torch.int64)
        problem = LocalProblem.from_graph_data(data, comm.broadcast(parts, root=0).numpy(),
                                               comm)
    from gnnscale.cli.calibrate import calibrate_in_job

    in_job = calibrate_in_job(comm, default_threads()).to_dict()
    plan = problem.graph.halo_plan
    real = plan.comm
    rows = []
    for net in args.networks:
        simulated = network_of(net)
        plan.comm = real if simulated is None else SlowNetwork(real, *simulated)
        torch.manual_seed(0)
        model = GNN("gcn", data.num_features, args.hidden, data.num_classes, num_layers=2)
        trainer = Trainer(model, problem, comm, seed=0)
        comm.barrier()
        records = trainer.fit(args.epochs)
        steps = [r.time["forward_s"] + r.time["backward_s"] + r.time["optimizer_s"]
                 for r in records[1:]]
        evals = [r.time["eval_s"] for r in records[1:]]
        rows.append({"network": net, "measured_step_s": float(np.median(steps)),
                     "measured_eval_s": float(np.median(evals)), "steps_s": steps})
    plan.comm = real
    if comm.rank == 0:
        result_shape = {"num_features": data.num_features, "num_classes": data.num_classes}
        workload = {k: v.tolist() if isinstance(v, np.ndarray) else v
                    for k, v in workload.items()}
        print("RESULT " + json.dumps({"rows": rows, "in_job_cost_model": in_job,
                                      "workload": workload,
                                      "shape": result_shape}), flush=True)


class Shape:
    """Feature and class counts of the graph a job trained on."""

    def __init__(self, values: dict):
        self.num_features, self.num_classes = values["num_features"], values["num_classes"]


def predict_cells(data, workload: dict, ranks: int, networks, args,
                  in_job: dict) -> list[dict]:
    """Predictions with the constants measured in the job (``predicted_*``) and with
    ``--cost-model``'s (``file_predicted_*``), both with the ranks sharing ``--host-cores``."""
    from planning.cost_model import Cluster, CostModel, ModelSpec, Network, predict

    costs = CostModel.load(args.cost_model) if args.cost_model else CostModel()
    measured_here = CostModel.from_dict(in_job)
    spec = ModelSpec.build("gcn", data.num_features, args.hidden, data.num_classes)
    work = {k: np.asarray(v) if isinstance(v, list) else v for k, v in workload.items()}
    threads = max(1, args.host_cores // ranks)
    out = []
    for net in networks:
        simulated = network_of(net)
        network = None if simulated is None else Network(*simulated)
        crowded = Cluster(ranks_per_host=ranks, cores_per_rank=threads,
                          host_cores=args.host_cores, simulated=simulated is not None,
                          network=network)
        pred = predict(work, spec, crowded, measured_here)
        from_file = predict(work, spec, crowded, costs)
        out.append({"network": net, "predicted_step_s": pred["step_s"],
                    "predicted_eval_s": pred["eval_s"], "bound": pred["bound"],
                    "file_predicted_step_s": from_file["step_s"],
                    "file_predicted_eval_s": from_file["eval_s"]})
    return out


def run_cell(dataset: str, method: str, ranks: int, args, run: int = 0) -> list[dict]:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMP_NUM_THREADS": "1", "PATH": f"{Path(sys.prefix) / 'bin'}:{os.environ['PATH']}"}
    networks = args.networks if ranks > 1 else ["real"]
    cmd = [str(Path(sys.prefix) / "bin" / "mpirun"), "-n", str(ranks), "--oversubscribe",
           sys.executable, __file__, "--rank-main", "--datasets", dataset, "--methods", method,
           "--epochs", str(args.epochs), "--hidden", str(args.hidden), "--networks", *networks]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    measured = result["rows"]
    predicted = predict_cells(Shape(result["shape"]), result["workload"], ranks, networks,
                              args, result["in_job_cost_model"])
    wall = time.perf_counter() - t0
    return [{"dataset": dataset, "method": method, "ranks": ranks, "hidden": args.hidden,
             "run": run, "calibration": "ranks with their own cores at once",
             **m, **p, "wall_s": wall,
             "in_job_cost_model": result["in_job_cost_model"], "workload": result["workload"],
             "shape": result["shape"]}
            for m, p in zip(measured, predicted)]


def repredict(path: Path, args) -> None:
    """Predictions of every stored cell recomputed from its workload and in-job constants."""
    result = json.loads(path.read_text())
    if result.get("cost_model") and not args.cost_model:
        args.cost_model = result["cost_model"]
    for cell in result["cells"]:
        spec_args = argparse.Namespace(**{**vars(args),
                                          "hidden": cell.get("hidden", args.hidden)})
        fresh = predict_cells(Shape(cell["shape"]), cell["workload"], cell["ranks"],
                              [cell["network"]], spec_args, cell["in_job_cost_model"])[0]
        cell.update({k: v for k, v in fresh.items() if k != "network"})
    path.write_text(json.dumps(result, indent=1))


def report(path) -> dict:
    """Print the table and the two targets; returns the summary."""
    cells = merged_cells(json.loads(Path(path).read_text())["cells"])
    print(f"{'dataset':<24} {'method':<7} {'ranks':>5} {'network':>7} {'pred ms':>9} "
          f"{'meas ms':>9} {'error':>7}")
    errors = []
    for c in sorted(cells, key=lambda c: (c["dataset"], c["network"], c["ranks"], c["method"])):
        err = c["predicted_step_s"] / c["measured_step_s"] - 1
        errors.append(abs(err))
        print(f"{c['dataset']:<24} {c['method']:<7} {c['ranks']:>5} {c['network']:>7} "
              f"{c['predicted_step_s'] * 1e3:>9.2f} {c['measured_step_s'] * 1e3:>9.2f} "
              f"{100 * err:>6.0f}%")
    orders = []
    for key in sorted({(c["dataset"], c["network"], c["ranks"]) for c in cells
                       if c["ranks"] in (4, 8) and c["network"] != "real"}):
        group = [c for c in cells if (c["dataset"], c["network"], c["ranks"]) == key]
        if len(group) < 2:
            continue
        predicted = [c["method"] for c in sorted(group, key=lambda c: c["predicted_step_s"])]
        measured = [c["method"] for c in sorted(group, key=lambda c: c["measured_step_s"])]
        orders.append({"dataset": key[0], "network": key[1], "ranks": key[2],
                       "predicted": predicted, "measured": measured,
                       "equal": predicted == measured})
        print(f"order {key}: predicted {predicted} measured {measured}")
    file_errors = [abs(c["file_predicted_step_s"] / c["measured_step_s"] - 1) for c in cells]
    eval_errors = [abs(c["predicted_eval_s"] / c["measured_eval_s"] - 1) for c in cells]
    summary = {"cells": len(cells), "median_abs_relative_error": float(np.median(errors)),
               "median_abs_relative_error_file_constants": float(np.median(file_errors)),
               "median_abs_relative_error_eval": float(np.median(eval_errors)),
               "orders_equal": sum(o["equal"] for o in orders), "orders": len(orders)}
    print(json.dumps(summary))
    print(markdown(cells))
    return {"summary": summary, "orders": orders}


def markdown(cells) -> str:
    """The table of docs/planning.md: one row per (dataset, ranks, method), step ms predicted /
    measured for each network."""
    nets = [n for n in NETWORKS if any(c["network"] == n for c in cells)]
    lines = ["| graph | ranks | partitioner | " + " | ".join(
        f"{'shared memory' if n == 'real' else 'simulated ' + n} pred / meas (ms)" for n in nets)
        + " |", "|---|---|---|" + "---|" * len(nets)]
    keys = sorted({(c["dataset"], c["ranks"], c["method"]) for c in cells})
    for dataset, ranks, method in keys:
        row = []
        for n in nets:
            match = [c for c in cells if (c["dataset"], c["ranks"], c["method"], c["network"])
                     == (dataset, ranks, method, n)]
            row.append(f"{match[0]['predicted_step_s'] * 1e3:.1f} / "
                       f"{match[0]['measured_step_s'] * 1e3:.1f}" if match else "")
        lines.append(f"| {dataset} | {ranks} | {method} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["rmat-18"])
    parser.add_argument("--methods", nargs="+", default=["metis", "libra", "random"])
    parser.add_argument("--ranks", nargs="+", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--networks", nargs="+", default=list(NETWORKS))
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--host-cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--cost-model", default=None)
    parser.add_argument("--out", default="benchmarks/results/tune_validation.json")
    parser.add_argument("--runs", nargs="+", type=int, default=[0],
                        help="run indices to measure (each replaces its stored cells; the "
                             "report takes medians over the runs of a cell)")
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--report", action="store_true", help="print the table of --out")
    parser.add_argument("--repredict", action="store_true",
                        help="recompute every stored cell's predictions with the current model "
                             "(its stored workload and in-job constants), then --report")
    args = parser.parse_args()
    if args.rank_main:
        return rank_main(args)
    out = Path(args.out)
    if args.repredict:
        repredict(out, args)
    if args.report or args.repredict:
        result = json.loads(out.read_text())
        result.update(report(out))
        out.write_text(json.dumps(result, indent=1))
        return
    result = json.loads(out.read_text()) if out.exists() else {"cells": []}
    result["cost_model"] = args.cost_model
    for run in args.runs:
        for dataset in args.datasets:
            for ranks in args.ranks:
                for method in (args.methods if ranks > 1 else args.methods[:1]):
                    rows = run_cell(dataset, method, ranks, args, run)
                    for row in rows:
                        print(f"{dataset} {method} x{ranks} {row['network']} run {run}: "
                              f"predicted {row['predicted_step_s'] * 1e3:.2f} ms, measured "
                              f"{row['measured_step_s'] * 1e3:.2f} ms ({row['wall_s']:.0f} s)",
                              flush=True)
                    keys = {cell_key(r) for r in rows}
                    result["cells"] = [c for c in result["cells"]
                                       if cell_key(c) not in keys] + rows
                    out.write_text(json.dumps(result, indent=1))


def cell_key(cell: dict) -> tuple:
    """One measurement: (dataset, method, ranks, network, run)."""
    return (cell["dataset"], cell["method"], cell["ranks"], cell["network"],
            cell.get("run", 0))


def merged_cells(cells: list) -> list:
    """One cell per (dataset, method, ranks, network): the medians over its runs of the
    measured and predicted times."""
    groups = {}
    for c in cells:
        groups.setdefault(cell_key(c)[:4], []).append(c)
    keys = ("measured_step_s", "measured_eval_s", "predicted_step_s", "predicted_eval_s",
            "file_predicted_step_s", "file_predicted_eval_s")
    return [{**runs[0], **{k: float(np.median([r[k] for r in runs])) for k in keys},
             "runs": len(runs)} for runs in groups.values()]


if __name__ == "__main__":
    main()
