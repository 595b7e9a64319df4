"""The time plot and the printed table show the same parts in the same order, with the legend
clear of the bars; the tune plot keeps every method visible and reads in plain numbers."""

import matplotlib
import pytest

from gnnscale.cli.plot_cmd import plot_records
from gnnscale.cli.report import EPOCH_PARTS, format_time_table
from planning.tune import plot_sweep

matplotlib.use("Agg")


@pytest.fixture
def saved_figures(monkeypatch):
    """Figures as they are saved (their artists are inspected instead of the pixels)."""
    from matplotlib.figure import Figure

    figures, real_savefig = [], Figure.savefig

    def savefig(self, *args, **kwargs):
        self.canvas.draw()  # lay out, so extents are final
        figures.append((self, self.canvas.get_renderer()))
        return real_savefig(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return figures


def a_run(ranks=2, epochs=4):
    parts = {"compute_s": 0.040, "halo_wait_s": 0.012, "grad_allreduce_s": 0.001,
             "optimizer_s": 0.002, "eval_s": 0.030, "forward_s": 0.03, "backward_s": 0.023}
    records = [{"epoch": e, "loss": 1.0 / e, "metrics": {"train_acc": 0.5, "val_acc": 0.4,
                                                        "test_acc": 0.4}} for e in range(1, 5)]
    per_rank = [{"rank": r, "owned": 100, "halo": 10, **parts} for r in range(ranks)]
    summary = {"summary": True, "epochs": epochs, "final_loss": 0.25, "final_train_acc": 0.5,
               "final_val_acc": 0.4, "final_test_acc": 0.4, "best_epoch": 2,
               "best_val_acc": 0.4, "test_acc_at_best_val": 0.4, "mean_epoch_time_s": 0.085,
               "total_time_s": 0.34, "mean_time_breakdown_s": parts, "per_rank": per_rank}
    return records + [summary]


def test_time_plot_and_table_list_the_same_parts_and_the_legend_clears_the_bars(
        tmp_path, saved_figures):
    records = a_run()
    plot_records(records, tmp_path / "deep" / "t.png")
    assert (tmp_path / "deep" / "t.png").is_file()
    figure, renderer = saved_figures[0]
    ax = figure.axes[2]
    legend = ax.get_legend()
    labels = [text.get_text() for text in legend.get_texts()]
    wanted = [label for _, label in EPOCH_PARTS]
    assert labels == wanted[::-1]  # top of the stack first, as the eye reads it
    table_rows = [line[:24].strip() for line in format_time_table(records[-1]).splitlines()]
    assert [row for row in table_rows if row in wanted] == wanted
    legend_box = legend.get_window_extent(renderer)
    for bar in ax.patches:
        assert not legend_box.overlaps(bar.get_window_extent(renderer))
    heights = {round(sum(b.get_height() for b in ax.patches if abs(b.get_x() + b.get_width() / 2
                                                                    - r) < 0.01), 6)
               for r in (0, 1)}
    assert heights == {85.0}  # the parts add up to the epoch (ms), no part drawn twice


def sweep_rows():
    rows = []
    for method in ("metis", "fennel", "ldg", "random"):
        for parts in (2, 4, 8, 16, 32):
            same = method in ("fennel", "ldg")  # identical curves must both stay visible
            rows.append({"method": method, "parts": parts,
                         "predicted_epoch_s": 0.03 / parts * (1.2 if same else 1.0),
                         "halo_bytes_max": 2**20 // parts * (2 if same else 1)})
    return rows


def test_tune_plot_every_method_visible_and_plain_axes(tmp_path, saved_figures):
    plot_sweep(sweep_rows(), tmp_path / "tune.png")
    left, right = saved_figures[0][0].axes
    styles = [(line.get_marker(), line.get_linestyle()) for line in left.get_lines()]
    assert len(set(styles)) == 4  # no two methods drawn alike
    xs = [tuple(line.get_xdata()) for line in left.get_lines()]
    assert len(set(xs)) == 4  # dodged sideways: equal values do not sit on top of each other
    for ax in (left, right):
        ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert ticks == ["2", "4", "8", "16", "32"]
        for label in ax.get_yticklabels(which="both"):
            assert "^" not in label.get_text() and "times" not in label.get_text(), \
                label.get_text()
    assert "ms" in left.get_ylabel()
    values = [v for line in left.get_lines() for v in line.get_ydata()]
    assert max(values) == pytest.approx(0.03 / 2 * 1.2 * 1e3)  # milliseconds
