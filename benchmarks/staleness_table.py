"""Markdown tables from staleness_policies.py results (docs/communication-avoiding.md).

    python benchmarks/staleness_table.py benchmarks/results/staleness_4ranks.json [...]
"""

from __future__ import annotations

import json
import sys


def table(path: str) -> str:
    report = json.load(open(path))
    rows = report["results"]
    ranks = rows[0]["ranks"] if rows else "?"
    out = [f"{path}: {ranks} ranks, {report['model']}, {report['epochs']} epochs", "",
           "| dataset | partition | network | policy | final test | test at best val | "
           "epochs to exact's best val | epoch ms | halo MiB / epoch | replication |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        network = "real" if r["network"] == "real" else "simulated"
        reach = r["epochs_to_exact_best_val"]
        out.append(f"| {r['dataset']} | {r['partitioner']} | {network} | {r['policy']} | "
                   f"{r['final_test']:.3f} | {r['test_at_best_val']:.3f} | "
                   f"{'-' if reach is None else reach} | {r['mean_epoch_time_s'] * 1e3:.1f} | "
                   f"{r['halo_bytes_per_epoch'] / 2**20:.2f} | {r['replication']:.3f} |")
    return "\n".join(out)


if __name__ == "__main__":
    print("\n\n".join(table(p) for p in sys.argv[1:]))
