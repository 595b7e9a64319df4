"""Sweep partitioners x part counts, predict step time and memory, recommend one.

``sweep`` returns one row per (method, parts): quality (edge cut, replication, halo bytes,
balance), partition time and memory, the predicted training step, evaluation pass and epoch
(:mod:`planning.cost_model`) and, with a memory plan, the predicted peak memory of the
largest rank (:mod:`planning.memory_plan`). ``recommend`` picks the fastest predicted epoch
and ``explain`` says why, with the runners-up within 10%; ``write_json`` and ``plot_sweep``
save the result (the plot imports matplotlib lazily, so the package itself stays light).

Rows may differ in more than the partition: the placement (ranks per host and threads per rank,
:mod:`planning.placement`), the halo dtype and the staleness policy
(:mod:`planning.halo_wire`). ``choose`` then takes, among the rows predicted within 10% of
the fastest, the most exact one (float32 before bfloat16 before int8, int4, int2; exact before
pipelined, delayed, local; the sum of the two places, then time), and ``explain_choice`` says
what it beats: the best of every other placement, and exact float32 halos on its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from partitioning import make_partitioner
from partitioning.base import check_num_parts
from partitioning.errors import PartitionError
from partitioning.graph import as_csr_graph
from partitioning.metrics import part_summary

from .cost_model import Cluster, CostModel, ModelSpec, predict
from .halo_wire import HALO_DTYPES, STALENESS_POLICIES, HaloOptions
from .workload import part_workload

__all__ = ["sweep", "score", "predicted", "recommend", "runners_up", "explain", "choose",
           "explain_choice", "exactness", "setting_label", "write_json", "plot_sweep", "format_sweep_table"]

RUNNER_UP_MARGIN = 0.10


def predicted(work: dict, spec: ModelSpec, cluster: Cluster | None = None,
              cost_model: CostModel | None = None, halo: HaloOptions | None = None) -> dict:
    """The predicted columns of a sweep row (:func:`planning.cost_model.predict` of one
    workload, cluster and halo setting)."""
    halo = halo or HaloOptions()
    pred = predict(work, spec, cluster, cost_model or CostModel(), halo)
    slowest = pred["slowest_rank"]
    return {
        "halo_dtype": halo.dtype, "staleness": halo.staleness.spec,
        "predicted_step_s": pred["step_s"], "predicted_eval_s": pred["eval_s"],
        "predicted_epoch_s": pred["epoch_s"], "predicted_forward_s": pred["forward_s"],
        "predicted_backward_s": pred["backward_s"],
        "predicted_exchange_exposed_s": pred["exchange_exposed_s"],
        "predicted_allreduce_exposed_s": pred["allreduce_exposed_s"],
        "bound": pred["bound"], "slowest_rank": slowest,
        "slowest_layer": pred["slowest_layer"], "slowest_phase": pred["slowest_phase"],
        "slowest_rank_halo_bytes": float(pred["halo_bytes"][slowest]),
        "predicted_halo_bytes_step_max": float(np.max(pred["halo_bytes_step"])),
        "imbalance": pred["imbalance"],
    }


def score(graph, partition, spec: ModelSpec, cluster: Cluster | None = None,
          cost_model: CostModel | None = None, memory=None, halo: HaloOptions | None = None,
          work: dict | None = None) -> dict:
    """One sweep row for an existing partition: quality, predicted times and memory.

    ``memory``: optional callable ``memory(workload) -> plan dict`` (a memory plan's per-rank
    peak, see :func:`planning.memory_plan.plan_memory`); ``halo``: the halo dtype and
    staleness (default float32, exact); ``work``: the partition's workload where already
    computed.
    """
    cost_model = cost_model or CostModel()
    s = part_summary(graph, partition,
                     feature_bytes_per_row=spec.widths[0] * cost_model.bytes_per_value)
    work = work if work is not None else part_workload(graph, partition)
    row = {
        "method": partition.method, "parts": partition.num_parts, "kind": s["kind"],
        "edge_cut": s["edge_cut"], "edge_cut_fraction": s["edge_cut_fraction"],
        "replication_factor": s["replication_factor"],
        "halo_bytes_max": s["halo_bytes_max"], "halo_bytes_mean": s["halo_bytes_mean"],
        "balance_nodes": s["balance_nodes"], "balance_edges": s["balance_edges"],
        "partition_time_s": s["time_s"], "partition_peak_memory_bytes": s["peak_memory_bytes"],
        **predicted(work, spec, cluster, cost_model, halo),
    }
    if memory is not None:
        plan = memory(work)
        row.update({"predicted_peak_memory_bytes": plan["peak_bytes"],
                    "memory_peak_phase": plan["peak_phase"],
                    "memory_peak_rank": plan["peak_rank"]})
    return row


def sweep(graph, methods, parts_list, spec: ModelSpec, *, seed: int = 0,
          cluster: Cluster | None = None, cost_model: CostModel | None = None,
          method_params: dict | None = None, memory=None, progress=None) -> list[dict]:
    """Partition ``graph`` with every method for every part count and score each result.

    Args:
        graph: anything :func:`as_csr_graph` accepts (a ``train_mask`` is used if present).
        methods: registry names, e.g. ``["random", "metis", "fennel"]``.
        parts_list: part counts; counts above the number of nodes are refused.
        spec: the model (:class:`ModelSpec`).
        seed: seed for every partitioner.
        cluster: where the ranks run (default: one host, shared memory).
        cost_model: constants (default :class:`CostModel()`).
        method_params: optional dict method -> extra keyword parameters.
        memory: optional ``memory(method, parts) -> (workload -> plan)`` factory (see
            :func:`score`).
        progress: optional callable ``progress(done, total, label)`` called after each run.
    Returns: list of row dicts (see :func:`format_sweep_table` for the columns).
    """
    g = as_csr_graph(graph)
    method_params = method_params or {}
    parts_list = [check_num_parts(p, g.num_nodes) for p in parts_list]
    if not methods or not parts_list:
        raise PartitionError("sweep needs at least one method and one part count")
    partitioners = [(m, p, make_partitioner(m, num_parts=p, seed=seed, **method_params.get(m, {})))
                    for m in methods for p in parts_list]
    rows = []
    for done, (method, parts, partitioner) in enumerate(partitioners, 1):
        partition = partitioner.fit(graph)
        rows.append(score(graph, partition, spec, cluster, cost_model,
                          memory(method, parts) if memory is not None else None))
        if progress is not None:
            progress(done, len(partitioners), f"{method} x {parts}")
    return rows


def recommend(rows: list[dict], parts: int | None = None) -> dict:
    """The row with the lowest predicted epoch time (among ``parts`` parts when given); ties go
    to the shorter partitioning time."""
    candidates = [r for r in rows if parts is None or r["parts"] == parts]
    if not candidates:
        raise PartitionError(f"no sweep result for parts={parts}")
    return min(candidates, key=lambda r: (r["predicted_epoch_s"], r["partition_time_s"]))


def runners_up(rows: list[dict], best: dict, margin: float = RUNNER_UP_MARGIN) -> list[dict]:
    """Other rows predicted within ``margin`` (relative) of ``best``, fastest first."""
    limit = best["predicted_epoch_s"] * (1 + margin)
    return sorted((r for r in rows if r is not best and r["predicted_epoch_s"] <= limit),
                  key=lambda r: r["predicted_epoch_s"])


def exactness(row: dict) -> int:
    """How far a row's halos are from exact float32 ones: the halo dtype's place in
    float32, bfloat16, int8, int4, int2 plus the staleness policy's in exact, pipelined,
    delayed, local (0: exact float32)."""
    dtype = HALO_DTYPES.index(row.get("halo_dtype", "float32"))
    return dtype + STALENESS_POLICIES.index(row.get("staleness", "exact").partition(":")[0])


def choose(rows: list[dict], margin: float = RUNNER_UP_MARGIN) -> dict:
    """Among the rows predicted within ``margin`` of the fastest epoch, the most exact
    (:func:`exactness`), then the fastest."""
    if not rows:
        raise PartitionError("no sweep result to choose from")
    limit = min(r["predicted_epoch_s"] for r in rows) * (1 + margin)
    return min((r for r in rows if r["predicted_epoch_s"] <= limit),
               key=lambda r: (exactness(r), r["predicted_epoch_s"], r["partition_time_s"]))


def setting_label(row: dict) -> str:
    """A row's configuration in words: method x parts, placement, halo dtype, staleness."""
    where = f", {row['placement_label']}" if "placement_label" in row else ""
    return (f"{row['method']} x {row['parts']}{where}, {row.get('halo_dtype', 'float32')} "
            f"halos, {row.get('staleness', 'exact')}")


