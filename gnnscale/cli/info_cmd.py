"""``gnnscale info DIR``: validate a partition store and print its summary."""

from __future__ import annotations

import json

from .common import formatter, say


def add_parser(subparsers) -> None:
    """Register ``info`` with every option and its default."""
    p = subparsers.add_parser(
        "info", help="validate a partition store or a converted graph and print its summary",
        description="Check every file of a partition store against its sha256 checksum and the "
                    "parts against each other (every node owned once, edges add up, send and "
                    "receive lists agree), then print what the store holds. Given a converted "
                    "graph folder (gnnscale convert), check every file's size, header and "
                    "sha256 and print its counts.",
        formatter_class=formatter)
    p.add_argument("store", metavar="DIR",
                   help="partition store folder (gnnscale partition) or converted graph folder "
                        "(gnnscale convert)")
    p.add_argument("--json", action="store_true",
                   help="print the summary as JSON instead of text")
    p.set_defaults(func=run)


def format_store_summary(summary: dict) -> str:
    """Human-readable text of :func:`partitioning.store.validate_store`'s result."""
    q = summary.get("summary") or {}
    data = summary.get("data") or {}
    x = data.get("x")
    lines = [
        f"store {summary['store']}: OK (format version {summary['format_version']}, "
        f"{summary['total_bytes'] / 2**20:.1f} MiB)",
        f"dataset {summary['extra'].get('dataset', '?')}: {summary['num_nodes']:,} nodes, "
        f"{summary['num_edges']:,} edges" + (f", features {x['row_shape']} {x['dtype']}"
                                             if x else ", no features"),
        f"method {summary['method']} ({summary['kind']}), {summary['num_parts']} parts, "
        f"params {json.dumps(summary['params'])}",
    ]
    if q:
        lines.append(f"edge cut {q['edge_cut']:,} ({100 * q['edge_cut_fraction']:.1f}%), "
                     f"replication factor {q['replication_factor']:.3f}, balance nodes "
                     f"{q['balance_nodes']:.3f} edges {q['balance_edges']:.3f} train "
                     f"{q['balance_train']:.3f}")
        lines.append(f"per part: nodes {min(q['nodes'])}-{max(q['nodes'])}, halo "
                     f"{min(q['halo_nodes'])}-{max(q['halo_nodes'])}, file "
                     f"{min(summary['part_bytes']) / 2**20:.2f}-"
                     f"{max(summary['part_bytes']) / 2**20:.2f} MiB")
    if data.get("masks"):
        lines.append(f"masks: {', '.join(data['masks'])}")
    return "\n".join(lines)


def format_converted_summary(folder, manifest: dict) -> str:
    """Human-readable text of a verified converted graph's manifest."""
    size = sum(entry["bytes"] for entry in manifest["files"].values())
    counts = manifest.get("split_counts") or {}
    return "\n".join([
        f"converted graph {folder}: OK (format version {manifest['format_version']}, "
        f"{size / 2**20:,.1f} MiB, every sha256 checked)",
        f"{manifest['name']}: {manifest['num_nodes']:,} nodes, {manifest['num_edges']:,} edges, "
        f"{manifest['num_features']} features, {manifest['num_classes']} classes, "
        f"train/val/test {counts.get('train', '?')}/{counts.get('val', '?')}/"
        f"{counts.get('test', '?')}",
        f"source {manifest.get('source') or '?'}, written {manifest.get('created', '?')}",
    ])


def run(args) -> int:
    """Validate the store or converted graph; print the summary. Damaged ones exit with code 2."""
    from pathlib import Path

    from partitioning.store import validate_store

    from ..data.converted import is_converted, verify_converted

    if Path(args.store).is_dir() and is_converted(args.store):
        manifest = verify_converted(args.store)
        say(json.dumps(manifest, indent=1) if args.json
            else format_converted_summary(args.store, manifest))
        return 0
    summary = validate_store(args.store)
    say(json.dumps(summary, indent=1) if args.json else format_store_summary(summary))
    return 0
