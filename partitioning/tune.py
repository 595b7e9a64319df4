"""Sweep partitioners x part counts, predict epoch time with the cost model, recommend one.

``sweep`` returns one row per (method, parts): quality (edge cut, replication, halo bytes,
balance), partition time and memory, and the predicted epoch time. ``recommend`` picks the
fastest predicted configuration; ``write_json`` and ``plot_sweep`` save the result (the plot
imports matplotlib lazily, so the package itself stays light).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .base import check_num_parts
from .cost_model import CostModel
from .errors import PartitionError
from .graph import as_csr_graph
from .metrics import part_summary

__all__ = ["sweep", "recommend", "write_json", "plot_sweep", "format_sweep_table"]


def sweep(graph, methods, parts_list, dims, *, seed: int = 0, cost_model: CostModel | None = None,
          method_params: dict | None = None, progress=None) -> list[dict]:
    """Partition ``graph`` with every method for every part count and score each result.

    Args:
        graph: anything :func:`as_csr_graph` accepts (a ``train_mask`` is used if present).
        methods: registry names, e.g. ``["random", "metis", "fennel"]``.
        parts_list: part counts; counts above the number of nodes are refused.
        dims: model layer widths ``[in_features, hidden..., classes]`` for the cost model.
        seed: seed for every partitioner.
        cost_model: constants for the prediction (default :class:`CostModel()`).
        method_params: optional dict method -> extra keyword parameters.
        progress: optional callable ``progress(done, total, label)`` called after each run.
    Returns: list of row dicts (see :func:`format_sweep_table` for the columns).
    """
    from . import make_partitioner  # registry lives in the package __init__

    g = as_csr_graph(graph)
    cost_model = cost_model or CostModel()
    method_params = method_params or {}
    parts_list = [check_num_parts(p, g.num_nodes) for p in parts_list]
    if not methods or not parts_list:
        raise PartitionError("sweep needs at least one method and one part count")
    feature_row = int(dims[0]) * cost_model.bytes_per_value
    partitioners = [(m, p, make_partitioner(m, num_parts=p, seed=seed, **method_params.get(m, {})))
                    for m in methods for p in parts_list]
    rows = []
    for done, (method, parts, partitioner) in enumerate(partitioners, 1):
        partition = partitioner.fit(graph)
        s = part_summary(graph, partition, feature_bytes_per_row=feature_row)
        pred = cost_model.predict(s, dims)
        rows.append({
            "method": method, "parts": parts, "kind": s["kind"], "edge_cut": s["edge_cut"],
            "edge_cut_fraction": s["edge_cut_fraction"],
            "replication_factor": s["replication_factor"],
            "halo_bytes_max": s["halo_bytes_max"], "halo_bytes_mean": s["halo_bytes_mean"],
            "balance_nodes": s["balance_nodes"], "balance_edges": s["balance_edges"],
            "partition_time_s": s["time_s"], "peak_memory_bytes": s["peak_memory_bytes"],
            "predicted_compute_s": pred["compute_s"], "predicted_halo_s": pred["halo_s"],
            "predicted_allreduce_s": pred["allreduce_s"], "predicted_epoch_s": pred["epoch_s"],
        })
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


def write_json(path, rows: list[dict], cost_model: CostModel, extra: dict | None = None) -> dict:
    """Write the sweep, the recommendation (overall and per part count) and the constants."""
    result = {
        "rows": rows, "cost_model": cost_model.to_dict(), "recommended": recommend(rows),
        "best_per_parts": {str(p): recommend(rows, p)
                           for p in sorted({r["parts"] for r in rows})},
        **(extra or {}),
    }
    Path(path).write_text(json.dumps(result, indent=1, default=_json_default))
    return result


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


_STYLES = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", "-"), ("P", "--"),
           ("X", "-."), ("*", ":")]


def plot_sweep(rows: list[dict], path) -> None:
    """PNG with predicted epoch time in ms (left) and the largest part's halo volume per
    exchange (right) against the part count. Each method has its own marker and line style
    (hollow markers, slightly dodged sideways) so methods with equal values stay visible."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    all_parts = sorted({r["parts"] for r in rows})
    for i, method in enumerate(methods):
        mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["parts"])
        dodge = 2 ** (0.04 * (i - (len(methods) - 1) / 2))  # a few % apart on the log axis
        parts = [r["parts"] * dodge for r in mine]
        marker, line = _STYLES[i % len(_STYLES)]
        style = dict(marker=marker, linestyle=line, markerfacecolor="none", markersize=7,
                     linewidth=1.4, label=method)
        left.plot(parts, [r["predicted_epoch_s"] * 1e3 for r in mine], **style)
        right.plot(parts, [max(r["halo_bytes_max"], 1) / 2**10 for r in mine], **style)
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    for ax, title, ylabel in ((left, "predicted epoch time", "ms per epoch"),
                              (right, "communication (largest part)",
                               "halo KiB per exchange")):
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
    left.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def format_sweep_table(rows: list[dict]) -> str:
    """Text table: method, parts, edge cut, replication, max halo bytes, balance, times."""
    header = (f"{'method':<8} {'parts':>5} {'edge cut':>10} {'cut %':>6} {'repl':>6} "
              f"{'halo max':>10} {'bal n':>6} {'bal e':>6} {'part s':>8} {'epoch s':>9}")
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['method']:<8} {r['parts']:>5} {r['edge_cut']:>10} "
            f"{100 * r['edge_cut_fraction']:>6.1f} {r['replication_factor']:>6.2f} "
            f"{_short_bytes(r['halo_bytes_max']):>10} {r['balance_nodes']:>6.2f} "
            f"{r['balance_edges']:>6.2f} {r['partition_time_s']:>8.2f} "
            f"{r['predicted_epoch_s']:>9.4f}")
    return "\n".join(lines)


def _short_bytes(num: float) -> str:
    for unit in ("B", "K", "M", "G"):
        if num < 1024 or unit == "G":
            return f"{num:.0f}{unit}" if unit == "B" else f"{num:.1f}{unit}"
        num /= 1024
    return f"{num:.1f}G"