def explain_choice(best: dict, rows: list[dict], margin: float = RUNNER_UP_MARGIN) -> str:
    """Why :func:`choose` picked ``best``: its predicted epoch, the fastest row where it is not
    that one, the best of each other placement and exact float32 halos in its own place."""
    epoch = best["predicted_epoch_s"]
    text = [f"{setting_label(best)}: {_ms(epoch)} per epoch ({_ms(best['predicted_step_s'])} "
            f"step), {best['bound']}-bound, "
            f"{_short_bytes(best.get('predicted_halo_bytes_step_max', 0))} of halo sent per "
            f"step by the busiest rank"]
    fastest = min(rows, key=lambda r: r["predicted_epoch_s"])
    if fastest is not best:
        text.append(f"chosen as the most exact within {margin:.0%} of the fastest, "
                    f"{setting_label(fastest)} ({_ms(fastest['predicted_epoch_s'])})")
    others = {}
    for r in rows:
        if r.get("placement") not in (None, best.get("placement")):
            others.setdefault(r["placement"], []).append(r)
    for name, mine in others.items():
        alt = choose(mine, margin)
        text.append(f"{alt['placement_label']} at best {_ms(alt['predicted_epoch_s'])} "
                    f"({epoch and alt['predicted_epoch_s'] / epoch:.2f}x; its busiest rank "
                    f"sends {_short_bytes(alt.get('predicted_halo_bytes_step_max', 0))} per "
                    f"step)")
    plain = [r for r in rows if exactness(r) == 0 and r["method"] == best["method"]
             and r["parts"] == best["parts"] and r.get("placement") == best.get("placement")]
    if plain and plain[0] is not best:
        text.append(f"exact float32 halos there {_ms(plain[0]['predicted_epoch_s'])} "
                    f"({epoch and plain[0]['predicted_epoch_s'] / epoch:.2f}x)")
    return "; ".join(text)


