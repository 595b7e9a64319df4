"""The default gradient bucket size, from a latency/bandwidth fit of the actual communicator.

An allreduce of ``n`` bytes costs about ``t(n) = alpha + beta * n`` (Hockney's model). With
``k`` buckets the total is ``k * alpha + beta * N``: small buckets start communicating earlier in
backward but pay ``alpha`` more often. We pick the size at which latency is a fixed fraction
:data:`LATENCY_SHARE` of a bucket's time, ``n = alpha / beta * (1 - s) / s``, clamped to
[:data:`MIN_BUCKET_BYTES`, :data:`MAX_BUCKET_BYTES`].

The fit is measured once per (backend, number of ranks, hosts) and cached in memory and in
``$GNNSCALE_CACHE_DIR`` (default ``~/.cache/gnnscale``)/``bucket_fit.json``. Every rank must use
the same bucket layout, so timings are max-reduced and rank 0's cache decides for everyone.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import numpy as np
import torch

from ..comm import Communicator

LATENCY_SHARE = 0.1
MIN_BUCKET_BYTES = 256 * 1024
MAX_BUCKET_BYTES = 64 * 2**20
PROBE_BYTES = (4096, 65536, 1 << 20, 4 << 20)
_MEMORY: dict[str, dict] = {}


def fit_latency_bandwidth(sizes_bytes, seconds) -> tuple[float, float]:
    """Least-squares ``(alpha, beta)`` of ``t = alpha + beta * n`` (both clipped at >= 0)."""
    sizes = np.asarray(sizes_bytes, dtype=np.float64)
    times = np.asarray(seconds, dtype=np.float64)
    design = np.stack([np.ones_like(sizes), sizes], axis=1)
    weights = 1.0 / np.maximum(times, 1e-9)  # relative error: small sizes matter as much
    (alpha, beta), *_ = np.linalg.lstsq(design * weights[:, None], times * weights, rcond=None)
    return max(float(alpha), 0.0), max(float(beta), 1e-15)


def bucket_bytes_from_fit(alpha: float, beta: float) -> int:
    """The bucket size at which latency is :data:`LATENCY_SHARE` of a bucket's allreduce."""
    size = alpha / beta * (1.0 - LATENCY_SHARE) / LATENCY_SHARE
    return int(min(max(size, MIN_BUCKET_BYTES), MAX_BUCKET_BYTES))


def measure_allreduce(comm: Communicator, sizes_bytes=PROBE_BYTES, repeats: int = 5) -> list:
    """Median seconds of a float32 allreduce at each size (max over ranks, same on all).

    The probes come from ``comm.alloc_buffer``, the memory gradient buckets live in, so the
    fit describes the path buckets take (shared memory for MPI on one host).
    """
    medians = []
    for nbytes in sizes_bytes:
        buffer = comm.alloc_buffer(max(1, nbytes // 4))
        comm.allreduce(buffer)  # warm-up: connections, pages
        samples = []
        for _ in range(repeats):
            comm.barrier()
            start = time.perf_counter()
            comm.allreduce(buffer)
            samples.append(time.perf_counter() - start)
        medians.append(float(np.median(samples)))
        comm.free_buffer(buffer)
    return comm.allreduce(torch.tensor(medians, dtype=torch.float64), "max").tolist()


def _cache_file() -> Path:
    root = os.environ.get("GNNSCALE_CACHE_DIR") or Path.home() / ".cache" / "gnnscale"
    return Path(root) / "bucket_fit.json"


def _cache_key(comm: Communicator) -> str:
    hosts = sorted(set(comm.allgather_object(socket.gethostname())))
    return f"{comm.backend}|{comm.size}|{','.join(hosts)}"


def overlap_bucket_bytes(total_bytes: int, cap: int, floor: int = MIN_BUCKET_BYTES) -> int:
    """A quarter of the gradients' ``total_bytes``, so that several buckets overlap with
    backward (a single bucket would overlap nothing), kept within ``[floor, cap]``."""
    return min(cap, max(floor, total_bytes // 4))


def default_bucket_bytes(comm: Communicator, refresh: bool = False) -> int:
    """Bucket size for ``comm`` from the (cached) latency/bandwidth fit; collective call."""
    if comm.size == 1:
        return MAX_BUCKET_BYTES
    key = _cache_key(comm)
    entry = None if refresh else _MEMORY.get(key)
    if entry is None and not refresh:
        entry = comm.broadcast_object(_read_cache().get(key) if comm.rank == 0 else None)
    if entry is None:
        seconds = measure_allreduce(comm)
        alpha, beta = fit_latency_bandwidth(PROBE_BYTES, seconds)
        entry = {"alpha_s": alpha, "beta_s_per_byte": beta,
                 "bucket_bytes": bucket_bytes_from_fit(alpha, beta),
                 "probe_bytes": list(PROBE_BYTES), "probe_s": seconds}
        if comm.rank == 0:
            _write_cache(key, entry)
    _MEMORY[key] = entry
    return int(entry["bucket_bytes"])


def _read_cache() -> dict:
    try:
        return json.loads(_cache_file().read_text())
    except (OSError, ValueError):
        return {}


def _write_cache(key: str, entry: dict) -> None:
    path = _cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _read_cache()
        data[key] = entry
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(path)
    except OSError:  # a read-only home only costs a re-measurement next time
        pass
