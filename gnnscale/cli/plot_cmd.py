"""``gnnscale plot METRICS``: PNG curves of loss and metrics, and the per-rank time breakdown."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import DataError
from .common import formatter, say
from .report import EPOCH_PARTS


def add_parser(subparsers) -> None:
    """Register ``plot``."""
    p = subparsers.add_parser("plot", help="plot a metrics file written by train --metrics-out",
                              description="Write a PNG with the loss, the accuracy (and any "
                                          "other metric) per epoch, and where each rank's "
                                          "epoch time went.", formatter_class=formatter)
    p.add_argument("metrics", help="JSON-lines file from `gnnscale train --metrics-out`")
    p.add_argument("--out", default=None,
                   help="PNG to write; default: the metrics file with a .png suffix")
    p.set_defaults(func=run, outputs=lambda args: [(out_path(args), "--out", "file")])


def out_path(args) -> str:
    """The PNG ``plot`` writes: ``--out``, else the metrics file with a .png suffix."""
    return args.out or str(Path(args.metrics).with_suffix(".png"))


def read_metrics(path) -> list[dict]:
    """Records of a metrics file (DataError naming the line when it is not JSON lines)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"metrics file {path} does not exist")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            raise DataError(f"{path} line {number} is not JSON: {line[:60]!r}") from None
    if not any("epoch" in r and "loss" in r for r in records):
        raise DataError(f"{path} holds no epoch records; write it with "
                        f"`gnnscale train --metrics-out {path}`")
    return records


def plot_records(records: list[dict], out_path) -> Path:
    """Draw the curves and the time breakdown of ``records`` into ``out_path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [r for r in records if not r.get("summary")]
    summary = next((r for r in reversed(records) if r.get("summary")), None)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    x = [r["epoch"] for r in epochs]
    axes[0].plot(x, [r["loss"] for r in epochs], color="tab:red")
    axes[0].set(title="training loss", xlabel="epoch", ylabel="loss")
    names = sorted({k for r in epochs for k in (r.get("metrics") or {})} or
                   {"train_acc", "val_acc", "test_acc"})
    for name in names:  # evaluated epochs only (train --eval-every)
        points = [(r["epoch"], (r.get("metrics") or r).get(name)) for r in epochs]
        points = [(epoch, value) for epoch, value in points if value is not None]
        axes[1].plot([p[0] for p in points], [p[1] for p in points], label=name,
                     marker="." if len(points) < len(epochs) else None)
    axes[1].set(title="metrics", xlabel="epoch", ylim=(0, 1.02))
    axes[1].legend(fontsize=8)
    ranks = (summary or {}).get("per_rank") or []
    if ranks:
        _plot_time_parts(axes[2], ranks)
    else:
        axes[2].set_axis_off()
        axes[2].text(0.5, 0.5, "no summary line: run finished early?", ha="center")
    fig.tight_layout()
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return out_path


def _plot_time_parts(ax, ranks: list[dict]) -> None:
    """Stacked bars per rank of the parts an epoch's time splits into, in the order (bottom
    up) and with the names of the printed table; the legend sits beside the axes."""
    positions = [r["rank"] for r in ranks]
    bottom = [0.0] * len(ranks)
    for key, label in EPOCH_PARTS:
        if key not in ranks[0]:
            continue
        heights = [r[key] * 1e3 for r in ranks]
        ax.bar(positions, heights, bottom=bottom, label=label, width=0.6)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set(title="where an epoch's time went", xlabel="rank", ylabel="ms", xticks=positions)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], fontsize=8, loc="upper left",
              bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # top of the stack first


def run(args) -> int:
    path = plot_records(read_metrics(args.metrics), out_path(args))
    say(f"wrote {path}")
    return 0
