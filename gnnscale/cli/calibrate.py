"""Measure the time model's constants on this host (``gnnscale tune --calibrate``).

Compute constants per thread count (1, 2, 4, ... up to the cores of this host): the CSR
aggregation kernel the engine uses (``gamma_nnz`` per edge, ``gamma_edge`` per edge x
feature and ``gamma_row`` per output row, fitted over rows of several widths and degrees: narrow
rows cost mostly per edge, sparse rows per row; rows narrower than 16, which take a kernel of
their own, get its own line from rows 4 and 8 wide: ``gamma_nnz_narrow``,
``gamma_edge_narrow``; ``benchmarks/narrow_aggregation.py``), dense GEMMs
(``gamma_flop``), an elementwise op (``gamma_elem``) and a row gather + scatter-add
(``gamma_gather``, GAT's per-edge work), each on data that stays in the cache and again on
data four times the last-level cache, within bounds (:func:`beyond_cache_working_set`)
(``*_mem``; ``gamma_byte``: seconds per byte a skinny GEMM streams from memory), with the
cache the process effectively has (``cache_bytes``: the knee of the aggregation's rate over a
ladder of working sets, :func:`measure_cache_knee`, at most the last-level cache reported)
recorded for the model to choose between them, beside the cache each core has to itself
(``private_cache_bytes``, its L2 as sysfs reports it: what the model's streaming ops count
on); the training loss and the evaluation's metrics
per row and per logit (``gamma_loss_*``, ``gamma_eval_*``, :mod:`.calibrate_outputs`).
Each is the median of several runs of several sizes,
fitted through the origin. ``layer_overhead_s``: a 2-layer GCN training step on a 64-node graph,
per layer and pass. Shared-memory ``alltoallv`` latency and bandwidth: a 2-rank ``mpirun`` of
this module (``python -m gnnscale.cli.calibrate --alltoallv``), alpha from the smallest message
(8 B), beta from the slope to the largest (4 MiB per peer); the same job then trains tiny steps
on its 2 ranks for ``exchange_overhead_s``, the fixed cost of each exchange beyond the model's
other terms (:func:`job_fixed_costs`, as :func:`calibrate_in_job` fits it in a running job).
The work per byte a rank exchanges with other hosts (``exchange_byte_s``) needs ranks on two
hosts: ``python -m gnnscale.cli.calibrate --exchange-work [CONSTANTS.json]`` under an mpirun
across them measures it (:func:`exchange_byte_work`) into the file. How much a rank's work varies
(``noise_s``, the variance per second of work: :func:`noise_rate`) is measured in a running
job of several ranks (:func:`calibrate_in_job`), and by ``--exchange-work`` with the work per
byte.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch


#: a measurement whose slowest repeat takes more than this many times its fastest was taken
#: on an unsteady host (other work competing for its cores or memory)
UNSTEADY_SPREAD = 2.0
#: the share of a calibration's measurements that may be unsteady before its figures are
#: reported as unreliable (a few always are: a page fault, a timer tick)
UNSTEADY_SHARE = 0.25

#: the clock every measurement reads (tests put a fake one here)
clock = time.perf_counter
#: a measurement stops after this many repeats once every repeat has taken at least
#: :data:`LONG_CALL_S`: a call that long already averages out a timer tick or a page fault, and
#: the beyond-the-cache measurements, whose calls take 0.1-0.5 s, are most of a calibration
LONG_REPEATS = 3
LONG_CALL_S = 0.1


class Steadiness:
    """The spread (slowest / fastest repeat) of each measurement of a calibration, and the
    warning they add up to."""

    def __init__(self):
        self.spreads: list[tuple[str, float]] = []
        self.where = ""  # appended to the names recorded (e.g. "at 2 threads")

    def add(self, what: str, times) -> None:
        """Record the repeats' ``times`` (seconds) of measurement ``what``."""
        times = [float(t) for t in times]
        fastest = min(times)
        name = f"{what} {self.where}".strip()
        self.spreads.append((name, max(times) / fastest if fastest > 0 else float("inf")))

    def warning(self) -> str | None:
        """One line when more than :data:`UNSTEADY_SHARE` of the measurements spread by more
        than :data:`UNSTEADY_SPREAD`, naming the worst; None on a steady host."""
        unsteady = [(spread, what) for what, spread in self.spreads if spread > UNSTEADY_SPREAD]
        if not self.spreads or len(unsteady) <= UNSTEADY_SHARE * len(self.spreads):
            return None
        spread, what = max(unsteady)
        return (f"warning: this host was unsteady while calibrating: the repeats of "
                f"{len(unsteady)} of {len(self.spreads)} measurements differ by more than "
                f"{UNSTEADY_SPREAD:g}x (worst {spread:.1f}x: {what}); the constants are "
                f"unreliable, calibrate again on an idle host")


#: where :func:`_median_time` records spreads while :func:`calibrate` runs
_steadiness: Steadiness | None = None


def _median_time(fn, repeats: int = 5, what: str = "") -> float:
    """Median of ``repeats`` timed calls of ``fn`` after one untimed call (of
    :data:`LONG_REPEATS` where each takes :data:`LONG_CALL_S` or more); the repeats' spread
    goes to the calibration's :class:`Steadiness`, as ``what``."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        times.append(clock() - t0)
        if len(times) >= LONG_REPEATS and min(times) >= LONG_CALL_S:
            break
    if _steadiness is not None:
        _steadiness.add(what or getattr(fn, "__name__", "measurement"), times)
    return float(np.median(times))


def _interleaved_median_times(fns: list, repeats: int = 7, what: str = "") -> list[float]:
    """:func:`_median_time` of each of ``fns``, the calls taking turns (one untimed call each,
    then ``repeats`` rounds of one timed call each), so that a host whose speed drifts within
    seconds slows every measurement alike: a fit across them (as :func:`per_edge_and_value`'s
    across widths) would otherwise read the drift as a difference between them."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, taken in zip(fns, times):
            t0 = clock()
            fn()
            taken.append(clock() - t0)
    if _steadiness is not None:
        for taken in times:
            _steadiness.add(what, taken)
    return [float(np.median(taken)) for taken in times]


