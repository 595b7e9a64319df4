"""gnnscale vs Intel Labs' SAR on 2 ranks x 1 thread: the same graph, model and METIS 2 parts.

Run with the DGL environment's python (`make dgl-env` builds it; SAR needs DGL, and DGL 2.1.0
needs torch 2.2.1) from the repository root, alone on the machine:

    flock /tmp/gnnscale-bench.lock env PYTHONPATH=. \\
        $(make -s dgl-env-path)/bin/python benchmarks/sar_vs_gnnscale.py

(``--scale 14`` for a quick check.) SAR (Sequential Aggregation and Rematerialization,
https://github.com/IntelLabs/SAR, a DGL-based library for full-batch distributed training) is
vendored in ``third_party/sar`` (see its SOURCE.md) and put on the SAR processes' PYTHONPATH:
nothing is installed.

Workload: the R-MAT graph of benchmarks/engine_vs_dgl.py (``generate_rmat(scale=18,
edge_factor=16, seed=0, num_features=128, num_classes=16)``: 262,144 nodes, about 7.6M
directed edges), 2-layer GCN and GraphSAGE (mean) with 256 hidden units, dropout 0.5 on each
layer's input, ReLU between the layers, full batch, Adam (lr 0.01, weight decay 5e-4),
cross-entropy on the training nodes (summed over the ranks' training nodes and divided by
their global count, as both libraries do).

Partitions (2, METIS, computed once by this driver before any timed run):
  sar       ``dgl.distributed.partition_graph(part_method="metis", num_hops=1,
            balance_edges=True)`` as SAR's examples/partition_graph.py does it, once per graph
            (GCN trains on the graph with one self loop per node, as DGL's GraphConv needs;
            SAGE on the graph without), then ``sar.load_dgl_partition_data`` and
            ``sar.construct_full_graph`` in each rank.
  gnnscale  ``partitioning.make_partitioner("metis", num_parts=2, seed=0,
            balance=("nodes", "edges"))`` (the same balance goal: nodes and edges), then
            ``LocalProblem.from_graph_data`` in each rank. ``--balance nodes`` balances nodes
            only on both sides (DGL's balance_edges=False).

Variants, each a separate 2-process job:
  sar            DGL's GraphConv(norm="both") / SAGEConv("mean") on SAR's graph shard
                 manager, SAR's default mode (sequential aggregation and rematerialization),
                 ``sar.gather_grads`` before the Adam step; processes started as SAR's examples
                 start them (one per rank with its rank; ``torch.distributed`` gloo on
                 127.0.0.1, initialised here before ``sar.initialize_comms``).
  sar_no_sr      the same with ``sar.Config.disable_sr = True`` (sequential aggregation, the
                 backward graph kept instead of rematerialised: SAR's faster, larger mode).
  gnnscale       ``mpirun -n 2 --bind-to none`` (the SAR processes are not bound either),
                 ``gnnscale.comm.init()`` (MPI), gnnscale.nn.GNN, Trainer.train_step().
  gnnscale_bf16  the same with Trainer(compute_dtype=torch.bfloat16).
Every rank runs with 1 thread (OMP/MKL/NUMBA_NUM_THREADS=1, torch.set_num_threads(1)), in the
DGL environment's torch (``--gnnscale-python`` runs the gnnscale jobs with another interpreter,
e.g. .venv/bin/python). Both libraries start from the same weights: gnnscale's GNN built with
``torch.manual_seed(seed)``, copied into DGL's layers as benchmarks/engine_vs_dgl.py copies
them; with ``--dropout 0`` the step-0 losses agree up to rounding.

Timing: per job ``--warmup`` untimed steps, then ``--reps`` timed steps, each one training
step (forward, loss, backward, gradient allreduce, Adam step; no evaluation), the ranks aligned
by a barrier before each step (not timed). A step's time is the slower rank's. ``--rounds``
rounds, in each every variant's job runs once, in turn (sar, sar_no_sr, gnnscale,
gnnscale_bf16, sar, ...), so load changes hit every variant alike. Reported per model and
variant: the median and min over all timed steps of all rounds, each round's median, every
rank's step times and the global losses (summed over the ranks), and ratios sar / gnnscale,
sar / gnnscale_bf16 and the same for sar_no_sr (above 1: gnnscale is faster). Memory per rank:
the peak RSS of the training steps (the kernel's VmHWM, reset through /proc/self/clear_refs
after setup, so it counts what stays resident from setup plus the steps' peak) and of the
whole process (VmHWM before the reset included: a SAR rank's loading of its DGL partition, a
gnnscale rank's generating the whole graph before it keeps its part). Writes ``--out``
(benchmarks/results/sar_vs_gnnscale.json).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from _workload import add_rmat_arguments, rmat_argv, rmat_graph

ROOT = Path(__file__).resolve().parents[1]
SAR_DIR = ROOT / "third_party" / "sar"
VARIANTS = ("sar", "sar_no_sr", "gnnscale", "gnnscale_bf16")
LR, WEIGHT_DECAY = 0.01, 5e-4


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_rmat_arguments(parser)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--models", nargs="+", default=["gcn", "sage"], choices=["gcn", "sage"])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS),
                        choices=VARIANTS)
    parser.add_argument("--balance", default="nodes,edges", choices=["nodes,edges", "nodes"],
                        help="METIS balance goal of both partitioners")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per job")
    parser.add_argument("--reps", type=int, default=5, help="timed steps per job")
    parser.add_argument("--rounds", type=int, default=2, help="jobs per variant, alternating")
    parser.add_argument("--work-dir", default=None,
                        help="partitions and per-rank results (default: a temporary folder)")
    parser.add_argument("--gnnscale-python", default=sys.executable,
                        help="interpreter of the gnnscale jobs (its mpirun is the one beside it)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per job")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/sar_vs_gnnscale.json"))
    # internal: one rank of one job
    parser.add_argument("--worker", choices=["sar", "gnnscale"], help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--part-config", help=argparse.SUPPRESS)
    parser.add_argument("--parts-file", help=argparse.SUPPRESS)
    parser.add_argument("--master-port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


ARGS = parse_args()
if ARGS.worker:  # one thread per rank, set before torch, numba or DGL start their pools
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[_var] = "1"

import gc  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from peer_stack import Stack, copy_weights  # noqa: E402


# --- memory --------------------------------------------------------------------------------

def status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def start_training_memory() -> tuple[int, int, bool]:
    """(peak RSS of the setup, RSS now, whether the peak mark could be reset), in KiB.

    VmHWM, not ``ru_maxrss``: Linux keeps the largest RSS of a process's ancestors in
    ``ru_maxrss`` across fork and exec (a SAR rank started by this driver would report the
    driver's peak); VmHWM belongs to this process's own memory map."""
    gc.collect()
    setup_peak = status_kib("VmHWM")
    return setup_peak, status_kib("VmRSS"), reset_peak_rss()


def memory_report(start: tuple[int, int, bool]) -> dict:
    setup_peak, rss_before, hwm_reset = start
    training = status_kib("VmHWM") if hwm_reset else None
    return {"peak_rss_process_bytes": max(setup_peak, training or 0) * 1024,
            "peak_rss_setup_bytes": setup_peak * 1024,
            "rss_before_training_bytes": rss_before * 1024,
            "peak_rss_training_bytes": None if training is None else training * 1024}


# --- the model, as gnnscale builds it; DGL's layers get its initial weights ------------------

def reference_gnn(model_name: str, num_features: int, num_classes: int):
    from gnnscale.nn import GNN

    torch.manual_seed(ARGS.seed)
    return GNN(model_name, num_features, ARGS.hidden, num_classes, num_layers=2,
               dropout=ARGS.dropout)


def dgl_model(model_name: str, num_features: int, num_classes: int) -> Stack:
    from dgl.nn import GraphConv, SAGEConv

    widths = [(num_features, ARGS.hidden), (ARGS.hidden, num_classes)]
    ours = reference_gnn(model_name, num_features, num_classes)
    convs = [GraphConv(a, b, norm="both") if model_name == "gcn" else SAGEConv(a, b, "mean")
             for a, b in widths]
    copy_weights(model_name, ours, convs, "dgl")
    return Stack(convs, ARGS.dropout)


# --- one rank of a job -----------------------------------------------------------------------

def timed_steps(step, barrier, global_loss) -> dict:
    times, losses = [], []
    for i in range(ARGS.warmup + ARGS.reps):
        barrier()
        t = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t)
        losses.append(global_loss(loss))
    return {"step_times_s": times, "losses": losses}


def sar_worker() -> None:
    torch.set_num_threads(1)
    try:
        import ifaddr  # noqa: F401  (SAR's only use: picking a network interface itself)
    except ImportError:
        # SAR imports ifaddr at the top of sar/comm.py but calls it only to choose a socket
        # when it has to initialise torch.distributed; here it never does (initialised
        # below), so a stand-in that refuses to be used is enough.
        import types

        stub = types.ModuleType("ifaddr")

        def get_adapters(*_args, **_kwargs):
            raise RuntimeError("ifaddr is not installed in this environment")

        stub.get_adapters = get_adapters
        sys.modules["ifaddr"] = stub
    import torch.distributed as dist

    import sar

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(ARGS.master_port)
    dist.init_process_group("gloo", rank=ARGS.rank, world_size=2)
    sar.initialize_comms(ARGS.rank, 2, "127.0.0.1", "gloo",
                         master_port_number=ARGS.master_port)
    sar.Config.disable_sr = ARGS.variant == "sar_no_sr"
    t = time.perf_counter()
    data = sar.load_dgl_partition_data(ARGS.part_config, ARGS.rank, torch.device("cpu"))
    shards = data.all_shard_edges
    part = {"owned_nodes": int(data.node_ranges[ARGS.rank][1] - data.node_ranges[ARGS.rank][0]),
            "edges": int(sum(s.edges[0].numel() for s in shards)),
            "halo_nodes": int(sum(torch.unique(s.edges[0]).numel()
                                  for i, s in enumerate(shards) if i != ARGS.rank))}
    train = sar.suffix_key_lookup(data.node_features, "train_mask").bool()
    train_idx = train.nonzero(as_tuple=False).view(-1)
    labels = sar.suffix_key_lookup(data.node_features, "labels").long()
    features = sar.suffix_key_lookup(data.node_features, "features").float()
    graph = sar.construct_full_graph(data)
    del data, shards
    n_train = torch.tensor([train_idx.numel()], dtype=torch.int64)
    sar.comm.all_reduce(n_train, dist.ReduceOp.SUM, move_to_comm_device=True)
    n_train = int(n_train.item())
    model = dgl_model(ARGS.model, features.shape[1], ARGS.classes)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    torch.manual_seed(ARGS.seed + ARGS.rank)  # dropout masks differ per rank, as gnnscale's
    setup_s = time.perf_counter() - t

    def step() -> float:
        model.train()
        optimizer.zero_grad(set_to_none=True)
        logits = model(graph, features)
        loss = F.cross_entropy(logits[train_idx], labels[train_idx], reduction="sum") / n_train
        loss.backward()
        sar.gather_grads(model)
        optimizer.step()
        return float(loss.detach())

    def global_loss(loss: float) -> float:
        value = torch.tensor([loss], dtype=torch.float64)
        dist.all_reduce(value)
        return float(value.item())

    memory = start_training_memory()
    out = timed_steps(step, dist.barrier, global_loss)
    out.update(memory_report(memory))
    write_result({"rank": ARGS.rank, "setup_s": setup_s, "partition": part, **out})
    dist.barrier()
    # No dist.destroy_process_group(): in torch 2.2.1 the gloo group's destructor joins its
    # worker thread while holding the GIL that thread waits for (a hang at teardown), and
    # SAR's communication thread is not a daemon. The result is written: leave at once.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def gnnscale_worker() -> None:
    torch.set_num_threads(1)
    from gnnscale.comm import init
    from gnnscale.engine import LocalProblem, Trainer

    comm = init()
    t = time.perf_counter()
    data = rmat_graph(ARGS)
    parts = np.load(ARGS.parts_file)
    problem = LocalProblem.from_graph_data(data, parts, comm)
    del data, parts
    graph = problem.graph
    part = {"owned_nodes": int(graph.num_owned), "edges": int(graph.view.indptr[-1]),
            "halo_nodes": int(graph.num_halo)}
    model = reference_gnn(ARGS.model, problem.num_features, problem.num_classes)
    trainer = Trainer(model, problem, comm, lr=LR, weight_decay=WEIGHT_DECAY, seed=ARGS.seed,
                      compute_dtype=torch.bfloat16 if ARGS.variant == "gnnscale_bf16" else None)
    setup_s = time.perf_counter() - t
    memory = start_training_memory()
    out = timed_steps(lambda: trainer.train_step()[0], comm.barrier,
                      lambda loss: comm.allreduce_scalar(loss))
    out.update(memory_report(memory))
    write_result({"rank": comm.rank, "setup_s": setup_s, "partition": part, **out})
    comm.barrier()


def write_result(result: dict) -> None:
    with open(f"{ARGS.result}.rank{result['rank']}.json", "w") as f:
        json.dump(result, f)


def worker_main() -> None:
    if ARGS.worker == "sar":
        sar_worker()
    else:
        gnnscale_worker()


# --- the driver ------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sar_commit() -> str | None:
    try:
        match = re.search(r"\b[0-9a-f]{40}\b", (SAR_DIR / "SOURCE.md").read_text())
    except OSError:
        return None
    return match.group(0) if match else None


def common_worker_args(model_name: str, variant: str, result: Path) -> list[str]:
    return [str(Path(__file__).resolve()), "--worker",
            "sar" if variant.startswith("sar") else "gnnscale", "--model", model_name,
            "--variant", variant, *rmat_argv(ARGS), "--hidden", str(ARGS.hidden),
            "--dropout", str(ARGS.dropout), "--warmup", str(ARGS.warmup),
            "--reps", str(ARGS.reps), "--result", str(result)]


def worker_env(extra_path: list[Path]) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", NUMBA_NUM_THREADS="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    paths = [str(p) for p in extra_path] + [p for p in env.get("PYTHONPATH", "").split(":") if p]
    env["PYTHONPATH"] = ":".join(dict.fromkeys(paths))
    return env


def run_job(model_name: str, variant: str, work: Path, round_idx: int, partitions: dict) -> dict:
    result = work / f"{model_name}_{variant}_round{round_idx}"
    for old in work.glob(result.name + ".rank*.json"):
        old.unlink()
    args = common_worker_args(model_name, variant, result)
    t = time.perf_counter()
    if variant.startswith("sar"):
        port = free_port()
        env = worker_env([SAR_DIR, ROOT])
        cmds = [[sys.executable, *args, "--rank", str(r), "--master-port", str(port),
                 "--part-config", partitions["sar"][model_name]["config"]] for r in range(2)]
        procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for cmd in cmds]
        outputs, codes = [], []
        for proc in procs:
            try:
                out, _ = proc.communicate(timeout=ARGS.timeout)
            except subprocess.TimeoutExpired:
                for p in procs:
                    p.kill()
                out, _ = proc.communicate()
            outputs.append(out)
            codes.append(proc.returncode)
        output, code = "\n".join(outputs), max(abs(c) for c in codes)
    else:
        python = Path(ARGS.gnnscale_python)
        mpirun = python.parent / "mpirun"
        cmd = [str(mpirun), "-n", "2", "--bind-to", "none", "--oversubscribe", str(python),
               *args, "--parts-file", partitions["gnnscale"]["parts_file"]]
        done = subprocess.run(cmd, cwd=ROOT, env=worker_env([ROOT]), capture_output=True,
                              text=True, timeout=ARGS.timeout)
        output, code = done.stdout + done.stderr, done.returncode
    wall = time.perf_counter() - t
    files = sorted(work.glob(result.name + ".rank*.json"))
    if code != 0 or len(files) != 2:
        print(output[-4000:], flush=True)
        return {"error": f"exit status {code}; {len(files)} rank results",
                "output_tail": output[-2000:]}
    ranks = [json.loads(f.read_text()) for f in files]
    ranks.sort(key=lambda r: r["rank"])
    steps = [max(r["step_times_s"][i] for r in ranks) for i in range(len(ranks[0]["step_times_s"]))]
    timed = steps[ARGS.warmup:]
    return {"round": round_idx, "wall_s": wall, "step_times_s": steps,
            "timed_steps_s": timed, "median_s": statistics.median(timed),
            "losses": ranks[0]["losses"], "ranks": ranks}


def dgl_partitions(data, work: Path) -> dict:
    import dgl

    from gnnscale.data import to_dgl

    base = to_dgl(data)
    out = {}
    for model_name in ARGS.models:
        graph = dgl.graph(base.edges(), num_nodes=base.num_nodes())
        if model_name == "gcn":  # GraphConv's normalisation with one self loop per node
            graph = dgl.add_self_loop(dgl.remove_self_loop(graph))
        graph.ndata["features"] = base.ndata["feat"]
        graph.ndata["labels"] = base.ndata["label"]
        for key in ("train_mask", "val_mask", "test_mask"):
            graph.ndata[key] = base.ndata[key]
        name = f"rmat{ARGS.scale}_{'self_loops' if model_name == 'gcn' else 'plain'}"
        folder = work / f"dgl_{name}"
        t = time.perf_counter()
        dgl.random.seed(ARGS.seed)
        dgl.distributed.partition_graph(graph, name, 2, str(folder), num_hops=1,
                                        part_method="metis",
                                        balance_edges=ARGS.balance == "nodes,edges")
        out[model_name] = {"config": str(folder / f"{name}.json"), "graph_edges": graph.num_edges(),
                           "time_s": time.perf_counter() - t}
        print(f"DGL METIS ({model_name} graph, {graph.num_edges():,} edges): "
              f"{out[model_name]['time_s']:.1f} s", flush=True)
        del graph
        gc.collect()
    return out


def gnnscale_partition(data, work: Path) -> dict:
    from partitioning import make_partitioner, part_summary

    t = time.perf_counter()
    partition = make_partitioner("metis", num_parts=2, seed=ARGS.seed,
                                 balance=tuple(ARGS.balance.split(","))).fit(data)
    elapsed = time.perf_counter() - t
    path = work / "gnnscale_parts.npy"
    np.save(path, partition.node_parts)
    summary = part_summary(data, partition)
    info = {"parts_file": str(path), "time_s": elapsed,
            "nodes": summary["nodes"].tolist(), "edges": summary["edges"].tolist(),
            "halo_nodes": summary["halo_nodes"].tolist(), "edge_cut": int(summary["edge_cut"])}
    print(f"gnnscale METIS: {elapsed:.1f} s; nodes {info['nodes']}, edges {info['edges']}, "
          f"halo {info['halo_nodes']}", flush=True)
    return info


def summarize(model_name: str, jobs: dict) -> dict:
    result = {}
    for variant, runs in jobs.items():
        good = [r for r in runs if "median_s" in r]
        if not good:
            result[variant] = {"error": runs[0].get("error"), "runs": runs}
            continue
        timed = [t for r in good for t in r["timed_steps_s"]]
        ranks = {}
        for r in good:
            for rank in r["ranks"]:
                entry = ranks.setdefault(rank["rank"], {"peak_rss_process_bytes": 0,
                                                        "peak_rss_training_bytes": 0,
                                                        "partition": rank["partition"]})
                for key in ("peak_rss_process_bytes", "peak_rss_training_bytes"):
                    entry[key] = max(entry[key], rank[key] or 0)
        result[variant] = {"median_s": statistics.median(timed), "min_s": min(timed),
                           "round_medians_s": [r["median_s"] for r in good],
                           "peak_rss_per_rank": [ranks[k] for k in sorted(ranks)],
                           "runs": runs}
        print(f"  {model_name} {variant:14s} median {result[variant]['median_s']:.3f} s "
              f"(rounds {[round(m, 3) for m in result[variant]['round_medians_s']]}); peak RSS "
              f"per rank {[round(r['peak_rss_process_bytes'] / 2**20) for r in ranks.values()]} "
              f"MiB (training only "
              f"{[round(r['peak_rss_training_bytes'] / 2**20) for r in ranks.values()]} MiB)",
              flush=True)
    ratios = {}
    for sar_name in ("sar", "sar_no_sr"):
        for ours in ("gnnscale", "gnnscale_bf16"):
            if "median_s" in result.get(sar_name, {}) and "median_s" in result.get(ours, {}):
                ratios[f"{sar_name}_over_{ours}"] = (result[sar_name]["median_s"]
                                                     / result[ours]["median_s"])
    return {"variants": result, "ratios_median": ratios}


def driver_main() -> None:
    import dgl

    if not (SAR_DIR / "sar" / "__init__.py").exists():
        sys.exit(f"SAR is not vendored at {SAR_DIR}")
    keep = ARGS.work_dir is not None
    work = Path(ARGS.work_dir or tempfile.mkdtemp(prefix="sar_vs_gnnscale_"))
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    data = rmat_graph(ARGS)
    print(f"{data.summary()} (generated in {time.perf_counter() - t:.1f} s); 2 ranks x 1 thread",
          flush=True)
    partitions = {}
    if any(v.startswith("gnnscale") for v in ARGS.variants):
        partitions["gnnscale"] = gnnscale_partition(data, work)
    if any(v.startswith("sar") for v in ARGS.variants):
        partitions["sar"] = dgl_partitions(data, work)
    report = {
        "benchmark": "sar_vs_gnnscale",
        "workload": {"graph": data.name, "scale": ARGS.scale, "edge_factor": ARGS.edge_factor,
                     "num_nodes": data.num_nodes, "num_edges": data.num_edges,
                     "features": ARGS.features, "classes": ARGS.classes, "hidden": ARGS.hidden,
                     "layers": 2, "dropout": ARGS.dropout,
                     "optimizer": f"Adam lr={LR} weight_decay={WEIGHT_DECAY}",
                     "train_nodes": int(data.train_mask.sum()), "seed": ARGS.seed,
                     "ranks": 2, "threads_per_rank": 1,
                     "partitioner": f"METIS, 2 parts, balance {ARGS.balance}"},
        "warmup": ARGS.warmup, "reps": ARGS.reps, "rounds": ARGS.rounds,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "numpy": np.__version__, "dgl": dgl.__version__,
                     "sar_commit": sar_commit(),
                     "gnnscale_python": ARGS.gnnscale_python},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "loadavg_start": os.getloadavg()},
        "partitions": {"gnnscale": {k: v for k, v in partitions.get("gnnscale", {}).items()
                                    if k != "parts_file"},
                       "sar": {m: {k: v for k, v in p.items() if k != "config"}
                               for m, p in partitions.get("sar", {}).items()}},
        "models": {},
    }
    del data
    gc.collect()
    if ARGS.gnnscale_python != sys.executable:
        report["versions"]["gnnscale_torch"] = subprocess.run(
            [ARGS.gnnscale_python, "-c", "import torch; print(torch.__version__)"],
            capture_output=True, text=True).stdout.strip()
    for model_name in ARGS.models:
        print(f"{model_name}:", flush=True)
        jobs = {v: [] for v in ARGS.variants}
        for round_idx in range(ARGS.rounds):
            for variant in ARGS.variants:
                run = run_job(model_name, variant, work, round_idx, partitions)
                jobs[variant].append(run)
                if "error" in run:
                    print(f"  {model_name} {variant} round {round_idx}: failed: {run['error']}",
                          flush=True)
                    continue
                print(f"  {model_name} {variant:14s} round {round_idx}: step times "
                      f"{[round(s, 3) for s in run['step_times_s']]} s; losses "
                      f"{[round(v, 4) for v in run['losses']]}", flush=True)
        report["models"][model_name] = summarize(model_name, jobs)
        print(f"  ratios (median s): {json.dumps(report['models'][model_name]['ratios_median'])}",
              flush=True)
    report["machine"]["loadavg_end"] = os.getloadavg()
    Path(ARGS.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ARGS.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {ARGS.out}" + (f"; partitions kept in {work}" if keep else ""))
    if not keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    worker_main() if ARGS.worker else driver_main()
