"""How many Python processes `make test` starts, and what they cost: the log that
``tools/process_log/sitecustomize.py`` writes, summed up per test file, as a Markdown table.

    cp tools/process_log/sitecustomize.py .venv/lib/python3*/site-packages/
    PROCESS_LOG=$PWD/benchmarks/results/test_suite_processes.tsv make test
    rm .venv/lib/python3*/site-packages/sitecustomize.py
    .venv/bin/python benchmarks/test_suite_processes.py benchmarks/results/test_suite_processes.tsv

Every rank of a launch is a process; a process that imported torch pays its start-up (about
2.5 CPU seconds here) before any work. The pytest workers themselves are left out.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def read_log(path: Path) -> list[dict]:
    """The log's processes: pid, cpu_s, wall_s, torch (bool), command, test file ('' where the
    process was started outside a test)."""
    processes = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != 6:
            raise ValueError(f"{path}:{number}: expected 6 tab-separated fields, got "
                             f"{len(fields)}")
        pid, cpu, wall, torch, command, test = fields
        test_file = test.split("::")[0] if test != "-" else ""
        processes.append({"pid": int(pid), "cpu_s": float(cpu), "wall_s": float(wall),
                          "torch": torch == "1", "command": command, "test_file": test_file})
    return processes


def is_pytest_worker(process: dict) -> bool:
    return "xdist" in process["command"] or "execnet" in process["command"] \
        or "pytest" in process["command"].split(" ", 1)[0]


def table(processes: list[dict], top: int) -> str:
    """The ``top`` test files by processes started, the rest in one line, then the totals."""
    started = [p for p in processes if p["test_file"] and not is_pytest_worker(p)]
    per_file = defaultdict(list)
    for process in started:
        per_file[process["test_file"]].append(process)
    ranked = sorted(per_file.items(), key=lambda item: (-len(item[1]), item[0]))
    rows = ["| test file | processes | with torch | their CPU s |", "|---|---:|---:|---:|"]

    def row(name: str, group: list[dict]) -> str:
        return (f"| {name} | {len(group)} | {sum(p['torch'] for p in group)} | "
                f"{sum(p['cpu_s'] for p in group):.0f} |")

    for name, group in ranked[:top]:
        rows.append(row(f"`{name}`", group))
    rest = [p for _, group in ranked[top:] for p in group]
    if rest:
        rows.append(row(f"{len(ranked) - top} other files", rest))
    rows.append(row("**every test**", started))
    with_torch = [p["cpu_s"] for p in started if p["torch"]]
    if with_torch:
        rows.append("")
        rows.append(f"A process that imported torch used {statistics.median(with_torch):.2f} "
                    f"CPU s (median of {len(with_torch)}).")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="the PROCESS_LOG file of a make test run")
    parser.add_argument("--top", type=int, default=12, help="test files listed (default 12)")
    args = parser.parse_args(argv)
    if not args.log.is_file():
        print(f"test_suite_processes: no such log: {args.log}", file=sys.stderr)
        return 2
    try:
        processes = read_log(args.log)
    except ValueError as exc:
        print(f"test_suite_processes: {exc}", file=sys.stderr)
        return 2
    print(table(processes, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
