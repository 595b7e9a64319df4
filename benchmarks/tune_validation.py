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

``--vcluster RATES`` runs each (dataset, model, partitioner) on two hosts of a
:class:`gnnscale.testing.cluster.VirtualCluster` instead (one rank per host, each pinned to
a core of its own, one thread), over real TCP links shaped to each rate in turn (``none``:
unshaped; ``10gbit``, ``1gbit``, ``100mbit``, ...): the job asks the driver for each rate
before training on it (a file handshake), so graph, partition and constants are made once.
Besides the step and evaluation medians a cell records the bytes the link of ``node0`` carried
per epoch (``ip -s link`` deltas) and rank 0's halo bytes per step (gnnscale's counters), its
exposed halo wait and so the fraction of the exchange hidden (``1 - wait / wire time``, the
wire time being the halo bytes over the rate plus a latency per exchange). Predicted: the
same partition on ``Cluster(ranks_per_host=1, cores_per_rank=1, network=...)`` with the
latency link_probe measures across the bridge and the TCP payload the rate carries (1448 of
every 1514 bytes ``tbf`` counts; the probe's throughput for ``none``), and the work per byte
exchanged between the hosts that the job measures at the rate (``exchange_byte_s``, in a phase
before the rate's turns; where the rate is too slow for the measure, the job's calibration's, on
the unshaped link). Results go to ``benchmarks/results/tune_validation_vcluster.json``::

    flock /tmp/gnnscale-bench.lock python benchmarks/tune_validation.py \
        --vcluster none 10gbit 1gbit 100mbit --datasets SNAP-ca-astroph rmat-18 \
        --models gcn sage --methods metis kaminpar libra random --epochs 3 --rounds 3 \
        --runs 0 1 2 --methods-in-one-job

``--methods-in-one-job`` trains every partitioner of a (dataset, model) in one job with one
set of constants, as ``tune`` compares them: at each rate the partitions take turns of
``--epochs`` epochs (the first of a turn not counted), ``--rounds`` rounds, the order rotating,
so that the host's speed, which drifts within seconds on a shared machine, weighs on each
alike. Without it each partitioner has a job (and constants) of its own. Every cell is also
predicted with its run's host constants (``pooled_*``: the median of each constant over the
run's jobs, :mod:`_host_constants`), and the report checks the predicted order on the pairs of
partitioners that every run orders alike.

``--halo-dtypes float32 int8 int4`` measures each rate with each halo dtype in turn (the
rows on the wire quantized as ``train --halo-dtype`` sends them), predicted with
``predict(halo=HaloOptions(dtype))``; the quantized halos' check::

    flock /tmp/gnnscale-bench.lock python benchmarks/tune_validation.py \
        --vcluster 1gbit 100mbit --halo-dtypes float32 int8 int4 --datasets rmat-18 \
        --methods metis random --epochs 6 --runs 0 1 --out benchmarks/results/quantized_links.json

A cell also records the host's load average when its job started and ended (the host may be
shared). ``--report`` on such a file prints its own table (step, evaluation, hidden fraction,
bytes, runs and load per cell; order agreement per dataset, model and rate; the median errors
over the cells started on a quiet host). ``--report --pool OTHER.json ...`` joins the runs of
other sweeps of the same configuration to ``--out``'s, so that a pair of partitioners counts
as resolved only where the runs of every sweep, made on other days, order it alike.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _host_constants import pool_sweeps, pooled_constants, resolved_orders  # noqa: E402
from _workload import training_step_s  # noqa: E402

DATA_ROOT = REPO / "datasets"  # the datasets shipped with the repository
NETWORKS = ("real", "100,1", "50,10")