def per_edge_and_value(nnz, widths, seconds) -> tuple[float, float]:
    """``(seconds per non-zero, seconds per non-zero and value)`` of aggregations of ``nnz``
    non-zeros over rows ``widths`` wide that took ``seconds``: ``t = nnz (a + b w)`` fitted
    with each measurement's relative error counting alike. Needs two widths or more to tell
    them apart, and measurements that do (the wider rows slower per edge, the narrower slower
    per value); otherwise (one width, or a noisy host) everything is per value, the cost per
    edge 0."""
    nnz, widths, seconds = (np.asarray(v, dtype=np.float64) for v in (nnz, widths, seconds))
    design = np.stack([nnz, nnz * widths], axis=1) / seconds[:, None]
    if np.unique(widths).size >= 2:
        (per_nnz, per_value), *_ = np.linalg.lstsq(design, np.ones_like(seconds), rcond=None)
        if per_nnz >= 0 and per_value > 0:
            return float(per_nnz), float(per_value)
    return 0.0, _through_origin(nnz * widths, seconds)


def per_edge_value_and_row(nnz, widths, rows, seconds) -> tuple[float, float, float]:
    """``(per non-zero, per non-zero and value, per output row)`` of aggregations of ``nnz``
    non-zeros over rows ``widths`` wide into ``rows`` output rows that took ``seconds``:
    ``t = nnz (a + b w) + rows r``, fitted as :func:`per_edge_and_value`. The rows tell apart
    only where the non-zeros per row differ (a block of one or two per row, as a vertex cut's
    mirrors have, against ten or twenty); where they do not, or the fit finds a negative
    term, :func:`per_edge_and_value`'s two terms and no cost per row."""
    nnz, widths, rows, seconds = (np.asarray(v, dtype=np.float64)
                                  for v in (nnz, widths, rows, seconds))
    if np.unique(widths).size >= 2 and np.unique(nnz / rows).size >= 2:
        design = np.stack([nnz, nnz * widths, rows], axis=1) / seconds[:, None]
        (per_nnz, per_value, per_row), *_ = np.linalg.lstsq(design, np.ones_like(seconds),
                                                            rcond=None)
        if per_nnz >= 0 and per_value > 0 and per_row >= 0:
            return float(per_nnz), float(per_value), float(per_row)
    return (*per_edge_and_value(nnz, widths, seconds), 0.0)


def narrow_line(nnz, widths, rows, seconds, per_row: float) -> tuple[float, float]:
    """``(per non-zero, per non-zero and value)`` of the small rows' kernel (rows narrower than
    16) from its aggregations of ``nnz`` non-zeros over rows ``widths`` wide into ``rows``
    output rows that took ``seconds``, less ``per_row`` a row (fitted on the wide rows): a
    line through two widths or more, or flat (the median cost per non-zero) where there is
    one width or the line would fall with the width (beyond the cache a narrow row's gather
    waits on memory whatever its width)."""
    nnz, widths, rows, seconds = (np.asarray(v, dtype=np.float64)
                                  for v in (nnz, widths, rows, seconds))
    per_edge = np.maximum(seconds - rows * per_row, 0.0) / nnz
    if np.unique(widths).size >= 2:
        slope, intercept = np.polyfit(widths, per_edge, 1)
        if slope >= 0 and intercept >= 0:
            return float(intercept), float(slope)
    return float(np.median(per_edge)), 0.0


def _through_origin(work, seconds) -> float:
    work, seconds = np.asarray(work, float), np.asarray(seconds, float)
    return float(max(0.0, (work @ seconds) / (work @ work)))


#: where Linux describes the first CPU's caches (one ``index*`` folder per cache)
SYSFS_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


def size_bytes(text: str) -> int:
    """``512K``, ``2M``, ``1G`` (binary units, as sysfs writes cache sizes) or plain bytes ->
    bytes; ValueError where it is none of these."""
    text = text.strip().upper()
    unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:])
    return int(float(text[:-1]) * unit) if unit else int(text)


def _cache_levels() -> dict:
    """This host's data and unified CPU caches, level -> bytes (Linux sysfs; empty where it
    cannot be read)."""
    levels = {}
    for entry in SYSFS_CACHES.glob("index*"):
        try:
            if (entry / "type").read_text().strip() == "Instruction":
                continue
            size = size_bytes((entry / "size").read_text())
            level = int((entry / "level").read_text())
            levels[level] = max(levels.get(level, 0), size)
        except (OSError, ValueError):
            continue
    return levels


def last_level_cache_bytes() -> int:
    """Size of this host's largest CPU cache (Linux sysfs), or 32 MiB where it cannot be read."""
    return max(_cache_levels().values(), default=32 << 20)


def private_cache_bytes() -> int:
    """Size of the cache each core has to itself (Linux sysfs): the largest data or unified
    cache below the last level (a core's L2), or 0 where it cannot be read or the host reports
    one level only."""
    levels = _cache_levels()
    return max((size for level, size in levels.items() if level < max(levels)), default=0)


#: each beyond-the-cache measurement holds at most this many times its working set at once
#: (the aggregation: features, output, CSR; the gather: table, gathered rows, output)
PEAK_PER_WORKING_SET = 3
#: the working set beyond the cache is at most this, whatever the cache's size: a virtual machine
#: may report its host's last-level cache, which its tenants share; the aggregation's rate
#: per edge still falls with size beyond it (docs/planning.md, "The time model measured"),
#: where 1 GiB arrays would take a minute and 9 GiB per thread count to calibrate
MAX_WORKING_SET = 256 << 20