def explain(row: dict) -> str:
    """Why a configuration costs what it does, in one sentence."""
    exposed = row["predicted_exchange_exposed_s"] + row["predicted_allreduce_exposed_s"]
    return (f"{row['bound']}-bound: of a {_ms(row['predicted_step_s'])} step, "
            f"{_ms(exposed)} waits for communication; the costliest phase is layer "
            f"{row['slowest_layer']} {row['slowest_phase']}; the busiest rank "
            f"({row['slowest_rank']}) receives {_short_bytes(row['slowest_rank_halo_bytes'])} "
            f"of halo per exchange; load imbalance {row['imbalance']:.2f}")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def write_json(path, rows: list[dict], cost_model: CostModel, extra: dict | None = None) -> dict:
    """Write the sweep, the recommendation (:func:`choose`, and the fastest per part count) and
    the constants."""
    best = choose(rows)
    result = {
        "rows": rows, "cost_model": cost_model.to_dict(), "recommended": best,
        "why": explain(best), "why_chosen": explain_choice(best, rows),
        "runners_up": runners_up(rows, best),
        "best_per_parts": {str(p): recommend(rows, p)
                           for p in sorted({r["parts"] for r in rows})},
        **(extra or {}),
    }
    Path(path).write_text(json.dumps(result, indent=1, default=_json_default))
    return result


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