def load(name: str):
    """``rmat-S``: R-MAT scale S with 128 random features, 16 classes; else a folder under the
    repository's datasets/, or a dataset name: shipped, or downloaded into the data root
    (``$GNNSCALE_DATA_ROOT``, else the checkout's ``data/``; ``gnnscale datasets download
    amazon0601``)."""
    from gnnscale.data import load_dataset
    from gnnscale.data.load import find_dataset

    if name.startswith("rmat-"):
        return load_dataset("rmat", scale=int(name[5:]), num_features=128, num_classes=16,
                            seed=0)
    path = DATA_ROOT / name
    if path.exists():
        return load_dataset(str(path), root=str(DATA_ROOT))
    downloaded = os.environ.get("GNNSCALE_DATA_ROOT") or str(REPO / "data")
    return load_dataset(name, root=downloaded if find_dataset(name, downloaded) else
                        str(DATA_ROOT))


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

    vcluster = args.vcluster_dir is not None
    threads = 1 if vcluster else default_threads()
    torch.set_num_threads(threads)
    comm = init()
    cores = sorted(os.sched_getaffinity(0))
    if vcluster and len(cores) > 1:  # each host's rank on a core of its own, as on separate
        os.sched_setaffinity(0, {cores[comm.rank % len(cores)]})  # machines (the cluster's
        # cores_per_host pins each host to its own already)
    data = load(args.datasets[0])
    from planning.workload import part_workload

    jobs = {}  # method -> (problem, rank 0's workload): every --methods partition in one job
    for method in args.methods:
        partition = make_partitioner(method, num_parts=comm.size, seed=0).fit(data) \
            if comm.rank == 0 else None
        workload = part_workload(data, partition) if comm.rank == 0 else None
        if method in ("libra", "hdrf") and comm.size > 1:
            problem = broadcast_vertex_cut_problem(data, partition, comm)
        else:
            parts = torch.from_numpy(partition.node_parts.astype(np.int64)) \
                if comm.rank == 0 else torch.empty(data.num_nodes, dtype=torch.int64)
            problem = LocalProblem.from_graph_data(
                data, comm.broadcast(parts, root=0).numpy(), comm)
        jobs[method] = problem, workload
    from gnnscale.cli.calibrate import calibrate_in_job, exchange_byte_work, job_fixed_costs
    from gnnscale.graph.quantize import WIRE_FORMATS

    costs = calibrate_in_job(comm, threads, model=args.models[0])
    in_job = costs.to_dict()
    hosts = comm.allgather_object(socket.gethostname())
    link_work = {}  # vc:RATE -> exchange_byte_s measured at that rate
    # the fixed costs a GCN's tiny steps give, for comparison with the job's model's
    gcn_fixed = [costs.layer_overhead_s, costs.exchange_overhead_s] \
        if args.models[0] == "gcn" else \
        list(job_fixed_costs(comm, costs, threads, os.cpu_count() or 1, "gcn"))
    rows = []
    index = 0
    for net, dtype in [(n, d) for n in args.networks for d in args.halo_dtypes]:
        if vcluster and net not in link_work:
            _ask_driver(args.vcluster_dir, index, f"{net} {LINK_WORK}", comm)
            index += 1
            link_work[net] = exchange_byte_work(comm, hosts, megabytes=link_work_megabytes(net),
                                                repeats=15) \
                if len(set(hosts)) > 1 else costs.exchange_byte_s
        simulated = None if vcluster else network_of(net)
        trainers, records = {}, {m: [] for m in args.methods}
        for method, (problem, _) in jobs.items():
            plan = problem.graph.halo_plan
            plan.configure(message_dtype=WIRE_FORMATS.get(dtype) or getattr(torch, dtype),
                           quantize_seed=0)
            plan.comm = plan.comm if simulated is None else SlowNetwork(plan.comm, *simulated)
            torch.manual_seed(0)
            model = GNN(args.models[0], data.num_features, args.hidden, data.num_classes,
                        num_layers=2)
            trainers[method] = Trainer(model, problem, comm, seed=0)
        # the partitions take turns of --epochs epochs (the order rotating each round), so
        # that the host's speed, which drifts within seconds on a shared machine, weighs on
        # each alike; a turn's first epoch is not counted (the trainer's first, or the first
        # after the link idled, whose shaping bucket passes a burst at full speed)
        for turn in range(args.rounds):
            shift = turn % len(args.methods)
            for method in args.methods[shift:] + args.methods[:shift]:
                if vcluster:
                    _ask_driver(args.vcluster_dir, index, f"{net} {method}", comm)
                else:
                    comm.barrier()
                index += 1
                records[method] += [trainers[method].run_epoch()
                                    for _ in range(args.epochs)][1:]
        for method, (problem, _) in jobs.items():
            plan = problem.graph.halo_plan
            if isinstance(plan.comm, SlowNetwork):
                plan.comm = plan.comm.inner
            kept = records[method]
            steps = [training_step_s(r.time) for r in kept]
            rows.append({"network": net, "halo_dtype": dtype, "method": method,
                         "measured_step_s": float(np.median(steps)),
                         "measured_eval_s": float(np.median([r.time["eval_s"] for r in kept])),
                         "steps_s": steps, "evals_s": [r.time["eval_s"] for r in kept],
                         "measured_parts_s": {k: float(np.median([r.time[k] for r in kept]))
                                              for k in ("forward_s", "backward_s",
                                                        "optimizer_s", "grad_allreduce_s")},
                         "halo_wait_s": float(np.median([r.time["halo_wait_s"]
                                                         for r in kept])),
                         "halo_bytes_sent": int(np.median([r.halo_bytes_sent for r in kept])),
                         "epochs": args.rounds * args.epochs})
    if vcluster:
        _ask_driver(args.vcluster_dir, len(phases_of(args)), "end", comm)
    if comm.rank == 0:
        result_shape = {"num_features": data.num_features, "num_classes": data.num_classes}
        workloads = {m: {k: v.tolist() if isinstance(v, np.ndarray) else v
                         for k, v in work.items()} for m, (_, work) in jobs.items()}
        print("RESULT " + json.dumps({"rows": rows, "in_job_cost_model": in_job,
                                      "gcn_fixed_costs": gcn_fixed,
                                      "link_work": link_work,
                                      "workloads": workloads,
                                      "shape": result_shape}), flush=True)


def phases_of(args) -> list[tuple[str, str, str]]:
    """The job's phases, in order, one per turn: every ``--networks`` value with every
    ``--halo-dtypes``, and within it ``--rounds`` rounds in which every ``--methods``
    partition trains ``--epochs`` epochs, the order rotating by one each round:
    ``(network, halo dtype, method)``."""
    out = []
    for net in args.networks:
        out.append((net, "", LINK_WORK))  # the work per byte exchanged at the rate
        for dtype in args.halo_dtypes:
            for turn in range(args.rounds):
                shift = turn % len(args.methods)
                out += [(net, dtype, m) for m in args.methods[shift:] + args.methods[:shift]]
    return out


#: the phase in which a job measures ``exchange_byte_s`` at a network's rate
LINK_WORK = "link-work"


def link_work_megabytes(net: str) -> float:
    """Megabytes a rank sends when ``exchange_byte_s`` is measured at a ``vc:RATE``: 4, or
    what crosses the link in 8 ms where that is less, so that the exchange stays hidden behind
    the measure's aggregation (some 20 ms) and only its work shows, not a wait. Shaped links
    take more work per byte than the unshaped one (the shaping's timers and smaller packets
    keep interrupting the rank's core while the exchange travels: docs/planning.md). The rate
    is known here; ``calibrate_in_job`` times the link instead
    (:func:`gnnscale.cli.calibrate.exchange_work_megabytes`)."""
    from gnnscale.cli.calibrate import EXCHANGE_WORK_MEGABYTES as full
    from gnnscale.testing.cluster import parse_rate

    rate = net[3:]
    return full if rate == "none" else min(full, parse_rate(rate) / 8 * 0.008 / 2**20)