def beyond_cache_working_set(cache_bytes: int, measuring_at_once: int = 1,
                             available: int | None = None) -> int:
    """Bytes of each array the ``*_mem`` constants stream: four times ``cache_bytes``, at most
    :data:`MAX_WORKING_SET` and at most what keeps the ``measuring_at_once`` processes measuring
    on this host within a quarter of its available memory (``available``, default: what
    :func:`~gnnscale.host_memory.available_bytes` sees); at least 16 MiB."""
    from ..host_memory import available_bytes

    available = available_bytes() if available is None else available
    room = available // (4 * PEAK_PER_WORKING_SET * max(1, measuring_at_once))
    return int(max(16 << 20, min(4 * cache_bytes, MAX_WORKING_SET, room)))


def compute_constants(threads: int, scale: float = 1.0, cache_bytes: int | None = None,
                      measuring_at_once: int = 1) -> dict:
    """``gamma_*`` constants with ``threads`` torch threads: each op on data that stays in the
    cache (sizes shrunk by ``scale``) and, for the ``*_mem`` ones and ``gamma_byte``, on data
    beyond ``cache_bytes`` (default: this host's last-level cache; sized by
    :func:`beyond_cache_working_set` for ``measuring_at_once`` processes), whatever ``scale``.
    Freed memory is kept for reuse as the trainer keeps it, so no timing pays page faults."""
    from ..engine.memory import retain_freed_memory

    retain_freed_memory()
    torch.set_num_threads(threads)
    cached = _constants_at(lambda n: max(1000, int(n * scale)), cached=True)
    beyond = beyond_cache_working_set(cache_bytes or last_level_cache_bytes(), measuring_at_once)
    memory = _constants_at(lambda n: n, cached=False, working_set=beyond)
    from .calibrate_activation import activation_constants
    from .calibrate_outputs import output_constants

    flop = cached["gamma_flop"]
    in_cache = [max(1 << 14, int(n * scale)) for n in ELEMENT_VALUES[:2]]
    activation = {**activation_constants(_median_time, _through_origin, in_cache, "", flop),
                  **activation_constants(_median_time, _through_origin, [beyond // 4], "_mem",
                                         flop)}
    outputs = output_constants(_interleaved_median_times, per_edge_and_value, scale)
    return {**cached, **memory, **activation, **outputs}


#: the aggregation the cache knee is measured with: its width, its degree, and its ladder's
#: smallest working set (each rung doubles it, up to a quarter of the beyond-the-cache one).
#: Narrow rows: a gather of a few values waits on the cache's latency, and graphs' raw
#: features and a model's classes are a few values wide, so their aggregations feel the
#: nearest cache running out first (here the knee is 1 MiB with rows 8 wide, a core's L2,
#: and 12 MiB with rows 32 wide, whose cost per value hides the latency; docs/planning.md,
#: "Checked on shaped links")
KNEE_WIDTH, KNEE_DEGREE, KNEE_SMALLEST = 8, 8, 1 << 18


def knee_rate(constants: dict) -> float:
    """Seconds per edge value of the knee's aggregation (rows :data:`KNEE_WIDTH` wide) beyond
    the cache, from :func:`compute_constants`' ``*_mem`` constants (the small rows' kernel's
    line where they have it: :func:`planning.cost_model.nnz_seconds`)."""
    from planning.cost_model import nnz_seconds

    return nnz_seconds({"gamma_nnz_mem": 0.0, **constants}, KNEE_WIDTH, "_mem") / KNEE_WIDTH


def measure_cache_knee(beyond: int, beyond_rate: float) -> float:
    """The cache this process effectively has, in bytes
    (:func:`planning.cache_knee.fit_cache_knee`): the aggregation's time per edge value at
    working sets of 256 KiB, 512 KiB, 1 MiB, ... up to a quarter of ``beyond``, where it took
    ``beyond_rate`` (:func:`knee_rate`, measured at that size with the same degree); the
    smallest rung is :data:`KNEE_SMALLEST`."""
    from planning.cache_knee import fit_cache_knee

    from ..graph.sparse import SparseBlock

    rng = np.random.default_rng(1)
    sizes = [KNEE_SMALLEST << k for k in range(40) if KNEE_SMALLEST << k <= beyond // 4]
    rates = []
    for size in sizes:
        n = max(1000, size // (4 * KNEE_WIDTH))
        matrix = _random_csr(n, KNEE_DEGREE, rng)
        block, x = SparseBlock(matrix), _values(n, KNEE_WIDTH)
        seconds = _median_time(lambda: block.matmul(x), repeats=3, what="cache knee")
        rates.append(seconds / (matrix.nnz * KNEE_WIDTH))
        del matrix, block, x
    return fit_cache_knee(sizes + [beyond], rates + [beyond_rate])


def _values(*shape: int) -> torch.Tensor:
    """A float32 tensor of ``shape`` filled uniformly from [-1, 1): as good an input as normal
    draws for timing, and several times faster to make at the calibration's sizes."""
    return torch.empty(shape).uniform_(-1.0, 1.0)


def _random_csr(n: int, degree: int, rng) -> "sp.csr_matrix":
    """An ``n`` x ``n`` matrix of ones with ``degree`` uniformly random columns per row, built
    as CSR directly (no coordinate copy of the non-zeros)."""
    import scipy.sparse as sp

    indptr = np.arange(0, n * degree + 1, degree, dtype=np.int64)
    indices = rng.integers(0, n, n * degree, dtype=np.int32 if n < 2**31 else np.int64)
    return sp.csr_matrix((np.ones(n * degree, np.float32), indices, indptr), shape=(n, n))


#: values of each array the elementwise constant is timed on in the cache
ELEMENT_VALUES = (1 << 18, 1 << 20, 1 << 22)


def _constants_at(size, cached: bool, working_set: int = 0) -> dict:
    """The constants of :func:`compute_constants` at one set of sizes."""
    from ..graph.sparse import SparseBlock

    from planning.cost_model import SMALL_ROWS_BELOW

    rng = np.random.default_rng(0)
    suffix = "" if cached else "_mem"
    if cached:
        # rows 16, 64 and 128 wide, each at most 2.5 MB of rows: in a core's own cache; the
        # first again with 2 non-zeros a row, for the cost per output row; then rows 4 and 8
        # wide, for the small rows' kernel's own line
        aggregations = [(size(n), deg, w) for n, deg, w in
                        ((40000, 10, 16), (10000, 20, 64), (5000, 10, 128), (40000, 2, 16),
                         (40000, 10, 4), (40000, 10, 8))]
        elements = [max(1 << 14, size(n)) for n in ELEMENT_VALUES]
        gathered = [(size(rows), w) for rows, w in ((20000, 16), (100000, 64))]
    else:  # every gathered row, array or table beyond the cache
        aggregations = [(working_set // (4 * w), deg, w)
                        for w, deg in ((32, 8), (64, 8), (32, 2), (8, 8))]
        elements = [working_set // 4]
        gathered = [(working_set // (4 * 64), 64)]  # one gathered row per table row
    agg_widths = [w for _, _, w in aggregations]
    if cached:  # small: every width held at once, timed in turns
        blocks = [(SparseBlock(_random_csr(n, deg, rng)), _values(n, w))
                  for n, deg, w in aggregations]
        agg_nnz = [block.nnz for block, _ in blocks]
        agg_s = _interleaved_median_times(
            [lambda b=block, x=x: b.matmul(x) for block, x in blocks], what="aggregation")
        del blocks
    else:  # one at a time: each holds a working set beyond the cache
        agg_nnz, agg_s = [], []
        for n, deg, width in aggregations:
            block, x = SparseBlock(_random_csr(n, deg, rng)), _values(n, width)
            agg_nnz.append(block.nnz)
            agg_s.append(_median_time(lambda: block.matmul(x), what=f"aggregation{suffix}"))
            del block, x
    columns = (agg_nnz, agg_widths, [n for n, _, _ in aggregations], agg_s)

    def taking(small: bool) -> list:
        """``columns`` of the aggregations of the small rows' kernel, or of the others."""
        return [[c[i] for i, w in enumerate(agg_widths) if (w < SMALL_ROWS_BELOW) == small]
                for c in columns]

    per_nnz, per_value, per_row = per_edge_value_and_row(*taking(small=False))
    narrow_nnz, narrow_value = narrow_line(*taking(small=True), per_row)
    elems, elem_s = [], []
    for n in elements:
        x, out = _values(n), torch.empty(n)
        elems.append(n)
        elem_s.append(_median_time(lambda: torch.clamp_min(x, 0.0, out=out),
                                  what=f"elementwise{suffix}"))
    gathers, gather_s = [], []
    for rows, width in gathered:
        src = _values(rows, width)
        index = torch.from_numpy(rng.integers(0, rows, (4 if cached else 1) * rows))
        out = torch.zeros(rows, width)
        gathers.append(2 * len(index) * width)  # one gather + one scatter-add per edge value
        gather_s.append(_median_time(lambda: out.index_add_(0, index, src.index_select(0, index)),
                                    what=f"gather{suffix}"))
    constants = {f"gamma_edge{suffix}": per_value, f"gamma_nnz{suffix}": per_nnz,
                 f"gamma_row{suffix}": per_row, f"gamma_edge_narrow{suffix}": narrow_value,
                 f"gamma_nnz_narrow{suffix}": narrow_nnz,
                 f"gamma_elem{suffix}": _through_origin(elems, elem_s),
                 f"gamma_gather{suffix}": _through_origin(gathers, gather_s)}
    if cached:
        flops, flop_s = [], []
        for n, a, b in ((20000, 64, 64), (20000, 256, 128), (50000, 128, 16)):
            n = size(n)
            left, right, out = _values(n, a), _values(a, b), torch.empty(n, b)
            flops.append(2.0 * n * a * b)
            flop_s.append(_median_time(lambda: torch.mm(left, right, out=out), what="GEMM"))
        constants["gamma_flop"] = _through_origin(flops, flop_s)
    else:  # skinny products that stream their input from memory: seconds per byte moved
        moved, moved_s = [], []
        for a, b in ((128, 16), (64, 64)):
            n = working_set // (4 * a)
            left, right, out = _values(n, a), _values(a, b), torch.empty(n, b)
            moved.append(4.0 * n * (a + b))
            moved_s.append(_median_time(lambda: torch.mm(left, right, out=out),
                                        what="skinny GEMM"))
        constants["gamma_byte"] = _through_origin(moved, moved_s)
    return constants


def layer_overhead(threads: int = 1) -> float:
    """Seconds per layer and pass of a training step on a graph too small to compute."""
    from ..comm.single import SingleCommunicator
    from ..data import load_dataset
    from ..engine import LocalProblem, Trainer
    from ..nn import GNN

    torch.set_num_threads(threads)
    data = load_dataset("sbm", num_nodes=64)
    comm = SingleCommunicator()  # also inside a multi-rank job: this rank alone
    problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64), comm)
    model = GNN("gcn", problem.num_features, 16, problem.num_classes, num_layers=2)
    trainer = Trainer(model, problem, comm)
    return _median_time(trainer.train_step, repeats=20, what="training step") / 4


def _alltoallv_rank_main(constants: str | None = None) -> None:
    """Run under 2-rank mpirun: time alltoallv of growing sizes; with ``constants`` (a cost
    model file), the job's fixed cost per exchange too (:func:`job_fixed_costs`, one thread
    per rank). Rank 0 prints ``{"rows": ..., "exchange_overhead_s": ...}`` as JSON."""
    from planning.cost_model import CostModel

    from .. import comm as comm_module

    comm = comm_module.init("mpi")
    rows = alltoallv_timings(comm)
    result = {"rows": rows}
    if constants is not None:
        costs = CostModel.from_dict({**CostModel.load(constants).to_dict(),
                                     **fit_alltoallv(rows)})
        torch.set_num_threads(1)
        result["exchange_overhead_s"] = job_fixed_costs(comm, costs, 1,
                                                        os.cpu_count() or 1)[1]
    if comm.rank == 0:
        print(json.dumps(result))


def alltoallv_timings(comm) -> list[dict]:
    """Collective: median time of alltoallv's to every peer, per message size."""
    rows = []
    for values in (2, 256, 1 << 14, 1 << 17, 1 << 20):
        send = torch.ones(values * comm.size)
        counts = [values] * comm.size
        counts[comm.rank] = 0
        send = send[: values * (comm.size - 1)]

        def once():
            comm.barrier()
            t0 = time.perf_counter()
            comm.alltoallv_async(send, counts, counts).wait()
            return time.perf_counter() - t0

        once()
        times = [comm.allreduce_scalar(once(), op="max") for _ in range(15)]
        rows.append({"bytes": values * 4 * (comm.size - 1), "peers": comm.size - 1,
                     "seconds": float(np.median(times)), "times": [float(t) for t in times]})
    return rows


def shared_memory_constants(timeout: float = 300, costs=None) -> dict:
    """``shm_alpha``, ``shm_beta`` from a 2-rank mpirun on this host; with ``costs`` (a
    :class:`~planning.cost_model.CostModel` holding the 1-thread compute constants) also
    ``exchange_overhead_s``, the fixed cost per exchange of that job's tiny training steps."""
    import tempfile

    mpirun = Path(sys.prefix) / "bin" / "mpirun"
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMP_NUM_THREADS": "1"}
    cmd = [str(mpirun) if mpirun.exists() else "mpirun", "-n", "2", "--oversubscribe",
           sys.executable, "-m", "gnnscale.cli.calibrate", "--alltoallv"]
    with tempfile.TemporaryDirectory() as folder:
        if costs is not None:
            costs.save(Path(folder) / "constants.json")
            cmd.append(str(Path(folder) / "constants.json"))
        # run from the folder holding this gnnscale, so the ranks import this package (and its
        # compiled kernels), never a checkout that happens to be the working directory
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=Path(__file__).resolve().parents[2])
    if done.returncode != 0:
        raise RuntimeError(f"alltoallv calibration failed: {done.stderr.strip()[-500:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if _steadiness is not None:
        for row in result["rows"]:
            _steadiness.add(f"shared-memory alltoallv of {row['bytes']} B", row["times"])
    fitted = fit_alltoallv(result["rows"])
    if "exchange_overhead_s" in result:
        fitted["exchange_overhead_s"] = float(result["exchange_overhead_s"])
    return fitted


def fit_alltoallv(rows: list[dict]) -> dict:
    """``shm_alpha`` (per message), ``shm_beta`` (per byte) from :func:`alltoallv_timings`:
    alpha from the smallest message (its time is latency), beta from the slope up to the
    largest (robust where a loaded host makes a least-squares fit trade one for the other)."""
    rows = sorted(rows, key=lambda r: r["bytes"])
    small, large = rows[0], rows[-1]
    alpha = small["seconds"] / max(small["peers"], 1)
    beta = (large["seconds"] - small["seconds"]) / max(large["bytes"] - small["bytes"], 1)
    return {"shm_alpha": float(max(alpha, 0.0)), "shm_beta": float(max(beta, 0.0))}


def calibrate(max_threads: int | None = None, scale: float = 1.0, shared_memory: bool = True,
              say=print):
    """A :class:`~planning.cost_model.CostModel` measured on this host. Every measurement is
    repeated; where the repeats spread too widely (:class:`Steadiness`), one warning line
    says the figures are unreliable."""
    from planning.cost_model import CostModel

    global _steadiness
    cores = max_threads or os.cpu_count() or 1
    counts = sorted({1 << i for i in range(cores.bit_length()) if 1 << i <= cores} | {cores})
    saved = torch.get_num_threads()
    compute = {}
    steadiness = _steadiness = Steadiness()
    try:
        for threads in counts:
            steadiness.where = f"at {threads} thread(s)"
            compute[threads] = compute_constants(threads, scale)
            say(f"calibrated {threads} thread(s): " + ", ".join(
                f"{k} {v:.3g}" for k, v in compute[threads].items()))
        steadiness.where = "measuring the cache knee"
        torch.set_num_threads(1)
        llc = last_level_cache_bytes()
        cache = min(float(llc), measure_cache_knee(beyond_cache_working_set(llc),
                                                   knee_rate(compute[1])))
        own = private_cache_bytes()
        gathers, streams = (" for the aggregation's gathers", f"; streaming ops count on at "
                            f"most {own / 2**10:.0f} KiB, each core's own") if own else ("", "")
        say(f"calibrated the cache: {cache / 2**20:.1f} MiB effective{gathers} "
            f"({llc / 2**20:.0f} MiB last-level cache reported{streams})")
        steadiness.where = ""
        overhead = layer_overhead()
        defaults = CostModel()
        shm = {"shm_alpha": defaults.shm_alpha, "shm_beta": defaults.shm_beta}
        if shared_memory and 1 in compute:
            shm = shared_memory_constants(costs=CostModel(
                compute={1: compute[1]}, layer_overhead_s=overhead, cache_bytes=cache))
            say(f"calibrated shared-memory alltoallv: alpha {shm['shm_alpha']:.3g} s, "
                f"beta {shm['shm_beta']:.3g} s/B; fixed cost per exchange on 2 ranks "
                f"{shm['exchange_overhead_s']:.3g} s")
    finally:
        torch.set_num_threads(saved)
        _steadiness = None
    warning = steadiness.warning()
    if warning:
        say(warning)
    return CostModel(compute=compute, layer_overhead_s=overhead, cache_bytes=cache,
                     private_cache_bytes=own, **shm)


def measuring_turns(ranks: int, threads: int, host_cores: int) -> list[int]:
    """The turn in which each rank measures its constants: consecutive ranks, as many at once
    as ``host_cores`` has cores for ranks of ``threads`` threads."""
    together = max(1, host_cores // max(1, threads))
    return [rank // together for rank in range(ranks)]


def calibrate_in_job(comm, threads: int, scale: float = 1.0, host_cores: int | None = None,
                     model: str = "gcn"):
    """Collective: constants measured by the ranks of a running job, with its thread count, as
    many at once as the host has cores for (``host_cores // threads``; consecutive ranks
    together, the others waiting), so that each rank has its own cores, as the time model
    assumes before it spreads ranks over shared cores itself, and shares the memory system with
    the ranks that compute beside it, as in training; medians over the ranks.

    ``layer_overhead_s`` and ``exchange_overhead_s`` come from training steps of the whole job
    on a graph too small to compute (2,000 nodes, split round-robin, and by Libra where the
    job has several ranks): what they take beyond the model's other terms (exchanges,
    allreduce, compute, with every rank on this host's cores) is this job's fixed cost per
    layer and pass and per exchange (the vertex cut exchanges twice as often), where waking
    up after each wait on a loaded host is part of it. Where the job spans hosts,
    ``exchange_byte_s`` is the work an exchange between hosts takes from the ranks' cores per
    byte while it travels hidden behind an aggregation (:func:`exchange_byte_work`). Where it
    has several ranks, ``noise_s`` is how much their work varies (:func:`noise_rate`, on the
    same aggregation), measured before the fixed costs, whose tiny steps' meetings wait for it
    too. ``model``: the GNN whose tiny steps give the fixed costs (``gcn``, ``sage``, ``gat``;
    each runs its own ops per layer).
    """
    from planning.cost_model import CostModel

    host_cores = host_cores or os.cpu_count() or 1
    turns = measuring_turns(comm.size, threads, host_cores)
    saved = torch.get_num_threads()
    compute = knee = None
    llc = last_level_cache_bytes()
    try:
        for turn in range(max(turns) + 1):
            comm.barrier()
            if turns[comm.rank] == turn:
                at_once = turns.count(turn)
                compute = compute_constants(threads, scale, measuring_at_once=at_once)
                knee = measure_cache_knee(beyond_cache_working_set(llc, at_once),
                                          knee_rate(compute))
        comm.barrier()
    finally:
        torch.set_num_threads(saved)
    shm = fit_alltoallv(alltoallv_timings(comm)) if comm.size > 1 else \
        {"shm_alpha": CostModel().shm_alpha, "shm_beta": CostModel().shm_beta}
    here = socket.gethostname()
    everyone = comm.allgather_object((compute, knee, here))
    median = {k: float(np.median([c[k] for c, _, _ in everyone])) for k in compute}
    # the model divides a host's cache among its ranks: the knee each rank measured (beside
    # the others measuring at once) times the job's ranks on this host
    on_this_host = sum(host == here for _, _, host in everyone)
    cache = min(float(llc), float(np.median([k for _, k, _ in everyone])) * on_this_host)
    hosts = [host for _, _, host in everyone]
    setup = exchange_work_setup(comm, hosts) if len(set(hosts)) > 1 else None
    noise = noise_rate(comm, work=setup[0] if setup else None, turns=turns) \
        if comm.size > 1 else 0.0
    costs = CostModel(compute={threads: median}, layer_overhead_s=0.0, cache_bytes=cache,
                      private_cache_bytes=private_cache_bytes(), noise_s=noise, **shm)
    costs.layer_overhead_s, costs.exchange_overhead_s = job_fixed_costs(comm, costs, threads,
                                                                        host_cores, model)
    if setup is not None:
        costs.exchange_byte_s = exchange_byte_work(comm, hosts, setup=setup)
    return costs


#: megabytes a rank sends when its link carries them hidden behind the measuring aggregation
EXCHANGE_WORK_MEGABYTES = 4.0
#: the share of the measuring aggregation that the exchange may take on the link
EXCHANGE_WORK_HIDDEN_SHARE = 0.4


def exchange_work_setup(comm, hosts: list) -> tuple:
    """What :func:`exchange_work_megabytes` and :func:`exchange_byte_work` time, built once
    for both: ``(alone(), with_test(test), counts(megabytes))``, the measure's aggregation
    (:func:`measuring_aggregation`) alone and calling ``test`` between its row blocks, and
    each rank's (send, receive) counts of float32 values, its megabytes split over its peers
    on other hosts."""
    def values_to(peer: int, sender: int, megabytes: float) -> int:
        if hosts[peer] == hosts[sender]:
            return 0
        remote = sum(host != hosts[sender] for host in hosts)
        return int(megabytes * 2**20 / 4 / remote)

    def counts(megabytes: float) -> tuple[list, list]:
        me = comm.rank
        return ([values_to(peer, me, megabytes) for peer in range(comm.size)],
                [values_to(me, peer, megabytes) for peer in range(comm.size)])

    block, rows = measuring_aggregation()
    return (lambda: block.matmul(rows)), (lambda test: block.matmul(rows, test)), counts


def measuring_aggregation() -> tuple:
    """``(block, rows)`` of the aggregation the job-wide measures time (some 20 ms: 3.2
    million non-zeros, rows 16 wide): ``block.matmul(rows)``."""
    from ..graph.sparse import SparseBlock

    return SparseBlock(_random_csr(200000, 16, np.random.default_rng(0))), _values(200000, 16)


#: back-to-back runs of the measuring aggregation each rank times for :func:`noise_rate`
NOISE_REPEATS = 50


def noise_rate(comm, work=None, repeats: int = NOISE_REPEATS, turns: list | None = None) -> float:
    """Collective: the time model's ``noise_s``, the variance of a rank's busy time per second
    of its work, the ranks measuring in ``turns`` (None: all at once; :func:`measuring_turns`:
    as many at once as have cores, as in training with a core each). Each rank times
    ``work`` (None: :func:`measuring_aggregation`'s) ``repeats`` times in a row, after one
    untimed run; its spread is ``sqrt(pi) / 2`` times the mean difference between consecutive
    runs (for normal times their standard deviation; a drift of the host's speed over the
    repeats hardly counts, and a rare long interruption counts as it delays the latest of two
    ranks), squared over the median run. The median over the ranks."""
    if work is None:
        block, rows = measuring_aggregation()
        work = lambda: block.matmul(rows)  # noqa: E731
    turns = turns or [0] * comm.size
    times = []
    for turn in range(max(turns) + 1):
        comm.barrier()
        if turns[comm.rank] == turn:
            work()
            for _ in range(repeats):
                start = clock()
                work()
                times.append(clock() - start)
    comm.barrier()
    return float(np.median(comm.allgather_object(spread_rate(times))))


def spread_rate(times) -> float:
    """Variance per second of work (s) of repeated runs' ``times`` (seconds, in the order
    they ran): :func:`noise_rate`'s estimate; 0 for fewer than two runs."""
    times = np.asarray(times, dtype=np.float64)
    if times.size < 2 or np.median(times) <= 0:
        return 0.0
    spread = np.sqrt(np.pi) / 2 * float(np.mean(np.abs(np.diff(times))))
    return spread * spread / float(np.median(times))


def _timed(comm, run) -> float:
    """Collective: the slowest rank's time of ``run()``, started together."""
    comm.barrier()
    start = time.perf_counter()
    run()
    return comm.allreduce_scalar(time.perf_counter() - start, op="max")


def exchange_work_megabytes(comm, hosts: list, repeats: int = 3,
                            setup: tuple | None = None) -> float:
    """Collective: the megabytes :func:`exchange_byte_work` has each rank send so that the
    exchange stays hidden behind its aggregation on this job's links: 4, or what the links
    carry in 0.4 of the aggregation's time where that is less (both timed alone, medians of
    ``repeats``), so that only the exchange's work shows, not a wait (a link of 1 Gbit/s
    carries 4 MB in 35 ms). ``setup``: :func:`exchange_work_setup`'s, built here if None."""
    alone, _, counts = setup or exchange_work_setup(comm, hosts)
    send_counts, recv_counts = counts(EXCHANGE_WORK_MEGABYTES)
    send = torch.zeros(sum(send_counts))
    aggregation = float(np.median([_timed(comm, alone) for _ in range(repeats)]))
    travel = float(np.median([_timed(comm, lambda: comm.alltoallv_async(
        send, send_counts, recv_counts).wait()) for _ in range(repeats)]))
    share = EXCHANGE_WORK_HIDDEN_SHARE * aggregation / travel if travel > 0 else 1.0
    return EXCHANGE_WORK_MEGABYTES * min(1.0, share)


def exchange_byte_work(comm, hosts: list, megabytes: float | None = None,
                       repeats: int = 9, setup: tuple | None = None) -> float:
    """Collective: seconds of a rank's work per byte it sends and receives in an exchange with
    the ranks on other hosts (``hosts``: each rank's host name) that travels while the rank
    aggregates, progressed by the aggregation's tests as the engine's exchanges are: the
    aggregation's time with the exchange in flight less its time alone (medians, in turns),
    over the bytes. Each rank sends ``megabytes`` in all, split over its peers elsewhere
    (None: :func:`exchange_work_megabytes`, what stays hidden on these links). ``setup``:
    :func:`exchange_work_setup`'s, built here if None."""
    setup = setup or exchange_work_setup(comm, hosts)
    if megabytes is None:
        megabytes = exchange_work_megabytes(comm, hosts, setup=setup)
    alone, with_test, counts = setup
    send_counts, recv_counts = counts(megabytes)
    send = torch.zeros(sum(send_counts))

    def hidden():
        work = comm.alltoallv_async(send, send_counts, recv_counts)
        with_test(work.test)
        work.wait()

    times = {alone: [], hidden: []}
    for _ in range(repeats):
        for run in (alone, hidden):
            times[run].append(_timed(comm, run))
    extra = float(np.median(times[hidden][2:])) - float(np.median(times[alone][2:]))
    moved = 4.0 * (sum(send_counts) + sum(recv_counts))
    return max(0.0, extra / moved) if moved else 0.0


def job_fixed_costs(comm, costs, threads: int, host_cores: int,
                    model: str = "gcn") -> tuple[float, float]:
    """Collective: ``(layer_overhead_s, exchange_overhead_s)`` of this job, from training steps
    of ``model`` (2 layers, hidden 16) by all its ranks on a graph too small to compute (2,000
    nodes): what a step takes beyond ``costs``' other terms, per layer and pass and per
    exchange (:func:`fit_fixed_costs`; an edge cut exchanges once per aggregation, a vertex
    cut twice, so the two steps tell the fixed costs apart). Every rank of the job is on this
    host."""
    from planning.cost_model import Cluster, ModelSpec

    from ..data import load_dataset

    data = load_dataset("sbm", num_nodes=2000)
    spec = ModelSpec.build(model, data.num_features, 16, data.num_classes)
    host = Cluster(ranks_per_host=comm.size, cores_per_rank=threads, host_cores=host_cores)
    residuals = [_tiny_step_residual(comm, data, kind, spec, host, costs)
                 for kind in (("edge_cut", "vertex_cut") if comm.size > 1 else ("edge_cut",))]
    layers = 2 * spec.layers * host.oversubscription(comm.size)
    return fit_fixed_costs(residuals, layers)


def fit_fixed_costs(residuals: list, layer_passes: float) -> tuple[float, float]:
    """``(layer_overhead_s, exchange_overhead_s)`` from the residuals of tiny steps: each
    ``(seconds a step took beyond the model's other terms, exchanges per step)``, the first an
    edge cut's, an optional second a vertex cut's (more exchanges for the same layers). Each
    residual is ``layer_passes x per layer + exchanges x per exchange``: two steps with
    different exchange counts give both; one step (or no more exchanges in the second) gives
    the whole residual to the layers. Neither is negative."""
    (edge_res, edge_x), *vertex = residuals
    per_exchange = 0.0
    if vertex and vertex[0][1] > edge_x:
        vertex_res, vertex_x = vertex[0]
        per_exchange = max(0.0, (vertex_res - edge_res) / (vertex_x - edge_x))
    return max(0.0, (edge_res - edge_x * per_exchange) / layer_passes), per_exchange


def _tiny_step_residual(comm, data, kind: str, spec, host, costs) -> tuple[float, int]:
    """(median training step of the whole job on ``data`` split round-robin (``edge_cut``) or
    by Libra (``vertex_cut``) minus what ``costs`` (no fixed costs) predict for it, halo
    exchanges and allreduces per step: each pays the fixed cost per exchange). Collective."""
    from partitioning import make_partitioner
    from partitioning.base import Partition
    from planning.cost_model import CostModel, predict
    from planning.workload import part_workload

    from ..engine import LocalProblem, Trainer
    from ..engine.vertex_cut_problem import broadcast_vertex_cut_problem
    from ..nn import GNN

    if kind == "edge_cut":
        node_parts = np.arange(data.num_nodes) % comm.size
        partition = Partition(kind="edge_cut", num_parts=comm.size, num_nodes=data.num_nodes,
                              node_parts=node_parts, method="round-robin")
        problem = LocalProblem.from_graph_data(data, node_parts, comm)
    else:
        partition = make_partitioner("libra", num_parts=comm.size, seed=0).fit(data)
        problem = broadcast_vertex_cut_problem(data, partition if comm.rank == 0 else None,
                                               comm)
    torch.manual_seed(0)
    trainer = Trainer(GNN(spec.name, data.num_features, 16, data.num_classes), problem, comm)
    times = []
    for _ in range(25):
        comm.barrier()
        t0 = time.perf_counter()
        trainer.train_step()
        times.append(comm.allreduce_scalar(time.perf_counter() - t0, op="max"))
    fixed_free = CostModel.from_dict({**costs.to_dict(), "layer_overhead_s": 0.0,
                                      "exchange_overhead_s": 0.0})
    modelled = predict(part_workload(data, partition), spec, host, fixed_free)
    return (float(np.median(times[5:])) - modelled["step_s"],
            modelled["exchanges_step"] + modelled["collectives_step"])


def _exchange_work_rank_main(constants: str | None = None) -> int:
    """Under an mpirun across hosts: :func:`exchange_byte_work` and :func:`noise_rate` of this
    job (every rank at once: a rank per host, as ``--map-by ppr:1:node`` places them); rank 0
    prints ``{"exchange_byte_s": ..., "noise_s": ..., "hosts": ..., "megabytes": ...}`` (what
    each rank sent: :func:`exchange_work_megabytes`) and, given a cost model file (read and
    written on rank 0's host only), writes both figures into it (the file replaced whole). A
    bad file, or ranks all on one host: one line, exit 2 on every rank."""
    from partitioning.errors import PartitionError
    from planning.cost_model import CostModel

    from .. import comm as comm_module

    comm = comm_module.init("mpi")
    costs, problem = None, None
    if comm.rank == 0 and constants:  # the file is rank 0's: other hosts need not see it
        try:
            costs = CostModel.load(constants)
        except PartitionError as exc:
            problem = str(exc)
    gathered = comm.allgather_object((socket.gethostname(), problem))
    hosts, problem = [host for host, _ in gathered], gathered[0][1]
    if problem is None and len(set(hosts)) < 2:
        problem = (f"every rank is on host {hosts[0]!r}; launch it across two hosts or more "
                   "(mpirun --hostfile ...)")
    if problem is not None:
        if comm.rank == 0:
            print(f"calibrate --exchange-work: {problem}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    setup = exchange_work_setup(comm, hosts)
    megabytes = exchange_work_megabytes(comm, hosts, setup=setup)
    per_byte = exchange_byte_work(comm, hosts, megabytes, setup=setup)
    noise = noise_rate(comm, work=setup[0])
    if comm.rank == 0:
        if costs is not None:
            from ..engine.checkpoint import write_atomic

            costs.exchange_byte_s, costs.noise_s = per_byte, noise
            write_atomic(Path(constants), json.dumps(costs.to_dict(), indent=1).encode())
        print(json.dumps({"exchange_byte_s": per_byte, "noise_s": noise,
                          "hosts": len(set(hosts)), "megabytes": megabytes}))
    return 0


USAGE = ("usage: python -m gnnscale.cli.calibrate --alltoallv [CONSTANTS.json] (under a 2-rank "
         "mpirun) | --exchange-work [CONSTANTS.json] (under an mpirun across hosts)")

if __name__ == "__main__":
    if sys.argv[1:2] == ["--alltoallv"] and len(sys.argv) <= 3:
        _alltoallv_rank_main(sys.argv[2] if len(sys.argv) == 3 else None)
    elif sys.argv[1:2] == ["--exchange-work"] and len(sys.argv) <= 3:
        sys.exit(_exchange_work_rank_main(sys.argv[2] if len(sys.argv) == 3 else None))
    else:
        sys.exit(USAGE)
