"""The large-graph pipeline end to end: convert -> partition -> mpirun train, time and memory.

Run from the repository root with the project's venv, one step at a time (each is heavy):

    .venv/bin/python benchmarks/large_graphs.py --step rmat24          # R-MAT 24 -> 256 parts
    .venv/bin/python benchmarks/large_graphs.py --step rmat21-prepare  # convert + METIS 4 parts
    .venv/bin/python benchmarks/large_graphs.py --step rmat21-train    # 4 ranks from the store
    .venv/bin/python benchmarks/large_graphs.py --step rmat21-inmemory # 4 ranks vs 1 process
    .venv/bin/python benchmarks/large_graphs.py --step rmat21-peers    # DGL and PyG, 1 process
    .venv/bin/python benchmarks/large_graphs.py --step rmat21-one-process  # gnnscale, 1 process

Steps:
  rmat24           `gnnscale convert` of an R-MAT scale-24 graph (16.8M nodes, about 0.5B
                   directed edges, 32 features), then `gnnscale partition` into 256 parts per
                   method (``--methods``, default ldg): wall time and peak RSS of each command
                   (GNU time), store size.
  rmat21-prepare   the products-sized graph (R-MAT 21: 2.1M nodes, about 64M directed edges,
                   100 features, 47 classes) converted; a second load timed in a fresh process
                   (and the RSS it adds); METIS into 4 parts written as a store.
  rmat21-train     `mpirun -n R gnnscale train --partitions STORE` (``--ranks R``, default 4),
                   GCN and SAGE with 3 layers of 256 (``--models``; GAT: 3 layers of
                   ``--gat-heads`` x ``--gat-hidden``): training step and evaluation time per
                   epoch (medians after the first epoch), peak RSS per rank, halo bytes per
                   epoch, and the memory plan of the same run (``planned``).
  rmat21-inmemory  `mpirun -n 4 gnnscale train --dataset CONVERTED` (every rank maps the graph,
                   rank 0 partitions) against the same run in one process: peak RSS per rank,
                   their sum, the job's peak total PSS (all its processes sampled together,
                   benchmarks/job_memory.py), and the ratios to the one-process run;
                   ``--allocator lean`` runs both with glibc's allocator defaults
                   (GNNSCALE_RETAIN_MEMORY=0; key suffix ``/lean``); GCN of ``--layers``
                   x ``--hidden`` (key suffix ``/LxH`` unless 2 x 64).
  rmat21-peers     DGL 2.1.0 and PyG (CSR adjacency) in one process on the same graph and
                   models (benchmarks/large_graph_peer.py), as installed and with the allocator
                   setting gnnscale gives itself (GLIBC_TUNABLES below).
  rmat21-one-process  `gnnscale train --dataset CONVERTED` in one process (2 threads), the
                   models of rmat21-peers: the same measurements as rmat21-train.
Results are merged into benchmarks/results/large_graphs.json under the step's name (with the
rank count and the models where they are not the defaults). ``--memory-report`` prints the
memory plan against each stored training run's peak per rank.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from job_memory import JobMemorySampler

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GLIBC_TUNABLES = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647"
RMAT21 = ["--dataset", "rmat", "--dataset-option", "scale=21", "--dataset-option",
          "num_features=100", "--dataset-option", "num_classes=47"]
RMAT24 = ["--dataset", "rmat", "--dataset-option", "scale=24", "--dataset-option",
          "num_features=32"]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory-report", action="store_true",
                        help="print the memory plan against every stored R-MAT 21 run's peak "
                             "per rank (no --step needed)")
    parser.add_argument("--step", choices=["rmat24", "rmat21-prepare",
                                                          "rmat21-train", "rmat21-inmemory",
                                                          "rmat21-peers", "rmat21-one-process"])
    parser.add_argument("--work", default="/tmp/gnnscale-large", help="scratch folder")
    parser.add_argument("--methods", nargs="+", default=["ldg"],
                        help="partitioners for the rmat24 step")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--ranks", type=int, default=4,
                        help="rmat21-prepare / rmat21-train: parts of the METIS store and ranks "
                             "training from it")
    parser.add_argument("--models", nargs="+", default=["gcn", "sage"],
                        choices=["gcn", "sage", "gat"])
    parser.add_argument("--hidden", type=int, default=256, help="hidden width (3 layers)")
    parser.add_argument("--gat-heads", type=int, default=2,
                        help="GAT's attention heads per hidden layer (its per-edge tensors "
                             "grow with them)")
    parser.add_argument("--gat-hidden", type=int, default=8, help="GAT's width per head")
    parser.add_argument("--layers", type=int, default=2,
                        help="rmat21-inmemory: GCN layers (the other steps train 3)")
    parser.add_argument("--keep", action="store_true", help="keep the rmat24 folders")
    parser.add_argument("--partitioner", default="metis", help="for the rmat21-inmemory step")
    parser.add_argument("--balance", default=None, help="balance targets (rmat21-inmemory)")
    parser.add_argument("--allocator", choices=["retain", "lean"], default="retain",
                        help="rmat21-inmemory, rmat21-train, rmat21-one-process: the "
                             "trainer's own choice (freed memory kept for reuse where the plan "
                             "says it fits) or glibc's defaults (GNNSCALE_RETAIN_MEMORY=0)")
    parser.add_argument("--memory-limit-gib", type=float, default=None,
                        help="run each command in a cgroup (v1 memory controller) with this "
                             "limit, so a run that does not fit is killed alone instead of "
                             "whatever the kernel's OOM killer picks on a shared machine")
    parser.add_argument("--libraries", nargs="+", default=["dgl", "pyg"],
                        help="peers of the rmat21-peers step")
    parser.add_argument("--timeout-s", type=float, default=None,
                        help="rmat21-peers: stop a peer's run after this many seconds")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/large_graphs.json"))
    return parser.parse_args(argv)


def env(extra=None) -> dict:
    merged = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                  PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    merged.update(extra or {})
    return merged


CGROUP = Path("/sys/fs/cgroup/memory/gnnscale-bench")


def memory_cgroup(limit_gib: float | None) -> list[str]:
    """A command prefix that moves the command into a memory-limited cgroup (if asked)."""
    if limit_gib is None:
        return []
    CGROUP.mkdir(exist_ok=True)
    (CGROUP / "memory.limit_in_bytes").write_text(str(int(limit_gib * 2**30)))
    return ["sh", "-c", f'echo $$ > {CGROUP}/cgroup.procs && exec "$@"', "sh"]


MEMORY_LIMIT_GIB = None


def _communicate(proc, timeout):
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        raise SystemExit(f"stopped after {timeout} s (--timeout-s)")


def timed(cmd: list[str], extra_env=None, sample_memory: bool = False,
          timeout: float | None = None) -> dict:
    """Run ``cmd`` under GNU time: wall seconds, peak RSS (bytes), output tail; with
    ``sample_memory`` also the job's peak total PSS and RSS over all its processes
    (``job_memory.JobMemorySampler``). Past ``timeout`` seconds the command is killed."""
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    proc = subprocess.Popen([*memory_cgroup(MEMORY_LIMIT_GIB), "/usr/bin/time", "-v", *cmd],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(extra_env), cwd=ROOT, start_new_session=True)
    sampler = JobMemorySampler(proc.pid) if sample_memory else None
    with sampler or contextlib.nullcontext():
        stdout, stderr = _communicate(proc, timeout)
    proc = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    wall = time.perf_counter() - start
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    tail = (proc.stdout + proc.stderr.split("\tCommand being timed")[0])[-3000:]
    print(tail, flush=True)
    if proc.returncode != 0:
        killed = "signal 9" in proc.stderr or proc.returncode in (137, -9)
        raise SystemExit(f"failed ({proc.returncode}{', killed: out of memory' if killed else ''})"
                         f": {' '.join(cmd)}")
    result = {"command": " ".join(cmd), "wall_s": round(wall, 2),
              "peak_rss_bytes": int(match.group(1)) * 1024 if match else None,
              "stdout_tail": proc.stdout[-1500:]}
    if sampler is not None:
        result["job_memory"] = sampler.result()
    return result


def gnnscale(*args) -> list[str]:
    return [str(BIN / "gnnscale"), *args]


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def step_rmat24(args, work: Path) -> dict:
    graph = work / "rmat24"
    result = {"graph": "R-MAT scale 24, edge factor 16, 32 features", "methods": {}}
    if not graph.exists():
        result["convert"] = timed(gnnscale("convert", *RMAT24, "--out", str(graph)))
    result["converted_bytes"] = folder_bytes(graph)
    for method in args.methods:
        store = work / f"rmat24-{method}-256"
        run = timed(gnnscale("partition", "--dataset", str(graph), "--method", method,
                             "--parts", "256", "--out", str(store), "--overwrite"))
        run["store_bytes"] = folder_bytes(store)
        result["methods"][method] = run
        if not args.keep:
            shutil.rmtree(store, ignore_errors=True)
    if not args.keep:
        shutil.rmtree(graph, ignore_errors=True)
    return result


SECOND_LOAD = """
import resource, time, json
from gnnscale.data import load_dataset
def rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * 4096
before = rss(); t = time.perf_counter()
data = load_dataset({folder!r}); line = data.summary()
print(json.dumps({{"load_s": time.perf_counter() - t, "rss_added_bytes": rss() - before,
                  "feature_bytes": int(data.x.nbytes), "summary": line}}))