def _ask_driver(folder: str, index: int, net: str, comm) -> None:
    """Collective (``--vcluster``): rank 0 asks the driver for phase ``index``'s link rate
    (``want-INDEX`` holding ``net``) and waits until it is set (``go-INDEX``)."""
    if comm.rank == 0:
        want, go = Path(folder) / f"want-{index}", Path(folder) / f"go-{index}"
        want.with_suffix(".tmp").write_text(net)
        want.with_suffix(".tmp").rename(want)
        deadline = time.monotonic() + 120
        while not go.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the driver did not set {net} within 120 s")
            time.sleep(0.02)
    comm.barrier()


class Shape:
    """Feature and class counts of the graph a job trained on."""

    def __init__(self, values: dict):
        self.num_features, self.num_classes = values["num_features"], values["num_classes"]


def predict_cells(data, workload: dict, ranks: int, networks, args,
                  in_job: dict, model: str = "gcn", links: dict | None = None) -> list[dict]:
    """Predictions with the constants measured in the job (``predicted_*``) and with
    ``--cost-model``'s (``file_predicted_*``), both with the ranks sharing ``--host-cores``;
    a ``vc:RATE`` network is two hosts of one rank and one core each, on ``links[network]``
    (``latency_s``, ``bandwidth_Bps``). ``networks``: names, or (name, halo dtype) phases."""
    from planning.cost_model import Cluster, CostModel, ModelSpec, Network, predict
    from planning.halo_wire import HaloOptions

    costs = CostModel.load(args.cost_model) if args.cost_model else CostModel()
    measured_here = CostModel.from_dict(in_job)
    spec = ModelSpec.build(model, data.num_features, args.hidden, data.num_classes)
    work = {k: np.asarray(v) if isinstance(v, list) else v for k, v in workload.items()}
    threads = max(1, args.host_cores // ranks)
    out = []
    for net, dtype in [(n, "float32") if isinstance(n, str) else n for n in networks]:
        if net.startswith("vc:"):
            link = links[net]
            crowded = Cluster(ranks_per_host=1, cores_per_rank=1, host_cores=1,
                              network=Network(link["latency_s"], link["bandwidth_Bps"]))
        else:
            simulated = network_of(net)
            network = None if simulated is None else Network(*simulated)
            crowded = Cluster(ranks_per_host=ranks, cores_per_rank=threads,
                              host_cores=args.host_cores, simulated=simulated is not None,
                              network=network)
        halo = HaloOptions(dtype=dtype)
        pred = predict(work, spec, crowded, measured_here, halo)
        from_file = predict(work, spec, crowded, costs, halo)
        out.append({"network": net, "halo_dtype": dtype, "predicted_step_s": pred["step_s"],
                    "predicted_eval_s": pred["eval_s"], "bound": pred["bound"],
                    "predicted_exchange_s": pred["exchange_s"],
                    "predicted_exchange_exposed_s": pred["exchange_exposed_s"],
                    "predicted_halo_bytes_step": pred["halo_bytes_step"],
                    "predicted_exchanges_step": pred["exchanges_step"],
                    "file_predicted_step_s": from_file["step_s"],
                    "file_predicted_eval_s": from_file["eval_s"]})
    return out


def run_cell(dataset: str, method: str, ranks: int, args, run: int = 0) -> list[dict]:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMP_NUM_THREADS": "1", "PATH": f"{Path(sys.prefix) / 'bin'}:{os.environ['PATH']}"}
    networks = args.networks if ranks > 1 else ["real"]
    phases = [(net, dtype) for net in networks for dtype in args.halo_dtypes]
    cmd = [str(Path(sys.prefix) / "bin" / "mpirun"), "-n", str(ranks), "--oversubscribe",
           sys.executable, __file__, "--rank-main", "--datasets", dataset, "--methods", method,
           "--epochs", str(args.epochs), "--hidden", str(args.hidden), "--networks", *networks,
           "--halo-dtypes", *args.halo_dtypes]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    measured = result["rows"]
    workload = result["workloads"][method]
    predicted = predict_cells(Shape(result["shape"]), workload, ranks, phases,
                              args, result["in_job_cost_model"])
    wall = time.perf_counter() - t0
    return [{"dataset": dataset, "method": method, "ranks": ranks, "hidden": args.hidden,
             "run": run, "calibration": "ranks with their own cores at once",
             **m, **p, "wall_s": wall,
             "in_job_cost_model": result["in_job_cost_model"], "workload": workload,
             "shape": result["shape"]}
            for m, p in zip(measured, predicted)]


VCLUSTER_OUT = "benchmarks/results/tune_validation_vcluster.json"


def model_bandwidth(link: dict) -> float:
    """Bytes/s of payload the model is given for a ``vc:RATE`` link: the probe's throughput
    unshaped, else the shaping rate's share that carries TCP payload
    (:func:`gnnscale.testing.cluster.tcp_payload_share`: ``tbf`` counts the headers too)."""
    from gnnscale.testing.cluster import parse_rate, tcp_payload_share

    if link["rate"] == "none":
        return link["probe_Bps"]
    return parse_rate(link["rate"]) / 8 * tcp_payload_share()


def probe_links(cluster, rates: list) -> dict:
    """``vc:RATE`` -> the link the model is given: latency from link_probe's ping-pong across
    the bridge (unshaped), bandwidth from the shaping (:func:`model_bandwidth`; the probe's
    own for ``none``), and the probe's throughput at that rate (``probe_Bps``)."""
    from gnnscale.testing.cluster import parse_rate
    from gnnscale.testing.link_probe import measure

    links = {}
    for host in cluster.hosts:
        cluster.set_rate(host.name, None)
    base = measure(cluster, pings=400, megabytes=256)
    for rate in rates:
        bits = None if rate == "none" else parse_rate(rate)
        for host in cluster.hosts:
            cluster.set_rate(host.name, bits)
        probed = base if bits is None else measure(
            cluster, pings=50, megabytes=max(4.0, min(256.0, bits / 8 / 2**20 * 2)))
        link = {"latency_s": base["latency_s"], "probe_Bps": probed["bandwidth_Bps"],
                "probe_latency_s": probed["latency_s"], "rate": rate}
        links[f"vc:{rate}"] = {**link, "bandwidth_Bps": model_bandwidth(link)}
    for host in cluster.hosts:
        cluster.set_rate(host.name, None)
    return links


def run_vcluster_cell(cluster, links: dict, dataset: str, model: str, methods: list, args,
                      run: int = 0) -> list[dict]:
    """One job of (dataset, model) on the cluster's two hosts: at each link rate, each of
    ``methods``' partitions training ``--epochs`` epochs in turn, ``--rounds`` times
    (:func:`phases_of`), with one set of constants; the link's bytes are counted per turn and
    summed per partition."""
    import shutil
    import signal
    import tempfile

    from gnnscale.testing.cluster import parse_rate

    nets = list(links)
    phases = phases_of(argparse.Namespace(networks=nets, halo_dtypes=args.halo_dtypes,
                                          rounds=args.rounds, methods=list(methods)))
    label = f"{dataset} {model} {'+'.join(methods)}"
    folder = Path(tempfile.mkdtemp(prefix="gnnscale-vc-bench-"))
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
           "PATH": f"{Path(sys.prefix) / 'bin'}:{os.environ['PATH']}"}
    argv = cluster.mpirun_argv(1, env=env) + [
        sys.executable, __file__, "--rank-main", "--datasets", dataset, "--methods", *methods,
        "--models", model, "--epochs", str(args.epochs), "--rounds", str(args.rounds),
        "--hidden", str(args.hidden),
        "--vcluster-dir", str(folder), "--networks", *nets, "--halo-dtypes", *args.halo_dtypes]
    for host in cluster.hosts:  # the job measures its constants on the unshaped link
        cluster.set_rate(host.name, None)
    t0 = time.perf_counter()
    load_before = os.getloadavg()
    wire = []
    with (folder / "out").open("w") as out, (folder / "err").open("w") as err:
        job = cluster.popen("node0", argv, cwd=REPO, env=env, stdout=out, stderr=err)
        index, start, current = 0, None, None
        try:
            while job.poll() is None:
                if time.perf_counter() - t0 > args.cell_timeout:
                    os.killpg(job.pid, signal.SIGKILL)
                    job.wait()
                    raise RuntimeError(f"{label}: over {args.cell_timeout} s")
                if not (folder / f"want-{index}").exists():
                    time.sleep(0.02)
                    continue
                now = cluster.link_bytes("node0")
                if start is not None:
                    wire.append((now[0] - start[0], now[1] - start[1]))
                if index < len(phases) and links[phases[index][0]]["rate"] != current:
                    current = links[phases[index][0]]["rate"]
                    for host in cluster.hosts:
                        cluster.set_rate(host.name,
                                         None if current == "none" else parse_rate(current))
                start = cluster.link_bytes("node0")
                (folder / f"go-{index}").write_text("")
                index += 1
        finally:
            for host in cluster.hosts:
                cluster.set_rate(host.name, None)
            cluster.kill_jobs()
    text = (folder / "out").read_text()
    if job.returncode != 0 or "RESULT " not in text:
        detail = ((folder / "err").read_text() + text)[-3000:]
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"{label} failed ({job.returncode}):\n{detail}")
    shutil.rmtree(folder, ignore_errors=True)
    result = json.loads(next(x for x in text.splitlines() if x.startswith("RESULT "))[7:])
    link_work = result.get("link_work", {})
    predicted = [predict_cells(Shape(result["shape"]), result["workloads"][m["method"]], 2,
                               [(m["network"], m["halo_dtype"])], args,
                               with_link_work(result["in_job_cost_model"],
                                              link_work.get(m["network"])), model, links)[0]
                 for m in result["rows"]]
    on_link = {}
    for phase, (tx, rx) in zip(phases, wire):
        total = on_link.setdefault(phase, [0, 0])
        total[0], total[1] = total[0] + tx, total[1] + rx
    wall = time.perf_counter() - t0
    load_after = os.getloadavg()
    rows = []
    for m, p in zip(result["rows"], predicted):
        tx, rx = on_link[(m["network"], m["halo_dtype"], m["method"])]
        link = links[m["network"]]
        epochs = m["epochs"]
        wire_s = m["halo_bytes_sent"] / link["bandwidth_Bps"] + \
            p["predicted_exchanges_step"] * link["latency_s"]
        rows.append({"dataset": dataset, "model": model, "ranks": 2,
                     "hidden": args.hidden, "run": run, "link": link,
                     "calibration": "ranks with their own cores at once",
                     "methods_in_job": list(methods), **m, **p,
                     "wire_tx_bytes_epoch": tx / epochs, "wire_rx_bytes_epoch": rx / epochs,
                     "measured_hidden": max(0.0, 1 - m["halo_wait_s"] / wire_s)
                     if wire_s > 0 else None,
                     "predicted_hidden": predicted_hidden(p),
                     "wall_s": wall, "load_average": {"before": load_before,
                                                      "after": load_after},
                     "in_job_cost_model": result["in_job_cost_model"],
                     "gcn_fixed_costs": result.get("gcn_fixed_costs"),
                     "link_work_byte_s": link_work.get(m["network"]),
                     "workload": result["workloads"][m["method"]], "shape": result["shape"]})
    return rows


