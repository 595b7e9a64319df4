"""Text the CLI prints: the run header and the final summary with where the time went."""

from __future__ import annotations

MIN_COLUMN = 10  # characters of a per-rank column, right-aligned
# The parts an epoch's time splits into, in the order the table lists them and the plot
# stacks them (bottom up): forward + backward = compute + halo wait + exposed gradient sync.
EPOCH_PARTS = (("compute_s", "compute (fwd + bwd)"), ("halo_wait_s", "halo wait"),
               ("grad_allreduce_s", "grad. sync wait"), ("optimizer_s", "optimiser step"),
               ("eval_s", "evaluation"))


def run_summary(trainer, records, metric: str) -> dict:
    """The summary record of a run (collective: every rank's figures are gathered): the best
    epoch by ``val_<metric>`` over every epoch of ``trainer.history`` (resumed or not), then
    ``per_rank``: each rank's host, nodes, time split, halo bytes and peak memory over the
    epochs this process ran (``records``, on its own clock), ``--profile``'s probes averaged;
    the number of ranks and hosts, the backend and the dense products' library."""
    import socket

    import numpy as np

    from ..engine import summarise
    from ..nn.gemm import uses_onednn

    comm, graph = trainer.comm, trainer.problem.graph
    final = summarise(trainer.history, monitor=f"val_{metric}")
    measured = summarise(records)
    mine = {"rank": comm.rank, "host": socket.gethostname(), "owned": graph.num_owned,
            "halo": graph.num_halo, **measured["mean_time_breakdown_s"],
            "halo_bytes_per_epoch": float(np.mean([r.halo_bytes_sent for r in records])),
            "peak_rss_mb": records[-1].peak_rss_mb}
    probes = [r.profile for r in records if r.profile]
    if probes:
        mine.update({k: float(np.mean([p[k] for p in probes])) for k in probes[0]})
    per_rank = comm.allgather_object(mine)
    final["per_rank"] = per_rank
    final["ranks"] = comm.size
    final["hosts"] = len({r["host"] for r in per_rank})
    final["backend"] = comm.backend
    final["dense_products"] = "onednn" if uses_onednn() else "torch"  # gnnscale.nn.gemm
    return final


def format_header(description: str, args, num_ranks: int, method: str,
                  partition_summary=None) -> str:
    """What is about to run: graph, model, ranks and partition quality."""
    lines = [f"gnnscale train: {description}",
             f"model {args.model}, {args.layers} layers, hidden {args.hidden}, dropout "
             f"{args.dropout}, lr {args.lr}, weight decay {args.weight_decay}, "
             f"{args.epochs} epochs, {num_ranks} rank{'s' if num_ranks > 1 else ''}"]
    if partition_summary is not None:
        s = partition_summary
        lines.append(f"partition {method}: edge cut {s['edge_cut']:,}, halo nodes per "
                     f"rank max {int(max(s['halo_nodes'])):,} mean "
                     f"{float(sum(s['halo_nodes'])) / len(s['halo_nodes']):,.0f}, node balance "
                     f"{s['balance_nodes']:.3f}")
    return "\n".join(lines)


def format_time_table(final: dict) -> str:
    """Final accuracy and a per-rank table of where an epoch's time went (steady state)."""
    out = [f"done: {final['epochs']} epochs, final loss {final['final_loss']:.4f}, "
           f"train {final['final_train_acc']:.4f}, val {final['final_val_acc']:.4f}, "
           f"test {final['final_test_acc']:.4f}",
           _best_line(final) + "; mean epoch "
           f"{final['mean_epoch_time_s'] * 1e3:.1f} ms, total {final['total_time_s']:.2f} s",
           "", "where an epoch's time went (ms, mean over epochs after the first):"]
    ranks = final.get("per_rank") or [dict(rank=0, **final["mean_time_breakdown_s"])]
    rows = [(label, [f"{r[key] * 1e3:.2f}" for r in ranks])
            for key, label in EPOCH_PARTS if key in ranks[0]]
    if len({r.get("host") for r in ranks}) > 1:  # a job over several hosts: say which is where
        rows.insert(0, ("host", [str(r["host"]) for r in ranks]))
    if "owned" in ranks[0]:
        rows.append(("owned / halo nodes", [f"{r['owned']}/{r['halo']}" for r in ranks]))
    out.extend(per_rank_table(ranks, rows, label_width=24))
    return "\n".join(out)


def per_rank_table(ranks: list[dict], rows: list[tuple[str, list[str]]],
                   label_width: int) -> list[str]:
    """Lines of a table with one column per rank: a ``rank R`` header, then ``rows`` of
    (label, one cell per rank). Each column is as wide as its widest cell plus two spaces (at
    least :data:`MIN_COLUMN`), so wide numbers never run into each other."""
    columns = [[f"rank {r['rank']}", *(cells[i] for _, cells in rows)]
               for i, r in enumerate(ranks)]
    widths = [max(MIN_COLUMN, 2 + max(len(cell) for cell in column)) for column in columns]
    lines = [f"{'':{label_width}s}" + "".join(f"{column[0]:>{w}s}"
                                               for column, w in zip(columns, widths))]
    for index, (label, _) in enumerate(rows, start=1):
        lines.append(f"{label:{label_width}s}" + "".join(f"{column[index]:>{w}s}"
                                                         for column, w in zip(columns, widths)))
    return lines


def _best_line(final: dict) -> str:
    metric = final.get("monitor", "val_acc")
    best = final.get("best_metrics") or {}
    test = metric.replace("val_", "test_", 1)
    if metric in best and test in best:
        return (f"best {metric} {best[metric]:.4f} at epoch {final['best_epoch']} "
                f"({test} {best[test]:.4f})")
    return (f"best val {final['best_val_acc']:.4f} at epoch {final['best_epoch']} "
            f"(test {final['test_acc_at_best_val']:.4f})")


def format_profile_table(per_rank: list[dict]) -> str:
    """--profile: per rank compute, communication, exposed wait, overlap, bytes and memory."""
    rows = [("compute (ms)", "compute_s", 1e3), ("halo exchange, whole (ms)", "halo_comm_s", 1e3),
            ("halo exchange, exposed (ms)", "halo_exposed_s", 1e3),
            ("overlap fraction", "overlap_fraction", 1.0),
            ("grad. allreduce, whole (ms)", "grad_comm_s", 1e3),
            ("grad. allreduce, exposed (ms)", "grad_allreduce_s", 1e3),
            ("halo bytes / epoch (MiB)", "halo_bytes_per_epoch", 1 / 2**20),
            ("peak memory (MiB)", "peak_rss_mb", 1.0)]
    cells = [(label, [f"{r[key] * scale:.2f}" for r in per_rank])
             for label, key, scale in rows if key in per_rank[0]]
    return "\n".join(["", "profile (per rank; whole = exchanges waited for at once, exposed = "
                           "the wait left with overlap):",
                       *per_rank_table(per_rank, cells, label_width=30)])