"""


def step_rmat21_prepare(args, work: Path) -> dict:
    graph, store = work / "rmat21", work / f"rmat21-metis-{args.ranks}"
    result = {"convert": timed(gnnscale("convert", *RMAT21, "--out", str(graph),
                                        "--overwrite"))}
    loads = []
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", SECOND_LOAD.format(folder=str(graph))],
                              capture_output=True, text=True, env=env(), cwd=ROOT, check=True)
        loads.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    result["second_load"] = loads
    print(json.dumps(loads, indent=1), flush=True)
    result["partition"] = timed(gnnscale("partition", "--dataset", str(graph), "--method",
                                         "metis", "--parts", str(args.ranks), "--out",
                                         str(store), "--overwrite"))
    return result


def train_run(nprocs: int | None, source: list[str], model: str, epochs: int, out: Path,
              layers: int = 3, hidden: int = 256, sample_memory: bool = False,
              extra_env=None, heads: int | None = None) -> dict:
    cmd = gnnscale("train", *source, "--model", model, "--layers", str(layers), "--hidden",
                   str(hidden), *(["--heads", str(heads)] if heads else []),
                   "--epochs", str(epochs), "--metrics-out", str(out),
                   "--no-progress", "--log-every", "1")
    if MEMORY_LIMIT_GIB is not None:  # the cgroup stops a run that does not fit, not the plan
        cmd.append("--ignore-memory-plan")
    if nprocs:
        cmd = [str(BIN / "mpirun"), "-n", str(nprocs), "--oversubscribe", *cmd]
    run = timed(cmd, extra_env=extra_env, sample_memory=sample_memory)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    epochs_ = [r for r in records if "summary" not in r]
    summary = [r for r in records if r.get("summary")][-1]
    later = epochs_[1:] or epochs_
    evaluation = [r["time"].get("eval_s", 0.0) for r in later]
    run.update({
        "epoch_s_median": statistics.median(r["epoch_time_s"] for r in later),
        "evaluation_s_median": statistics.median(evaluation),
        "training_step_s_median": statistics.median(r["epoch_time_s"] - e
                                                    for r, e in zip(later, evaluation)),
        "losses": [r["loss"] for r in epochs_],
        "halo_bytes_sent_per_epoch": epochs_[-1]["halo_bytes_sent"],
        "per_rank": summary.get("per_rank"),
    })
    return run


def model_of(args, model: str) -> dict:
    """The layers, width and heads a model trains with: GCN and SAGE 3 x ``--hidden``; GAT
    3 layers of ``--gat-heads`` x ``--gat-hidden``."""
    if model == "gat":
        return {"layers": 3, "hidden": args.gat_hidden, "heads": args.gat_heads}
    return {"layers": 3, "hidden": args.hidden, "heads": None}


def planned_memory(model: str, shape: dict, ranks: int, store: Path | None,
                   graph: Path | None) -> dict:
    """The memory plan's per-rank peak (both allocator modes) and the phase that sets it, as
    ``gnnscale train`` plans the same run: from the store's manifest, or (one process) from
    the converted graph's sizes."""
    from gnnscale.cli.memory_check import plan_for_store
    from planning.cost_model import ModelSpec
    from planning.memory_plan import DatasetShape, balanced_workload, plan_memory

    if store is not None:
        plan = plan_for_store(store, ranks, {"model": model, "layers": shape["layers"],
                                             "hidden": shape["hidden"],
                                             "heads": shape["heads"] or 8, "out_heads": 1})
    else:
        from gnnscale.data.converted import open_converted

        data = open_converted(graph)
        sizes = DatasetShape.of(data, "converted")
        spec = ModelSpec.build(model, sizes.num_features, shape["hidden"], sizes.num_classes,
                               shape["layers"], heads=shape["heads"] or 8, out_heads=1)
        plan = plan_memory(sizes, spec, balanced_workload(sizes, 1), mode="in-memory")
    return {"lean_bytes": [float(b) for b in plan["per_rank_peak"]],
            "retained_bytes": [float(b) for b in plan["per_rank_peak_retained"]],
            "phase": plan["per_rank_phase"]}