def run_vcluster(args) -> None:
    """Every (dataset, model, method) at every ``--vcluster`` rate on a 2-host cluster."""
    from gnnscale.testing.cluster import VirtualCluster

    out = Path(args.out)
    result = json.loads(out.read_text()) if out.exists() else {"cells": []}
    result["cost_model"] = args.cost_model
    with VirtualCluster(hosts=2, cores_per_host=1, name=f"tv{os.getpid()}") as cluster:
        links = probe_links(cluster, args.vcluster)
        print("links: " + json.dumps(links), flush=True)
        for run in args.runs:
            for dataset in args.datasets:
                for model in args.models:
                    groups = [args.methods] if args.methods_in_one_job else \
                        [[m] for m in args.methods]
                    for methods in groups:
                        try:
                            rows = run_vcluster_cell(cluster, links, dataset, model, methods,
                                                     args, run)
                        except RuntimeError as error:  # the others still run; said here
                            print(f"{dataset} {model} {'+'.join(methods)} run {run}: not "
                                  f"measured: {error}", flush=True)
                            continue
                        for row in rows:
                            print(f"{dataset} {model} {row['method']} {row['network']} "
                                  f"{row['halo_dtype']} run {run}: "
                                  f"step {row['predicted_step_s'] * 1e3:.2f} / "
                                  f"{row['measured_step_s'] * 1e3:.2f} ms, eval "
                                  f"{row['predicted_eval_s'] * 1e3:.2f} / "
                                  f"{row['measured_eval_s'] * 1e3:.2f} ms, hidden "
                                  f"{row['predicted_hidden'] or 0:.2f} / "
                                  f"{row['measured_hidden'] or 0:.2f}, wire "
                                  f"{row['wire_tx_bytes_epoch'] / 1e6:.2f} MB/epoch, halo "
                                  f"{row['halo_bytes_sent'] / 1e6:.2f} / "
                                  f"{float(np.max(row['predicted_halo_bytes_step'])) / 1e6:.2f}"
                                  f" MB/step ({row['wall_s']:.0f} s)", flush=True)
                        keys = {cell_key(r) for r in rows}
                        result["cells"] = [c for c in result["cells"]
                                           if cell_key(c) not in keys] + rows
                        out.write_text(json.dumps(result, indent=1, default=_json_default))
                        del rows
    add_pooled_predictions(result, args)
    out.write_text(json.dumps(result, indent=1, default=_json_default))


