"""Where `make test`'s time goes: the files of a ``--cpu-profile`` JSON (tests/conftest.py) that
used the most CPU seconds (their own and their subprocesses', every ``mpirun`` rank included),
as a Markdown table, with the totals.

    d=$(mktemp -d) && git clone -q . $d/gnnscale && (cd $d/gnnscale && make test \\
        PYTEST_ARGS="--cpu-profile $PWD/benchmarks/results/test_suite_cpu.json")
    .venv/bin/python benchmarks/test_suite_table.py benchmarks/results/test_suite_cpu.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def table(profile: dict, top: int) -> str:
    """The ``top`` files by CPU seconds, then one line for the rest and one for the whole suite."""
    files = list(profile["files"].items())
    rows = ["| test file | tests | CPU s | wall s |", "|---|---:|---:|---:|"]
    for name, entry in files[:top]:
        rows.append(f"| `{name}` | {entry['tests']} | {entry['cpu_s']:.0f} | "
                    f"{entry['wall_s']:.0f} |")
    rest = files[top:]
    if rest:
        rows.append(f"| {len(rest)} other file{'s' * (len(rest) > 1)} | "
                    f"{sum(e['tests'] for _, e in rest)} | "
                    f"{sum(e['cpu_s'] for _, e in rest):.0f} | "
                    f"{sum(e['wall_s'] for _, e in rest):.0f} |")
    rows.append(f"| **the suite** | {profile['tests']} | {profile['cpu_s']:.0f} | "
                f"{profile['wall_s']:.0f} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", help="a JSON file written by pytest --cpu-profile")
    parser.add_argument("--top", type=int, default=15, help="files listed one by one")
    args = parser.parse_args(argv)
    try:
        profile = json.loads(Path(args.profile).read_text())
        print(table(profile, args.top))
    except (OSError, ValueError, KeyError) as exc:
        print(f"test_suite_table: {args.profile} is not a --cpu-profile file: {exc}",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