def allocator_env(args) -> dict | None:
    return {"GNNSCALE_RETAIN_MEMORY": "0"} if args.allocator == "lean" else None


def train_models(args, nprocs: int | None, source: list[str], out_prefix: Path,
                 store: Path | None = None, graph: Path | None = None) -> dict:
    """``train_run`` of each of ``--models`` (:func:`model_of`, ``--epochs``) with the memory
    plan of the same run; a run that fails (e.g. killed for memory) is recorded with its
    error."""
    result = {"layers": 3, "hidden": args.hidden, "epochs": args.epochs,
              "allocator": args.allocator}
    for model in args.models:
        shape = model_of(args, model)
        try:
            result[model] = train_run(nprocs, source, model, args.epochs,
                                      Path(f"{out_prefix}-{model}.jsonl"),
                                      layers=shape["layers"], hidden=shape["hidden"],
                                      heads=shape["heads"], extra_env=allocator_env(args))
        except SystemExit as exc:
            result[model] = {"error": str(exc)}
        result[model].update(model=shape, planned=planned_memory(model, shape, nprocs or 1,
                                                                   store, graph))
    return result


def step_rmat21_train(args, work: Path) -> dict:
    store = work / f"rmat21-metis-{args.ranks}"
    return {**train_models(args, args.ranks, ["--partitions", str(store)], work / "train",
                           store=store),
            "memory_limit_gib": args.memory_limit_gib}