def _json_default(value):
    from planning.tune import _json_default as plain

    return plain(value)


def _bytes_size(text: str) -> int:
    """``512K``, ``2M``, ``1048576`` -> bytes (argparse type)."""
    from gnnscale.cli.calibrate import size_bytes

    try:
        value = size_bytes(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r} (e.g. 512K, 2M)")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a size must be positive, got {text!r}")
    return value


def _noise_rate(text: str) -> float:
    """``--noise``: a finite number of seconds, at least 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r} (e.g. 2e-4)") \
            from None
    if not np.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"a noise rate must be finite and >= 0, got {text!r}")
    return value


def repredict(path: Path, args) -> None:
    """Predictions of every stored cell recomputed from its workload and in-job constants
    (where these lack the core's own cache, ``--private-cache``'s is recorded and used; where
    they lack the noise rate, ``--noise``'s)."""
    result = json.loads(path.read_text())
    if result.get("cost_model") and not args.cost_model:
        args.cost_model = result["cost_model"]
    for cell in result["cells"]:
        if "link" in cell:
            cell["link"]["bandwidth_Bps"] = model_bandwidth(cell["link"])
        if args.private_cache is not None:  # jobs that did not record the core's own cache
            cell["in_job_cost_model"].setdefault("private_cache_bytes", args.private_cache)
        if args.noise is not None:  # jobs that did not measure how much their work varies
            cell["in_job_cost_model"].setdefault("noise_s", args.noise)
        fresh = predict_stored(cell, args, cell["in_job_cost_model"])
        if "link" in cell:
            fresh["predicted_hidden"] = predicted_hidden(fresh)
        cell.update({k: v for k, v in fresh.items() if k != "network"})
    add_pooled_predictions(result, args)
    path.write_text(json.dumps(result, indent=1, default=_json_default))


def predict_stored(cell: dict, args, constants: dict) -> dict:
    """:func:`predict_cells` for one stored cell (its workload, shape, ranks, network, halo
    dtype, model and hidden width; its link where it has one) with ``constants``."""
    spec_args = argparse.Namespace(**{**vars(args), "hidden": cell.get("hidden", args.hidden)})
    constants = with_link_work(constants, cell.get("link_work_byte_s"))
    if getattr(args, "without", None):
        constants = {**constants, "compute": {
            threads: {k: v for k, v in values.items() if k not in args.without}
            for threads, values in constants["compute"].items()}}
    links = {cell["network"]: cell["link"]} if "link" in cell else None
    return predict_cells(Shape(cell["shape"]), cell["workload"], cell["ranks"],
                         [(cell["network"], cell.get("halo_dtype", "float32"))], spec_args,
                         constants, cell.get("model", "gcn"), links)[0]


def with_link_work(constants: dict, per_byte: float | None) -> dict:
    """A job's constants with the work per byte exchanged measured at a cell's link rate
    (``link_work_byte_s``; None: the job's own, measured on the unshaped link)."""
    return constants if per_byte is None else {**constants, "exchange_byte_s": per_byte}


def predicted_hidden(prediction: dict) -> float | None:
    """The fraction of the exchange a prediction hides behind compute (None: no exchange)."""
    if prediction["predicted_exchange_s"] <= 0:
        return None
    return 1 - prediction["predicted_exchange_exposed_s"] / prediction["predicted_exchange_s"]


def add_pooled_predictions(result: dict, args) -> None:
    """``pooled_step_s`` and ``pooled_eval_s`` for every ``--vcluster`` cell: its prediction
    with its run's host constants (:func:`_host_constants.pooled_constants`), so that the
    partitioners of a group are compared with one calibration, as ``gnnscale tune`` does."""
    cells = [c for c in result["cells"] if "link" in c]
    pooled = pooled_constants(cells)
    for cell in cells:
        fresh = predict_stored(cell, args, pooled[cell.get("run", 0)])
        cell["pooled_step_s"], cell["pooled_eval_s"] = \
            fresh["predicted_step_s"], fresh["predicted_eval_s"]


def report(path, pool: list = ()) -> dict:
    """Print the table and the two targets; returns the summary. ``pool``: results files of
    other sweeps of the same configuration, whose runs join ``path``'s
    (:func:`_host_constants.pool_sweeps`)."""
    raw = pool_sweeps([json.loads(Path(p).read_text())["cells"] for p in [path, *pool]])
    cells = merged_cells(raw)
    if any(c["network"].startswith("vc:") for c in cells):
        return report_vcluster(cells, raw)
    print(f"{'dataset':<24} {'method':<7} {'ranks':>5} {'network':>7} {'pred ms':>9} "
          f"{'meas ms':>9} {'error':>7}")
    errors = []
    for c in sorted(cells, key=lambda c: (c["dataset"], c["network"], c["ranks"], c["method"])):
        err = c["predicted_step_s"] / c["measured_step_s"] - 1
        errors.append(abs(err))
        print(f"{c['dataset']:<24} {c['method']:<7} {c['ranks']:>5} {c['network']:>7} "
              f"{c['predicted_step_s'] * 1e3:>9.2f} {c['measured_step_s'] * 1e3:>9.2f} "
              f"{100 * err:>6.0f}%")
    orders = partitioner_orders([c for c in cells if c["ranks"] in (4, 8)
                                 and c["network"] != "real"], ("dataset", "network", "ranks"))
    file_errors = [abs(c["file_predicted_step_s"] / c["measured_step_s"] - 1) for c in cells]
    eval_errors = [abs(c["predicted_eval_s"] / c["measured_eval_s"] - 1) for c in cells]
    summary = {"cells": len(cells), "median_abs_relative_error": float(np.median(errors)),
               "median_abs_relative_error_file_constants": float(np.median(file_errors)),
               "median_abs_relative_error_eval": float(np.median(eval_errors)),
               "orders_equal": sum(o["equal"] for o in orders), "orders": len(orders)}
    print(json.dumps(summary))
    print(markdown(cells))
    return {"summary": summary, "orders": orders}


def partitioner_orders(cells: list, fields: tuple, predicted_key: str = "predicted_step_s",
                       echo: bool = True) -> list:
    """Per group of cells equal in ``fields`` (two cells or more): the partitioners fastest
    first as predicted (``predicted_key``) and as measured, and whether they agree (printed
    too, with ``echo``)."""
    orders = []
    for key in sorted({tuple(c[f] for f in fields) for c in cells}):
        group = [c for c in cells if tuple(c[f] for f in fields) == key]
        if len(group) < 2:
            continue
        predicted = [c["method"] for c in sorted(group, key=lambda c: c[predicted_key])]
        measured = [c["method"] for c in sorted(group, key=lambda c: c["measured_step_s"])]
        orders.append({**dict(zip(fields, key)), "predicted": predicted, "measured": measured,
                       "equal": predicted == measured})
        if echo:
            print(f"order {key}: predicted {predicted} measured {measured}")
    return orders


def _rel(predicted: float, measured: float) -> float:
    return predicted / measured - 1


QUIET_LOAD = (os.cpu_count() or 2) + 1.0


def _quiet(cell: dict) -> bool:
    """Whether the cell's job started at a 1-minute load average of at most QUIET_LOAD."""
    return cell.get("load_1min") is not None and cell["load_1min"] <= QUIET_LOAD


HALO_ORDER = ("float32", "bfloat16", "int8", "int4", "int2")


def report_vcluster(cells: list, raw: list | None = None) -> dict:
    """``--vcluster`` cells: the table, the median errors (step, evaluation; per dataset) and
    whether the predicted order of the partitioners equals the measured one per (dataset,
    model, rate); the same with each run's host constants (``pooled_*``) where the cells have
    them, and the order on the pairs the runs (``raw``: one cell per run) resolve."""
    rates = list(dict.fromkeys(c["network"] for c in sorted(
        cells, key=lambda c: -c["link"]["bandwidth_Bps"])))
    pooled = all("pooled_step_s" in c for c in cells)
    lines = ["| graph | model | partitioner | link | halo | step pred / meas (ms) | error | "
             + "step, host constants (ms) | error | " * pooled +
             "eval pred / meas (ms) | error | hidden pred / meas | halo MB/step pred / meas | "
             "link MB/epoch | runs | load |", "|---" * (14 + 2 * pooled) + "|"]
    order = {n: i for i, n in enumerate(rates)}
    cells = sorted([{"model": "gcn", "halo_dtype": "float32", **c} for c in cells],
                   key=lambda c: (c["dataset"], c["model"], order[c["network"]],
                                  HALO_ORDER.index(c["halo_dtype"]), c["method"]))
    for c in cells:
        hidden = [f"{v:.2f}" if v is not None else "-" for v in
                  (c.get("predicted_hidden"), c.get("measured_hidden"))]
        lines.append(
            f"| {c['dataset']} | {c.get('model', 'gcn')} | {c['method']} | "
            f"{c['network'][3:]} | {c['halo_dtype']} | {c['predicted_step_s'] * 1e3:.1f} / "
            f"{c['measured_step_s'] * 1e3:.1f} | "
            f"{100 * _rel(c['predicted_step_s'], c['measured_step_s']):+.0f}% | "
            + (f"{c['pooled_step_s'] * 1e3:.1f} | "
               f"{100 * _rel(c['pooled_step_s'], c['measured_step_s']):+.0f}% | "
               if pooled else "") +
            f"{c['predicted_eval_s'] * 1e3:.1f} / {c['measured_eval_s'] * 1e3:.1f} | "
            f"{100 * _rel(c['predicted_eval_s'], c['measured_eval_s']):+.0f}% | "
            f"{hidden[0]} / {hidden[1]} | "
            f"{float(np.max(c['predicted_halo_bytes_step'])) / 1e6:.2f} / "
            f"{c['halo_bytes_sent'] / 1e6:.2f} | {c['wire_tx_bytes_epoch'] / 1e6:.2f} | "
            f"{c.get('runs', 1)} | "
            f"{'-' if c.get('load_1min') is None else format(c['load_1min'], '.1f')} |")
    table = "\n".join(lines)
    print(table)
    orders = partitioner_orders(cells, ORDER_FIELDS)

    def median_error(subset, kind="step"):
        values = [abs(_rel(c[f"predicted_{kind}_s"], c[f"measured_{kind}_s"])) for c in subset]
        return float(np.median(values)) if values else None

    summary = {"cells": len(cells), "median_abs_relative_error": median_error(cells),
               "median_abs_relative_error_eval": median_error(cells, "eval"),
               "per_dataset": {d: {"step": median_error([c for c in cells
                                                         if c["dataset"] == d]),
                                   "eval": median_error([c for c in cells
                                                         if c["dataset"] == d], "eval")}
                               for d in sorted({c["dataset"] for c in cells})},
               "per_rate": {n[3:]: median_error([c for c in cells if c["network"] == n])
                            for n in rates},
               "per_halo_dtype": {d: median_error([c for c in cells if c["halo_dtype"] == d])
                                  for d in HALO_ORDER if any(c["halo_dtype"] == d
                                                             for c in cells)},
               # the host's 2 cores run the job's 2 ranks: a 1-minute load above cores + 1
               # means other work competed for them
               "quiet_host": {"load_at_most": QUIET_LOAD,
                              "cells": sum(_quiet(c) for c in cells),
                              "step": median_error([c for c in cells if _quiet(c)]),
                              "eval": median_error([c for c in cells if _quiet(c)], "eval")},
               "orders_equal": {n[3:]: f"{sum(o['equal'] for o in orders if o['network'] == n)}"
                                       f"/{sum(o['network'] == n for o in orders)}"
                                for n in rates}}
    if pooled:
        summary["host_constants"] = _pooled_summary(cells, rates, median_error)
    if raw is not None:
        summary["resolved_orders"] = _resolved_summary(raw, rates, pooled)
    print(json.dumps(summary))
    return {"summary": summary, "orders": orders, "table": table}


ORDER_FIELDS = ("dataset", "model", "network", "halo_dtype")


def _pooled_summary(cells: list, rates: list, median_error) -> dict:
    """Median errors and orders with each run's host constants (``pooled_*``)."""
    as_pooled = [{**c, "predicted_step_s": c["pooled_step_s"],
                  "predicted_eval_s": c["pooled_eval_s"]} for c in cells]
    orders = partitioner_orders(as_pooled, ORDER_FIELDS, echo=False)
    return {"step": median_error(as_pooled), "eval": median_error(as_pooled, "eval"),
            "per_rate": {n[3:]: median_error([c for c in as_pooled if c["network"] == n])
                         for n in rates},
            "orders_equal": {n[3:]: f"{sum(o['equal'] for o in orders if o['network'] == n)}"
                                    f"/{sum(o['network'] == n for o in orders)}"
                             for n in rates}}


def _resolved_summary(raw: list, rates: list, pooled: bool) -> dict:
    """Per rate: the partitioner pairs the runs order alike (``resolved`` of ``pairs``), how
    many of them each prediction orders the same way, and the groups where it orders all of
    them alike."""
    cells = [{"model": "gcn", "halo_dtype": "float32", **c} for c in raw]
    out = {}
    for n in rates:
        at_rate = [c for c in cells if c["network"] == n]
        entry = {}
        for name, key in [("per_job", "predicted_step_s")] + \
                [("host_constants", "pooled_step_s")] * pooled:
            groups = resolved_orders(at_rate, ORDER_FIELDS, key)
            resolved = sum(len(g["resolved"]) for g in groups)
            entry.update({"pairs": sum(g["pairs"] for g in groups), "resolved": resolved,
                          "groups": len(groups)})
            entry[name] = {"pairs_alike": f"{sum(g['alike'] for g in groups)}/{resolved}",
                           "groups_alike": sum(g["alike"] == len(g["resolved"])
                                               for g in groups)}
        out[n[3:]] = entry
    return out


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
    parser.add_argument("--epochs", type=int, default=5,
                        help="epochs a partition trains per turn, the first not counted")
    parser.add_argument("--rounds", type=int, default=1,
                        help="turns per partition at each network (with "
                             "--methods-in-one-job: the partitions alternate)")
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--host-cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--cost-model", default=None)
    parser.add_argument("--out", default=None,
                        help="results file (default benchmarks/results/tune_validation.json, "
                             "with --vcluster " + VCLUSTER_OUT + ")")
    parser.add_argument("--runs", nargs="+", type=int, default=[0],
                        help="run indices to measure (each replaces its stored cells; the "
                             "report takes medians over the runs of a cell)")
    parser.add_argument("--models", nargs="+", default=["gcn"], choices=["gcn", "sage"])
    parser.add_argument("--vcluster", nargs="+", default=None, metavar="RATE",
                        help="run on a 2-host virtual cluster at these link rates (none, "
                             "10gbit, 1gbit, 100mbit, ...); results in " + VCLUSTER_OUT)
    parser.add_argument("--halo-dtypes", nargs="+", default=["float32"],
                        help="halo dtypes each network is measured with, in turn (float32, "
                             "bfloat16, int8, int4, int2)")
    parser.add_argument("--methods-in-one-job", action="store_true",
                        help="with --vcluster: one job per (dataset, model) trains every "
                             "--methods partition in turn at each rate, with one set of "
                             "constants (as tune compares them), instead of a job each")
    parser.add_argument("--cell-timeout", type=float, default=600,
                        help="seconds a --vcluster job may take (default 600)")
    parser.add_argument("--vcluster-dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--report", action="store_true", help="print the table of --out")
    parser.add_argument("--pool", nargs="+", default=[], metavar="RESULTS",
                        help="with --report: the results files of other sweeps of the same "
                             "configuration, their runs pooled with --out's (a pair of "
                             "partitioners is resolved where every run of every sweep orders "
                             "it alike); printed only, --out is left as it is")
    parser.add_argument("--repredict", action="store_true",
                        help="recompute every stored cell's predictions with the current model "
                             "(its stored workload and in-job constants), then --report")
    parser.add_argument("--private-cache", type=_bytes_size, default=None, metavar="BYTES",
                        help="with --repredict: the cache each core has to itself (512K, 2M) "
                             "for jobs that did not record it (their host's L2)")
    parser.add_argument("--noise", type=_noise_rate, default=None, metavar="SECONDS",
                        help="with --repredict: the variance of a rank's busy time per second "
                             "of work (noise_s, e.g. 2e-4) for jobs that did not measure it")
    parser.add_argument("--without", nargs="+", default=[], metavar="CONSTANT",
                        help="with --repredict: predict as if the jobs had not measured these "
                             "compute constants (e.g. the small rows' line: gamma_nnz_narrow "
                             "gamma_edge_narrow gamma_nnz_narrow_mem gamma_edge_narrow_mem)")
    args = parser.parse_args()
    if args.rank_main:
        return rank_main(args)
    from planning.cost_model import OPTIONAL_COMPUTE_KEYS

    unknown = sorted(set(args.without) - set(OPTIONAL_COMPUTE_KEYS))
    if unknown:
        parser.error(f"--without: {unknown[0]!r} is not an optional compute constant "
                     f"(one of {', '.join(OPTIONAL_COMPUTE_KEYS)})")
    if args.out is None:
        args.out = VCLUSTER_OUT if args.vcluster else "benchmarks/results/tune_validation.json"
    out = Path(args.out)
    if args.vcluster and not (args.report or args.repredict):
        return run_vcluster(args)
    if args.pool:
        missing = [p for p in [out, *map(Path, args.pool)] if not p.exists()]
        if not args.report or args.repredict or missing:
            parser.error(f"--pool: no such results file: {missing[0]}" if missing else
                         "--pool goes with --report (and without --repredict)")
        report(out, args.pool)
        return
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


POOLED_KEYS = ("pooled_step_s", "pooled_eval_s")  # add_pooled_predictions


def cell_key(cell: dict) -> tuple:
    """One measurement: (dataset, method, ranks, network, run, model, halo dtype)."""
    return (cell["dataset"], cell["method"], cell["ranks"], cell["network"],
            cell.get("run", 0), cell.get("model", "gcn"), cell.get("halo_dtype", "float32"))


def merged_cells(cells: list) -> list:
    """One cell per (dataset, method, ranks, network): the medians over its runs of the
    measured and predicted times."""
    groups = {}
    for c in cells:
        key = cell_key(c)
        groups.setdefault(key[:4] + key[5:], []).append(c)
    keys = ("measured_step_s", "measured_eval_s", "predicted_step_s", "predicted_eval_s",
            "file_predicted_step_s", "file_predicted_eval_s")

    def median_of(runs, get):
        values = [v for v in map(get, runs) if v is not None]
        return float(np.median(values)) if values else None

    return [{**runs[0], **{k: float(np.median([r[k] for r in runs])) for k in keys},
             **{k: median_of(runs, lambda r, k=k: r.get(k)) for k in POOLED_KEYS
                if all(k in r for r in runs)},
             "measured_hidden": median_of(runs, lambda r: r.get("measured_hidden")),
             "load_1min": median_of(runs, lambda r: (r.get("load_average") or {})
                                    .get("before", [None])[0]),
             "runs": len(runs)} for runs in groups.values()]


if __name__ == "__main__":
    main()