_STYLES = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", "-"), ("P", "--"),
           ("X", "-."), ("*", ":")]


def plot_sweep(rows: list[dict], path) -> None:
    """PNG against the part count: predicted epoch time in ms, the largest part's halo volume
    per exchange and (when the rows have it) the predicted peak memory of the largest rank.
    Each method has its own marker and line style (hollow markers, slightly dodged sideways) so
    methods with equal values stay visible."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    panels = [("predicted_epoch_s", 1e3, "predicted epoch time", "ms per epoch"),
              ("halo_bytes_max", 1 / 2**10, "communication (largest part)",
               "halo KiB per exchange")]
    if all("predicted_peak_memory_bytes" in r for r in rows):
        panels.append(("predicted_peak_memory_bytes", 1 / 2**20, "peak memory (largest rank)",
                       "MiB"))
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.4))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    all_parts = sorted({r["parts"] for r in rows})
    for i, method in enumerate(methods):
        mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["parts"])
        dodge = 2 ** (0.04 * (i - (len(methods) - 1) / 2))  # a few % apart on the log axis
        parts = [r["parts"] * dodge for r in mine]
        marker, line = _STYLES[i % len(_STYLES)]
        style = dict(marker=marker, linestyle=line, markerfacecolor="none", markersize=7,
                     linewidth=1.4, label=method)
        for ax, (key, scale, _, _) in zip(axes, panels):
            ax.plot(parts, [max(r[key], 1e-6) * scale for r in mine], **style)
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    for ax, (_, _, title, ylabel) in zip(axes, panels):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(all_parts)
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.set_xlabel("parts")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def format_sweep_table(rows: list[dict]) -> str:
    """Text table: method, parts, edge cut, replication, max halo bytes, balance, predicted
    step / eval (ms), what bounds the step and, when planned, the peak memory per rank."""
    memory = all("predicted_peak_memory_bytes" in r for r in rows)
    placed = all("placement" in r for r in rows)
    halos = len({(r.get("halo_dtype"), r.get("staleness")) for r in rows}) > 1 or any(
        exactness(r) for r in rows)
    header = (f"{'method':<8} {'parts':>5} "
              + (f"{'ranks/host':>10} {'threads':>7} " if placed else "")
              + (f"{'halo':>8} {'staleness':>11} " if halos else "")
              + f"{'cut %':>6} {'repl':>6} {'halo max':>10} "
              f"{'bal e':>6} {'part s':>8} {'step ms':>9} {'eval ms':>9} {'bound':>6}"
              + (f" {'mem/rank':>9}" if memory else ""))
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['method']:<8} {r['parts']:>5} "
            + (f"{r['ranks_per_host']:>10} {r['threads_per_rank']:>7} " if placed else "")
            + (f"{r['halo_dtype']:>8} {r['staleness']:>11} " if halos else "")
            + f"{100 * r['edge_cut_fraction']:>6.1f} "
            f"{r['replication_factor']:>6.2f} {_short_bytes(r['halo_bytes_max']):>10} "
            f"{r['balance_edges']:>6.2f} {r['partition_time_s']:>8.2f} "
            f"{r['predicted_step_s'] * 1e3:>9.3f} {r['predicted_eval_s'] * 1e3:>9.3f} "
            f"{'comm' if r['bound'] == 'communication' else 'comp':>6}"
            + (f" {_short_bytes(r['predicted_peak_memory_bytes']):>9}" if memory else ""))
    return "\n".join(lines)


def _short_bytes(num: float) -> str:
    for unit in ("B", "K", "M", "G"):
        if num < 1024 or unit == "G":
            return f"{num:.0f}{unit}" if unit == "B" else f"{num:.1f}{unit}"
        num /= 1024
    return f"{num:.1f}G"