def step_rmat21_one_process(args, work: Path) -> dict:
    return train_models(args, None, ["--dataset", str(work / "rmat21")], work / "one",
                        graph=work / "rmat21")


def step_rmat21_inmemory(args, work: Path) -> dict:
    graph = work / "rmat21"
    balance = ["--balance", args.balance] if args.balance else []
    allocator = allocator_env(args)
    runs = {"ranks_4": train_run(4, ["--dataset", str(graph), "--partitioner",
                                     args.partitioner, *balance], "gcn", 2, work / "mem4.jsonl",
                                 layers=args.layers, hidden=args.hidden, sample_memory=True,
                                 extra_env=allocator),
            "one_process": train_run(None, ["--dataset", str(graph)], "gcn", 2,
                                     work / "mem1.jsonl", layers=args.layers,
                                     hidden=args.hidden, sample_memory=True,
                                     extra_env=allocator)}
    one = runs["one_process"]["peak_rss_bytes"]
    ranks = [r["peak_rss_mb"] * 2**20 for r in runs["ranks_4"]["per_rank"]]
    runs["config"] = {"model": "gcn", "layers": args.layers, "hidden": args.hidden,
                      "partitioner": args.partitioner, "balance": args.balance,
                      "allocator": args.allocator}
    job = {name: runs[name]["job_memory"]["peak_total_pss_bytes"]
           for name in ("ranks_4", "one_process")}
    runs["ratios"] = {"max_rank_over_one_process": max(ranks) / one,
                      "sum_over_one_process": sum(ranks) / one,
                      "job_pss_over_one_process": job["ranks_4"] / job["one_process"]}
    print(json.dumps(runs["ratios"]), flush=True)
    return runs


def dgl_python() -> str:
    """The python of the DGL environment (``make dgl-env`` builds it)."""
    return subprocess.run(["make", "-s", "dgl-env-path"], capture_output=True, text=True,
                          cwd=ROOT, check=True).stdout.strip() + "/bin/python"


def step_rmat21_peers(args, work: Path) -> dict:
    graph = work / "rmat21"
    result = {"layers": 3, "hidden": args.hidden}
    for library, python in (("dgl", dgl_python()), ("pyg", sys.executable)):
        if library not in args.libraries:
            continue
        for allocator, extra in (("as_installed", {}),
                                 ("tuned_allocator", {"GLIBC_TUNABLES": GLIBC_TUNABLES})):
            for model in args.models:
                key = f"{library}/{allocator}/{model}"
                try:
                    run = timed([python, str(ROOT / "benchmarks/large_graph_peer.py"),
                                 "--library", library, "--model", model, "--dataset",
                                 str(graph), "--hidden", str(args.hidden)],
                                extra_env={"PYTHONPATH": str(ROOT), **extra},
                                timeout=args.timeout_s)
                    lines = [ln for ln in run["stdout_tail"].splitlines() if ln.startswith("{")]
                    run.update(json.loads(lines[-1]))
                except SystemExit as exc:
                    run = {"error": str(exc)}
                result[key] = run
    return result


