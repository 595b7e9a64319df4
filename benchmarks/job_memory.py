"""The memory a whole job holds at once: every process under a command, sampled together.

Summing each rank's peak RSS overstates what a multi-rank job needs on one host twice over:
the peaks happen at different times (rank 0 partitions while the others wait), and pages
shared between processes (the libraries' code, shared-memory transport segments, a mapped
graph file) count once per process that touches them. The kernel's proportional set size
(PSS, ``/proc/PID/smaps_rollup``) charges a shared page ``1/n`` to each of its ``n`` users,
so the sum of PSS over a job's processes at one instant is the memory the job holds then.

:class:`JobMemorySampler` polls every process below a root pid (the launcher, ``mpirun``
and its ranks) at a fixed interval and keeps the largest total PSS, the largest total RSS
and every process's largest PSS/RSS. Sampling misses peaks shorter than the interval; the
result carries the number of samples so a reader can judge.

Used by ``benchmarks/large_graphs.py --step rmat21-inmemory``.
"""

from __future__ import annotations

import os
import threading
import time


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(name))
    return children


def descendants(root: int) -> list[int]:
    """``root`` and every process below it."""
    children, found, todo = _children_map(), [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def rss_and_pss(pid: int) -> tuple[int, int] | None:
    """(RSS, PSS) bytes of one process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            text = f.read()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss"):
            values[key] = int(rest.split()[0]) * 1024
    if "Rss" not in values:
        return None
    return values["Rss"], values["Pss"]


def command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return ""


class JobMemorySampler:
    """Poll the processes below ``root_pid`` every ``interval`` seconds (in a thread)."""

    def __init__(self, root_pid: int, interval: float = 0.2):
        self.root_pid, self.interval = root_pid, interval
        self.peak_total_pss = self.peak_total_rss = 0
        self.samples = 0
        self.per_process: dict[int, dict] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "JobMemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        total_rss = total_pss = 0
        for pid in descendants(self.root_pid):
            got = rss_and_pss(pid)
            if got is None:
                continue
            rss, pss = got
            total_rss += rss
            total_pss += pss
            entry = self.per_process.setdefault(pid, {"command": command_of(pid),
                                                      "peak_rss": 0, "peak_pss": 0})
            entry["peak_rss"] = max(entry["peak_rss"], rss)
            entry["peak_pss"] = max(entry["peak_pss"], pss)
        self.peak_total_rss = max(self.peak_total_rss, total_rss)
        self.peak_total_pss = max(self.peak_total_pss, total_pss)
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            self.sample()
            self._stop.wait(max(0.0, self.interval - (time.perf_counter() - started)))

    def result(self) -> dict:
        """Peaks in bytes, the sample count, and each process's peaks (largest first)."""
        processes = sorted(self.per_process.values(), key=lambda p: -p["peak_pss"])
        return {"peak_total_pss_bytes": self.peak_total_pss,
                "peak_total_rss_bytes": self.peak_total_rss,
                "samples": self.samples, "interval_s": self.interval,
                "processes": [p for p in processes if p["peak_rss"] > 50 * 2**20]}
