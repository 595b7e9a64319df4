"""The ``--cpu-profile`` document of the suite's accounting (tests/conftest.py)."""

from __future__ import annotations

from collections import defaultdict


def cpu_profile(cpu: dict, wall: dict) -> dict:
    """The ``--cpu-profile`` document: totals, then files and tests by CPU seconds."""
    files = defaultdict(lambda: {"cpu_s": 0.0, "wall_s": 0.0, "tests": 0})
    for nodeid, seconds in cpu.items():
        entry = files[nodeid.split("::")[0]]
        entry["cpu_s"] += seconds
        entry["wall_s"] += wall.get(nodeid, 0.0)
        entry["tests"] += 1
    return {"cpu_s": sum(cpu.values()), "wall_s": sum(wall.values()), "tests": len(cpu),
            "files": dict(sorted(files.items(), key=lambda kv: -kv[1]["cpu_s"])),
            "tests_by_cpu": {nodeid: {"cpu_s": seconds, "wall_s": wall.get(nodeid, 0.0)}
                             for nodeid, seconds in sorted(cpu.items(), key=lambda kv: -kv[1])}}


def longest_files_first(nodeids: list[str], profile: dict | None) -> list[int]:
    """The order to run tests in: whole files, those that took longest in ``profile`` (a
    ``--cpu-profile`` document) first, files it does not know last, tests of a file in their
    own order. With two workers taking a file each at a time, a long file that comes last
    keeps one worker busy after the other ran out of work."""
    wall = {name: entry["wall_s"] for name, entry in (profile or {}).get("files", {}).items()}
    return sorted(range(len(nodeids)), key=lambda i: -wall.get(nodeids[i].split("::")[0], 0.0))