def result_key(args) -> str:
    """Where a step's result goes in the JSON (a step run with other options keeps its own)."""
    if args.step == "rmat21-inmemory":
        return (f"{args.step}/{args.partitioner}/{args.balance or 'nodes'}"
                + ("/lean" if args.allocator == "lean" else "")
                + ("" if (args.layers, args.hidden) == (2, 64)
                   else f"/{args.layers}x{args.hidden}"))
    key = args.step
    if args.step in ("rmat21-prepare", "rmat21-train") and args.ranks != 4:
        key += f"/{args.ranks} ranks"
    if args.step in ("rmat21-train", "rmat21-one-process") and args.models != ["gcn", "sage"]:
        key += "/" + "+".join(args.models)
    return key


def memory_report(args, work: Path) -> None:
    """Plan vs measured peak per rank of every stored R-MAT 21 training run from a store or in
    one process (the plan recomputed with the current code where the store is in ``--work``),
    as the table of docs/planning.md."""
    out = Path(args.out)
    report = json.loads(out.read_text())
    rows, errors = [], []
    for key, entry in report.items():
        if not key.startswith(("rmat21-train", "rmat21-one-process")) or "(" in key:
            continue
        lean = "glibc defaults" in str(entry.get("allocator")) or entry.get("allocator") == "lean"
        for model in ("gcn", "sage", "gat"):
            run = entry.get(model)
            if not run or "per_rank" not in run:
                continue
            ranks = len(run["per_rank"])
            store = work / f"rmat21-metis-{ranks}" if ranks > 1 else None
            shape = run.get("model") or {"layers": entry.get("layers", 3),
                                          "hidden": entry.get("hidden", 256), "heads": None}
            if store is None or store.exists():
                run["planned"] = planned_memory(model, shape, ranks, store, work / "rmat21")
            if "planned" not in run:
                continue
            measured = [r["peak_rss_mb"] * 2**20 for r in run["per_rank"]]
            planned = run["planned"]["lean_bytes" if lean else "retained_bytes"]
            error = [p / m - 1 for p, m in zip(planned, measured)]
            errors += error
            width = (f"{shape['heads']} heads x {shape['hidden']}" if shape.get("heads")
                     else f"{shape['layers']} x {shape['hidden']}")
            rows.append(f"| {model.upper()} {width} | {ranks} | "
                        f"{'lean' if lean else 'retain'} | "
                        + ", ".join(f"{p / 2**30:.2f} / {m / 2**30:.2f}"
                                    for p, m in zip(planned, measured))
                        + " | " + ", ".join(f"{100 * e:+.0f}%" for e in error) + " |")
    out.write_text(json.dumps(report, indent=1))
    print("| model | ranks | allocator | planned / measured per rank (GiB) | error per rank |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    if errors:
        within = sum(abs(e) <= 0.2 for e in errors)
        print(f"{within} of {len(errors)} rank peaks within 20%, largest "
              f"{100 * max(map(abs, errors)):.1f}%")


def main() -> None:
    global MEMORY_LIMIT_GIB
    args = parse_args()
    if args.memory_report:
        return memory_report(args, Path(args.work))
    if args.step is None:
        raise SystemExit("large_graphs.py: give --step STEP or --memory-report")
    MEMORY_LIMIT_GIB = args.memory_limit_gib
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    step = {"rmat24": step_rmat24, "rmat21-prepare": step_rmat21_prepare,
            "rmat21-train": step_rmat21_train, "rmat21-inmemory": step_rmat21_inmemory,
            "rmat21-peers": step_rmat21_peers,
            "rmat21-one-process": step_rmat21_one_process}[args.step]
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result = step(args, work)
    result.update(started=started, loadavg_end=os.getloadavg(), cpus=os.cpu_count())
    out = Path(args.out)
    report = json.loads(out.read_text()) if out.exists() else {"benchmark": "large_graphs"}
    key = result_key(args)
    report[key] = result
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(f"wrote {out} [{key}]")


if __name__ == "__main__":
    main()
