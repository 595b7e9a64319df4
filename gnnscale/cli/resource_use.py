"""What a long command prints at its end: wall time and this process's peak resident memory."""

from __future__ import annotations

import resource
import sys
import time


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (Linux reports kilobytes)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


class Stopwatch:
    """Wall time since creation, and a one-line report of time and peak memory."""

    def __init__(self):
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def report(self) -> str:
        return (f"{self.elapsed():.1f} s, peak memory {peak_rss_bytes() / 2**30:.2f} GiB "
                f"(resident, this process)")


def byte_progress(total: int, description: str):
    """A tqdm bar over bytes on a terminal; a no-op elsewhere (logs stay clean)."""
    return _bar(total, description, unit="B", unit_scale=True, unit_divisor=1024)


def part_progress(total: int, description: str):
    """A tqdm bar over parts on a terminal; a no-op elsewhere."""
    return _bar(total, description, unit="part")


def _bar(total: int, description: str, **options):
    if not sys.stderr.isatty():
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=description, file=sys.stderr, leave=False,
                dynamic_ncols=True, **options)


class _NoBar:
    def update(self, _n=1) -> None:
        pass

    def close(self) -> None:
        pass
