"""Time model of one full-batch training step and one evaluation pass on a partitioned graph.

It follows what the engine does (``gnnscale/graph/aggregate.py``, ``gnnscale/engine``). Inputs:
a workload per part ``p`` (:func:`planning.workload.part_workload`: ``N_p`` owned nodes,
``Ein_p`` inner and ``Eb_p`` boundary edges, ``R[p, q]`` halo rows ``p`` receives from ``q``), a
model (:class:`ModelSpec`: per layer input width ``a``, output width ``c``), a cluster
(:class:`Cluster`: ranks per host, cores per rank, the network between hosts) and constants
(:class:`CostModel`, measured by ``gnnscale tune --calibrate``).

**Exchange** of rows ``w`` values wide (``b = 4 w`` bytes per row) for rank ``p``; peers on its
host go through shared memory, the others through the host's network link, both at once::

    X_p(w) = max(shm_alpha K_intra + shm_beta b max(in_intra, out_intra),
                 L K_inter + b max(host_in, host_out) / BW)

``in/out`` are rows received/sent, ``K`` the peers, ``host_in/out`` the rows all ranks of ``p``'s
host move across hosts (they share one link), ``L``/``BW`` the target network: the latency is
paid per peer host message, as in a pairwise alltoallv (Thakur et al. 2005: ``(P-1) alpha + n
beta``). On a
*simulated* network (``train --simulate-network``, every rank on this host) an exchange ends at
``max(real shared-memory exchange, L + b out_p / BW)``, which is what the simulator does.

**Layer, edge cut** (GCN, SAGE-mean; ``w = min(a, c)``, the width the layer aggregates;
``g_agg = g_nnz + g_edge w`` per non-zero: a cost per edge whatever the width, which
dominates narrow rows, and one per value; rows narrower than 16 go through a kernel of their
own and take its own line, ``gamma_nnz_narrow + gamma_edge_narrow w``, where calibrated)::

    F_p = dense + pack_p + max(g_agg Ein_p, X_p(w)) + g_agg Eb_p + elementwise
    B_p = dense_back + [pack_p + g_agg Eb_p + max(g_agg Ein_p, X_p(w))] + elementwise'

Each product also costs ``g_row`` per output row (``gamma_row``, 0 where not calibrated):
the rows it writes (the inner block's, forward its rows computed, backward the input's) or
adds into (the boundary block's rows with a non-zero: the workload's ``boundary_rows``, and
at most ``Eb_p``; backward the halo's rows), so that a block of one or two non-zeros a row
costs more per non-zero than one of ten.

``pack_p = g_gather out_p w`` gathers the ``out_p`` rows ``p`` sends before posting them
(forward) and adds the gradients received for them into its rows (backward); a vertex cut packs
twice per aggregation. The per-byte part of ``X_p``'s shared-memory term (``shm_beta b
max(in, out)``) is copying: it is counted as the rank's work before the post, and only the rest
of ``X_p`` as time the exchange travels. ``dense = g_flop 2 N_p a c`` (twice for SAGE's two
weights), ``dense_back`` is the weight gradient plus, above the first layer, the input
gradient; the bracket is absent where the aggregated input needs no gradient (the first
layer aggregating raw features); ``elementwise`` is the output's bias, activation and
dropout and, on the first layer in training, the raw features' dropout (``gamma_dropout`` a
value: the mask is hashed from each element's index), ``elementwise'`` the output's ops
backward only (the raw features need no gradient). Between two layers in training, ReLU and
the next layer's input dropout run fused with the next layer's transform where that layer
(GCN, SAGE) transforms first: ``gamma_activation`` a value forward and
``gamma_activation_back`` backward, beyond the products, which are the next layer's dense
terms; elsewhere the dropout kernel and the bias forward, four elementwise ops backward
(:func:`_output_passes`). GAT exchanges width ``H C +
H`` and works per edge (``g_gather H C`` x 3 forward, x 6 backward): the edges from owned
sources (and self loops) while the exchange travels, the halo's after it. A vertex cut
(DistGNN) exchanges twice per aggregation (master -> mirrors, partial sums -> masters). Its
rank holds, transforms and passes elementwise over its masters' rows only (``N_p``: the dense
terms, ``elementwise``, the loss); its local product reads every edge of the part (``Ein_p``;
GCN's self loops at the masters) into every local row, masters and mirrors (``N_p + halo_p``,
``halo_p`` its mirrors), in four blocks (the workload's ``vertex_cut_edges``: masters <-
masters ``E_oo``, masters <- mirrors ``E_om``, mirrors <- masters ``E_mo``, mirrors <-
mirrors ``E_mm``), each pair into one row summed inside the kernel (per row: every local row
written once forward and once backward, the adding blocks' rows at most one per non-zero).
Forward, ``E_oo + E_mo`` overlap the first exchange and ``E_om`` the second, ``E_mm`` between
them overlaps nothing; backward, ``E_oo + E_om`` and ``E_mo``. Without the blocks in the
workload, no product overlaps an exchange. Every layer and pass of a rank also costs
``layer_overhead_s`` (Python and autograd), and every exchange ``exchange_overhead_s`` of
the rank's own work at its post (posting and completing it: fixed, whatever its size; the
rank's thread does it, so compute does not hide it: ``benchmarks/exchange_post.py``), as
does every allreduce (the step's gradient buckets, the evaluation's metrics); every byte a
rank sends to or receives from another host costs it ``exchange_byte_s`` of its own work while
the exchange travels (added to the compute the exchange overlaps, free where the rank waits for
the exchange anyway).

**Caches.** A rank's share of its host's last-level cache is ``C = cache_bytes / ranks on the
host``. Each op's constant moves from the one calibrated on cached data to the one calibrated
on data beyond the cache (``gamma_edge_mem``, ...) as its working set ``S`` grows:
``g = g_cached + f (g_mem - g_cached)``, ``f = clip((S - C) / 3C, 0, 1)``. ``S`` is the rows
an aggregation gathers ``4 w (N_p + halo_p)`` (GAT's gathers likewise), or the array an
elementwise op passes over. A dense transform costs ``max(g_flop 2 N a c, g_byte f 4 N (a +
c))``: its flops, or the bytes it streams where they leave the cache. Where the workload has
``gather_share`` (:func:`planning.workload.gather_share`), an aggregation's reads hit the
cache in the share a least-recently-used cache of ``C / 4w`` rows serves given how the reads
crowd onto rows (Che's approximation, :func:`planning.cache_knee.lru_hit_share`: power-law
hubs stay in the cache, rarely read rows pass through it), at ``g_agg``'s cached constants,
and the rest at the ones beyond the cache.
``C`` comes from :func:`planning.cache_knee.fit_cache_knee`, at most the cache reported.
That knee is the aggregation's: its gathers read the same rows again within one product, so
the rows it keeps are the ones it reuses. Every other op (elementwise passes, dense
transforms, the rows packed for an exchange, the products' output rows, the loss) streams
arrays that an earlier op wrote, with the other ranks' and the host's other tenants' arrays
passing through the shared cache in between: those take ``min(C, private_cache_bytes x
cores per rank)``, the cache a core has to itself (a core's L2; 0: unknown, ``C`` for every
op). Where the gathers find a knee far beyond the core's own cache (3.5-32 MiB against an L2
of 512 KiB), ``C`` for every op under-predicted amazon0601's steps: a step error of 16.6-27.3%
where this gives 8.0-15.5% (docs/planning.md, "Streaming ops and the core's own cache").

**Step**: a timeline of every rank's passes, forward layers then backward layers in reverse
(:mod:`planning.shared_cores`). A rank's pass is its work before the post (``pack_p``, the
transform where it comes first), the work it overlaps with the exchange (``g_agg Ein_p``),
the wait for what is left of the exchange and the work after it. An exchange ends ``X_p``
after the rank's own post and not before every peer it exchanges rows with has posted: the
ranks are coupled by their data only, so where every rank has its cores::

    end_p(stage) = max(post_p + g_agg Ein_p, post_p + X_p, max_{q peer of p} post_q)

and ``T_fwd`` is when the slowest rank ends its last forward pass, ``T_bwd`` the rest of the
way to the end of its backward. Where a host's ranks have more threads than it has cores
(``host_cores``), they share the cores while they work, the ones with the most work left
first, and a rank that waits leaves its cores to the others (an event-by-event timeline;
without waits it ends at ``max(longest rank, host's work / host_cores)``).

Weight gradients are allreduced in buckets as backward produces them (last layer first): bucket
``k`` starts at ``max(end of its layers' backward on the slowest rank, end of bucket k-1)``;
only what runs past the end of backward is exposed. The allreduce is hierarchical:
``2 (r-1) shm_alpha + 2 (r-1)/r G shm_beta`` within a host of ``r`` ranks, then ``2 (h-1) L
+ 2 (h-1)/h G / BW`` between ``h`` hosts, multiplied by ``s = max(1, ranks_per_host x
cores_per_rank / host_cores)`` where the ranks share too few cores. ``T_step = T_fwd + T_bwd
+ exposed allreduce + optimiser (12 elementwise ops per weight) + loss``, the last two also
multiplied by ``s``; the loss, the cross-entropy over a rank's training rows forward and
backward, costs ``rows (g_loss_row + g_loss_logit classes)`` (calibrated: mostly per row at a
few classes), or 10 elementwise ops per logit where those are not calibrated.
**Evaluation**: the forward layers as in ``T_fwd``, without dropout, the metrics over every
row (``rows (g_eval_row + g_eval_logit classes)``, as the loss) and their allreduce. A first
layer that aggregates the raw features (``a < c``; GAT excepted) finds their aggregate kept
from the first evaluation (the graph's cache of constant inputs): evaluation, and training
without input dropout, only transform it, with no exchange.

**Rows computed.** A training step of an edge cut computes only what the loss needs (GCN,
SAGE): the last layer the training rows, each layer below the rows the layer above reads
(those rows, their owned in-neighbours and every row sent to a peer), each aggregation over
the in-edges of its rows only, its exchange unchanged (the workload's ``computed_*``). The
terms above then take those rows (``N_p`` in the transform, the elementwise ops and GCN's
self loops: the input's rows where the layer transforms first) and edges (``Ein_p``,
``Eb_p``); SAGE's root transform selects its rows from the layer's input (``g_gather`` per
value, forward, and again backward where the input needs a gradient). A first layer
aggregating raw features through dropout aggregates every row. A vertex cut aggregates
every master at every layer and its last layer selects the training rows from that
aggregate: they alone take the last layer's bias, and its transform where it aggregates
first. Evaluation computes every row.

**Halo dtype and staleness** (:class:`planning.halo_wire.HaloOptions`, ``predict(halo=)``):
rows travel at :func:`planning.halo_wire.row_bytes` of the dtype (``b`` above), and each
exchange costs its rank encoding the rows it sends and decoding the ones it receives
(elementwise ops per value), counted with its copying as work before the post. Under a stale
policy no training pass waits for its exchange: the stages' travel leaves the timeline and
the step lasts at least as long as the slowest rank's exchanges of the step take to travel
(they share its link while it computes); ``delayed:R`` sends ``1 / R`` of the rows, ``local``
none (the rows are still gathered, the products still computed). Evaluation exchanges
exactly, in the dtype.

Compute constants depend on the thread count; a count that was not calibrated uses the largest
calibrated count below it, scaled by the ratio of counts (ideal speed-up: an assumption).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from partitioning.errors import PartitionError

from .cache_knee import beyond_cache_fraction, lru_hit_share
from .halo_wire import HaloOptions
from .shared_cores import latest_pass_ends

__all__ = ["CostModel", "Cluster", "Network", "ModelSpec", "predict", "COMPUTE_KEYS",
           "MODELS"]

COMPUTE_KEYS = ("gamma_edge", "gamma_flop", "gamma_elem", "gamma_gather")
# Optional per thread count: the same work with its data beyond the last-level cache
# (``gamma_byte``: seconds per byte a dense transform streams from memory).
MEMORY_KEYS = ("gamma_edge_mem", "gamma_elem_mem", "gamma_gather_mem", "gamma_byte")
# Optional per thread count: the aggregation's cost per non-zero whatever the row's width
# (reading its column index and value), and per output row it writes or adds into whatever its
# non-zeros (finding the row, starting and storing its sum), cached and beyond the cache;
# absent: 0
EDGE_KEYS = ("gamma_nnz", "gamma_nnz_mem", "gamma_row", "gamma_row_mem")
# Optional per thread count: the aggregation of rows narrower than :data:`SMALL_ROWS_BELOW`
# (a kernel of its own, each width's loop unrolled: gnnscale/graph/kernels.py), per non-zero
# and per non-zero and value, cached and beyond the cache; absent or 0: the wide rows' line
NARROW_KEYS = ("gamma_nnz_narrow", "gamma_edge_narrow", "gamma_nnz_narrow_mem",
               "gamma_edge_narrow_mem")
#: rows narrower than this take the small rows' kernel (gnnscale/graph/kernels.py)
SMALL_ROWS_BELOW = 16
# Optional per thread count: the training loss (cross-entropy forward and backward) per training
# row and per logit, and the evaluation's metrics per row and per logit; absent: 10
# elementwise ops per logit for each
OUTPUT_KEYS = ("gamma_loss_row", "gamma_loss_logit", "gamma_eval_row", "gamma_eval_logit")
# Optional per thread count, per value, cached and beyond the cache: the dropout kernel
# (gnnscale/nn/dropout.py: a mask hashed from each element's index, the raw features' dropout
# and an unfused ReLU-dropout), and the fused ReLU-dropout-linear pass between two layers
# (gnnscale/nn/fused_transform.py) forward and backward beyond its products; absent: the
# elementwise ops they replace (1, 2 and 4 per value)
ACTIVATION_KEYS = ("gamma_dropout", "gamma_dropout_mem", "gamma_activation",
                   "gamma_activation_mem", "gamma_activation_back", "gamma_activation_back_mem")
#: elementwise ops per value each activation constant stands for where it is absent
ACTIVATION_ELEMS = {"gamma_dropout": 1.0, "gamma_activation": 2.0, "gamma_activation_back": 4.0}
#: compute constants a cost-model file may lack (each read as documented where it is absent)
OPTIONAL_COMPUTE_KEYS = MEMORY_KEYS + EDGE_KEYS + NARROW_KEYS + OUTPUT_KEYS + ACTIVATION_KEYS
GLOBAL_KEYS = ("shm_alpha", "shm_beta", "layer_overhead_s")
OPTIONAL_KEYS = ("exchange_overhead_s", "exchange_byte_s", "cache_bytes",  # absent: defaults
                 "private_cache_bytes", "noise_s")
MODELS = ("gcn", "sage", "gat")
DEFAULT_COMPUTE = {"gamma_edge": 1.5e-9, "gamma_flop": 5e-11, "gamma_elem": 1e-9,
                   "gamma_gather": 3e-9}


@dataclass(frozen=True)
class Network:
    """A network between hosts: one-way latency (s) and bandwidth (bytes/s) per host link."""

    latency_s: float
    bandwidth_Bps: float

    def __post_init__(self):
        if not self.latency_s >= 0 or not self.bandwidth_Bps > 0 or \
                math.inf in (self.latency_s, self.bandwidth_Bps):
            raise PartitionError(f"network needs latency >= 0 and bandwidth > 0, got "
                                 f"{self.latency_s} s, {self.bandwidth_Bps} B/s")


@dataclass(frozen=True)
class Cluster:
    """Where the ranks run.

    Attributes:
        ranks_per_host: ranks sharing a host (its memory and network link); None: every rank
            on one host.
        cores_per_rank: compute threads of each rank.
        network: the link between hosts (None: one host, shared memory only).
        host_cores: cores of a host; None means ``ranks_per_host x cores_per_rank`` (no
            oversubscription).
        simulated: the ranks share this host and ``network`` is ``train --simulate-network``.
    """

    ranks_per_host: int | None = None
    cores_per_rank: int = 1
    network: Network | None = None
    host_cores: int | None = None
    simulated: bool = False

    def hosts_of(self, parts: int) -> np.ndarray:
        per_host = parts if self.ranks_per_host is None or self.simulated \
            else self.ranks_per_host
        return np.arange(parts) // max(1, per_host)

    def oversubscription(self, parts: int) -> float:
        per_host = min(parts, self.ranks_per_host or parts)
        busy = per_host * self.cores_per_rank
        return max(1.0, busy / self.host_cores) if self.host_cores else 1.0


@dataclass(frozen=True)
class ModelSpec:
    """A stack of graph layers: ``widths[l] -> widths[l+1]`` with ``heads[l]`` attention heads
    (GAT: ``widths[l+1]`` is heads x width per head when concatenated)."""

    name: str
    widths: tuple
    heads: tuple = ()
    dropout: float = 0.5

    @classmethod
    def build(cls, name: str, in_dim: int, hidden: int, classes: int, layers: int = 2,
              heads: int = 8, out_heads: int = 1, dropout: float = 0.5) -> "ModelSpec":
        """The widths ``gnnscale train --model NAME`` uses for these options."""
        if name not in MODELS:
            raise PartitionError(f"unknown model {name!r}; the cost model knows "
                                 f"{', '.join(MODELS)}")
        if min(in_dim, hidden, classes, layers) < 1:
            raise PartitionError(f"model widths must be positive, got in={in_dim}, "
                                 f"hidden={hidden}, classes={classes}, layers={layers}")
        if name == "gat":
            hidden_out, hs = hidden * heads, [heads] * (layers - 1) + [out_heads]
        else:
            hidden_out, hs = hidden, [1] * layers
        widths = [in_dim] + [hidden_out] * (layers - 1) + [classes]
        return cls(name, tuple(int(w) for w in widths), tuple(hs), float(dropout))

    @property
    def layers(self) -> int:
        return len(self.widths) - 1

    def transforms_first(self, layer: int) -> bool:
        """Whether GCN's or SAGE's layer ``layer`` transforms before it aggregates: it narrows
        its rows (``order="auto"``, gnnscale/nn/conv.py)."""
        return self.widths[layer + 1] <= self.widths[layer]

    def layer_weights(self) -> list[int]:
        """Parameters of each layer."""
        out = []
        for a, c, h in zip(self.widths[:-1], self.widths[1:], self.heads or [1] * self.layers):
            if self.name == "gat":
                per_head = c // h if c % h == 0 and c >= h else c
                out.append(a * h * per_head + 2 * h * per_head + c)
            else:
                out.append(a * c * (2 if self.name == "sage" else 1) + c)
        return out


@dataclass
class CostModel:
    """Constants of the time model (seconds per unit).

    Attributes:
        compute: thread count -> ``gamma_edge`` (per edge x feature of the CSR aggregation),
            ``gamma_flop`` (per flop of dense transforms), ``gamma_elem`` (per element of an
            elementwise op), ``gamma_gather`` (per value of a row gather or scatter-add).
        shm_alpha: cost per message of a shared-memory alltoallv (s).
        shm_beta: cost per byte of a shared-memory alltoallv (s/B).
            Optionally the same work with its data beyond the last-level cache:
            ``gamma_edge_mem``, ``gamma_elem_mem``, ``gamma_gather_mem``, and ``gamma_byte``
            (per byte a dense transform reads and writes from memory); absent ones equal
            the cached constants (``gamma_byte``: 0). Optionally the model's outputs per
            row and per logit: ``gamma_loss_row``, ``gamma_loss_logit`` (the training loss)
            and ``gamma_eval_row``, ``gamma_eval_logit`` (the evaluation's metrics).
        shm_alpha: cost per message of a shared-memory alltoallv (s).
        shm_beta: cost per byte of a shared-memory alltoallv (s/B).
        layer_overhead_s: fixed cost per layer and pass (Python, autograd, allocation).
        exchange_overhead_s: fixed cost of each halo exchange a rank takes part in beyond the
            network's latency (posting, progressing and completing the alltoallv, and the
            ranks being scheduled again for it), paid as the rank's own work at the post,
            which compute does not hide. 0 unless measured:
            :func:`gnnscale.cli.calibrate.calibrate_in_job` fits it and
            ``layer_overhead_s`` from two tiny steps of the job (an edge cut, one exchange
            per aggregation, and a vertex cut, two); what it comes to across hosts is in
            docs/planning.md, "Checked on shaped links" (benchmarks/tune_validation.py
            --vcluster).
        exchange_byte_s: work per byte a rank sends to or receives from ranks on other hosts
            in halo exchanges (the network stack's and MPI's copying and progressing), taken
            from the rank's cores while the exchange travels: it adds to the compute the
            exchange overlaps, and costs nothing where the rank waits for the exchange. 0
            unless measured: ``calibrate_in_job`` measures it where the job spans hosts,
            ``python -m gnnscale.cli.calibrate --exchange-work FILE`` under an mpirun across
            hosts into a file (``exchange_byte_work``).
        bytes_per_value: bytes of a feature value on the wire (4: float32).
        cache_bytes: last-level cache of a host, shared by its ranks (0: no cache model, the
            cached constants for every size): the knee of the aggregation's rate.
        private_cache_bytes: the cache each core has to itself (its L2:
            :func:`gnnscale.cli.calibrate.private_cache_bytes`), at most what every op but the
            aggregation's gathers counts on (0: unknown, ``cache_bytes``' share for every op).
        noise_s: the variance of a rank's busy time per second of its work (s): ranks that
            meet at an exchange wait for the latest one's jitter (:mod:`planning.shared_cores`).
            0 unless measured: ``calibrate_in_job`` measures it where the job has several
            ranks, ``calibrate --exchange-work`` across hosts
            (:func:`gnnscale.cli.calibrate.noise_rate`).
    """

    compute: dict = field(default_factory=lambda: {1: dict(DEFAULT_COMPUTE)})
    shm_alpha: float = 5e-6
    shm_beta: float = 2e-10
    layer_overhead_s: float = 1e-4
    exchange_overhead_s: float = 0.0
    exchange_byte_s: float = 0.0
    bytes_per_value: int = 4
    cache_bytes: float = 0.0
    private_cache_bytes: float = 0.0
    noise_s: float = 0.0

    def __post_init__(self):
        self.compute = {int(t): dict(v) for t, v in self.compute.items()}
        if not self.compute:
            raise PartitionError("cost model: 'compute' needs at least one thread count")
        for threads, values in self.compute.items():
            if threads < 1:
                raise PartitionError(f"cost model: thread count {threads} must be >= 1")
            for key in COMPUTE_KEYS:
                _check_constant(f"compute[{threads}].{key}", values.get(key))
            unknown = sorted(set(values) - set(COMPUTE_KEYS) - set(OPTIONAL_COMPUTE_KEYS))
            if unknown:
                raise PartitionError(f"cost model: unknown constant compute[{threads}]."
                                     f"{unknown[0]}")
            for key in OPTIONAL_COMPUTE_KEYS:
                if key in values:
                    _check_constant(f"compute[{threads}].{key}", values[key])
        for key in GLOBAL_KEYS + OPTIONAL_KEYS:
            _check_constant(key, getattr(self, key))

    def constants_for(self, threads: int) -> dict:
        """Compute constants for ``threads`` threads (see the module docstring), the memory
        ones filled in from the cached ones where absent."""
        if threads in self.compute:
            base, factor = threads, 1.0
        else:
            below = [t for t in self.compute if t <= threads]
            base = max(below) if below else min(self.compute)
            factor = base / threads
        given = self.compute[base]
        values = {"gamma_byte": 0.0, "gamma_nnz": 0.0, "gamma_row": 0.0,
                  **{f"{k}_mem": given[k] for k in ("gamma_edge", "gamma_elem", "gamma_gather")},
                  "gamma_nnz_mem": given.get("gamma_nnz", 0.0),
                  "gamma_row_mem": given.get("gamma_row", 0.0),
                  "gamma_nnz_narrow": 0.0, "gamma_edge_narrow": 0.0,
                  "gamma_nnz_narrow_mem": given.get("gamma_nnz_narrow", 0.0),
                  "gamma_edge_narrow_mem": given.get("gamma_edge_narrow", 0.0), **given}
        for key, elems in ACTIVATION_ELEMS.items():  # absent: the elementwise ops replaced
            values.setdefault(key, elems * values["gamma_elem"])
            values.setdefault(f"{key}_mem", elems * values["gamma_elem_mem"]
                              if key not in given else values[key])
        return {k: v * factor for k, v in values.items()}

    def to_dict(self) -> dict:
        """JSON-friendly constants (thread counts as string keys)."""
        return {"compute": {str(t): dict(v) for t, v in sorted(self.compute.items())},
                **{k: getattr(self, k) for k in GLOBAL_KEYS + OPTIONAL_KEYS},
                "bytes_per_value": self.bytes_per_value}

    @classmethod
    def from_dict(cls, values: dict) -> "CostModel":
        """Inverse of :meth:`to_dict`; unknown, missing or negative constants are refused."""
        if not isinstance(values, dict):
            raise PartitionError(f"cost model must be a JSON object, got {type(values).__name__}")
        optional = {"bytes_per_value", *OPTIONAL_KEYS}
        known = {"compute", *optional, *GLOBAL_KEYS}
        unknown = sorted(set(values) - known)
        if unknown:
            raise PartitionError(f"cost model: unknown constant {unknown[0]!r}")
        missing = sorted(known - set(values) - optional)
        if missing:
            raise PartitionError(f"cost model: missing constant {missing[0]!r}")
        compute = values["compute"]
        if not isinstance(compute, dict):
            raise PartitionError("cost model: 'compute' must map thread counts to constants")
        try:
            compute = {int(t): v for t, v in compute.items()}
        except ValueError:
            raise PartitionError(f"cost model: thread counts must be integers, got "
                                 f"{sorted(compute)}") from None
        return cls(compute=compute, **{k: values[k] for k in GLOBAL_KEYS},
                   bytes_per_value=int(values.get("bytes_per_value", 4)),
                   **{k: values[k] for k in OPTIONAL_KEYS if k in values})

    def save(self, path) -> None:
        """Write the constants as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path) -> "CostModel":
        """Read constants written by :meth:`save` (or a tune JSON's ``cost_model``)."""
        try:
            values = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise PartitionError(f"cost model {path}: cannot read JSON ({exc})") from None
        if isinstance(values, dict) and "cost_model" in values:
            values = values["cost_model"]
        try:
            return cls.from_dict(values)
        except PartitionError as exc:
            raise PartitionError(f"{path}: {exc}") from None


def _check_constant(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PartitionError(f"cost model: constant {name} is missing or not a number "
                             f"(got {value!r})")
    if not value >= 0 or value == math.inf:
        raise PartitionError(f"cost model: constant {name} must be finite and >= 0, got {value}")


# -- the prediction ---------------------------------------------------------------------------

class _Exchange:
    """Per-rank time of one alltoallv of ``w``-wide rows on a cluster."""

    def __init__(self, recv_rows: np.ndarray, cluster: Cluster, model: CostModel, slow: float,
                 halo: HaloOptions | None = None, fraction: float = 1.0):
        """``halo``: the rows' dtype on the wire; ``fraction``: of the rows sent (delayed:R
        sends 1/R of them each step, local none)."""
        self.halo, self.fraction = halo or HaloOptions(), float(fraction)
        r = np.asarray(recv_rows, dtype=np.float64)
        self.p = r.shape[0]
        hosts = cluster.hosts_of(self.p)
        same = hosts[:, None] == hosts[None, :]
        self.cluster, self.model, self.slow = cluster, model, slow
        intra, inter = np.where(same, r, 0.0), np.where(same, 0.0, r)
        self.in_intra, self.out_intra = intra.sum(1), intra.sum(0)
        self.k_intra = ((intra > 0) | (intra.T > 0)).sum(1)
        self.k_inter = ((inter > 0) | (inter.T > 0)).sum(1)
        host_in = np.bincount(hosts, weights=inter.sum(1), minlength=hosts.max() + 1)
        host_out = np.bincount(hosts, weights=inter.sum(0), minlength=hosts.max() + 1)
        self.host_rows = np.maximum(host_in, host_out)[hosts]
        self.out_all = r.sum(0)
        self.in_all = r.sum(1)
        self.inter_rows = inter.sum(0) + inter.sum(1)  # sent and received across hosts

    def row_bytes(self, width: float) -> float:
        """Bytes of one row on the wire, times the fraction of the rows sent."""
        return self.fraction * self.halo.row_bytes(width, self.model.bytes_per_value)

    def coding(self, k: dict, width: float, cache: float) -> np.ndarray:
        """Encoding the rows a rank sends and decoding those it receives (halo dtype)."""
        encode, decode = self.halo.coding[self.halo.dtype]
        if self.p == 1 or not (encode or decode) or not self.fraction:
            return np.zeros(self.p)
        values = self.fraction * width * (encode * self.out_all + decode * self.in_all)
        return self.slow * _rate(k, "gamma_elem", 4.0 * width * self.out_all, cache) * values

    def byte_work(self, width: float) -> np.ndarray:
        """The rank's work per byte it sends to and receives from other hosts
        (``exchange_byte_s``)."""
        if self.p == 1 or not self.model.exchange_byte_s:
            return np.zeros(self.p)
        return self.slow * self.model.exchange_byte_s * self.row_bytes(width) * self.inter_rows

    def copy(self, width: float) -> np.ndarray:
        """The per-byte part of the shared-memory exchange (CPU copies)."""
        return self.slow * self.model.shm_beta * self.row_bytes(width) * \
            np.maximum(self.in_intra, self.out_intra) if self.p > 1 else np.zeros(1)

    def __call__(self, width: float) -> np.ndarray:
        if self.p == 1 or not self.fraction:
            return np.zeros(self.p)
        m, c = self.model, self.cluster
        row_bytes = self.row_bytes(width)
        shm = self.slow * (m.shm_alpha * self.k_intra
                           + m.shm_beta * row_bytes * np.maximum(self.in_intra, self.out_intra))
        if c.network is None:
            return shm
        net = c.network
        if c.simulated:  # every post waits latency + its own sent bytes / bandwidth
            return np.maximum(shm, net.latency_s + row_bytes * self.out_all / net.bandwidth_Bps)
        remote = (net.latency_s * self.k_inter
                  + np.where(self.k_inter > 0, row_bytes * self.host_rows / net.bandwidth_Bps, 0.0))
        return np.maximum(shm, remote)


def _ring(n: int, nbytes: float, alpha: float, beta: float) -> float:
    return 0.0 if n <= 1 else 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes * beta


def allreduce_time(nbytes: float, parts: int, cluster: Cluster, model: CostModel,
                   slow: float = 1.0) -> float:
    """Hierarchical ring allreduce of ``nbytes``: within each host, then between hosts."""
    net = cluster.network
    if net is None or cluster.simulated or cluster.ranks_per_host is None:
        return slow * _ring(parts, nbytes, model.shm_alpha, model.shm_beta)
    per_host = min(parts, cluster.ranks_per_host)
    hosts = math.ceil(parts / per_host)
    return (slow * _ring(per_host, nbytes, model.shm_alpha, model.shm_beta)
            + _ring(hosts, nbytes, net.latency_s, 1.0 / net.bandwidth_Bps))


def _rate(k: dict, key: str, working_set, cache: float):
    """Seconds per unit of ``key``'s work for that working set: between the cached constant
    and the one measured beyond the cache (``<key>_mem``)."""
    return k[key] + beyond_cache_fraction(working_set, cache) * (k[f"{key}_mem"] - k[key])


def _dense(k: dict, rows, a: int, c: int, cache: float):
    """A ``rows x a`` by ``a x c`` product: its flops, or the bytes it streams (input and
    output) where they do not fit the cache, whichever takes longer."""
    moved = 4.0 * rows * (a + c)
    return np.maximum(k["gamma_flop"] * 2.0 * rows * a * c,
                      k["gamma_byte"] * moved * beyond_cache_fraction(moved, cache))


class _Pass:
    """One pass (forward or backward) of one layer on every rank: stages ``(before,
    overlapped, exchange)`` then ``after`` (see :mod:`planning.shared_cores`)."""

    def __init__(self, stages: list, after):
        self.stages, self.after = stages, np.asarray(after, dtype=np.float64)

    def alone(self) -> np.ndarray:
        """Each rank's time with its cores to itself."""
        return self.after + sum(before + np.maximum(overlapped, x)
                                for before, overlapped, x in self.stages)

    def exposed(self) -> np.ndarray:
        """Each rank's wait for exchanges beyond the work they overlap."""
        return sum((np.maximum(0.0, x - overlapped) for _, overlapped, x in self.stages),
                   0.0 * self.after)

    def plus(self, seconds: float) -> "_Pass":
        return _Pass(self.stages, self.after + seconds)


def _sending(k: dict, xchg: _Exchange, n, width: float, cache: float) -> tuple:
    """(pack, copy, flight, travel) per rank of one exchange of ``width``-wide rows: gathering
    the rows a rank sends from its owned rows (index_select; backward adds the gradients
    received for them, index_add); the per-byte copying of the shared-memory exchange, the
    halo dtype's encoding and decoding and the exchange's fixed cost (``exchange_overhead_s``:
    work, not waiting); the work per byte sent and received across hosts
    (``exchange_byte_s``), which takes the rank's core while the exchange travels, so that it
    adds to the compute overlapping the exchange and costs nothing where the rank waits for
    the exchange anyway; and the rest of the exchange's time."""
    pack = _rate(k, "gamma_gather", 4.0 * width * n, cache) * xchg.out_all * width
    cp = xchg.copy(width)
    fixed = xchg.model.exchange_overhead_s if xchg.p > 1 and xchg.fraction else 0.0
    work = cp + xchg.coding(k, width, cache) + fixed
    return pack, work, xchg.byte_work(width), np.maximum(0.0, xchg(width) - cp)


def _per_edge(k: dict, w: dict, width: float, rows_read, cache: float):
    """Seconds per non-zero of an aggregation over rows ``width`` wide, per rank
    (:func:`nnz_seconds`): at the cached constants for the share of reads that hit a
    least-recently-used cache of the rows fitting the rank's cache share
    (:func:`planning.cache_knee.lru_hit_share`, from the workload's ``gather_share``), at the
    constants beyond the cache for the rest; without ``gather_share``, between the two by the
    rows read (``rows_read``) as every other op."""
    cached, beyond = nnz_seconds(k, width), nnz_seconds(k, width, "_mem")
    share = w.get("gather_share")
    if share is None or cache <= 0:
        return cached + beyond_cache_fraction(4.0 * width * rows_read, cache) * (beyond - cached)
    hit = lru_hit_share(share, cache / (4.0 * width))  # the rows the cache holds
    return hit * cached + (1.0 - hit) * beyond


def nnz_seconds(k: dict, width: float, suffix: str = "") -> float:
    """Seconds per non-zero of an aggregation over rows ``width`` wide at constants ``k``
    (``suffix`` ``"_mem"``: beyond the cache): ``g_nnz + g_edge w``, or below
    :data:`SMALL_ROWS_BELOW` the small rows' kernel's own line where it is calibrated
    (``gamma_nnz_narrow``, ``gamma_edge_narrow``)."""
    if width < SMALL_ROWS_BELOW and (k.get(f"gamma_nnz_narrow{suffix}", 0.0) > 0
                                     or k.get(f"gamma_edge_narrow{suffix}", 0.0) > 0):
        return k[f"gamma_nnz_narrow{suffix}"] + k[f"gamma_edge_narrow{suffix}"] * width
    return k[f"gamma_nnz{suffix}"] + k[f"gamma_edge{suffix}"] * width


def _per_row(k: dict, width: float, rows, cache: float):
    """Seconds of an aggregation's output ``rows`` (``width`` values each; written fresh, or
    added into): ``g_row`` between its cached and beyond-the-cache constants by the output's
    size."""
    rows = np.asarray(rows, dtype=np.float64)
    return _rate(k, "gamma_row", 4.0 * width * rows, cache) * rows


def _layer_times(w: dict, spec: ModelSpec, layer: int, k: dict, xchg: _Exchange,
                 training: bool, cache: float, gather_cache: float) -> tuple[_Pass, _Pass]:
    """(forward, backward) passes of one layer; ``gather_cache``: each rank's share of its
    host's last-level cache (bytes), which the aggregation's gathers reuse; ``cache``: what
    every other op counts on (:func:`stream_cache`)."""
    a, c = spec.widths[layer], spec.widths[layer + 1]
    n = w["nodes"]
    out_rows, in_rows, agg_rows, ein, eb, bnd_rows = _rows_computed(w, spec, layer, training)
    halo = np.asarray(w["recv_rows"], dtype=np.float64).sum(1)
    first, last = layer == 0, layer == spec.layers - 1
    in_elems = n * a if training and first and spec.dropout else 0 * n
    # the output's bias, activation and dropout, and the input dropout of the raw features,
    # which need no gradient: forward only
    output_ops, output_back = _output_passes(k, spec, layer, training, out_rows, n, cache)
    elementwise = output_ops + _rate(k, "gamma_dropout", 4.0 * n * a, cache) * in_elems
    if spec.name == "gat":
        heads = spec.heads[layer]
        w = c + heads  # each source's transformed row and its attention term
        pack, cp, fl, xf = _sending(k, xchg, n, w, cache)
        edges = ein + eb + n
        per_edge = (_rate(k, "gamma_gather", 4.0 * (n + halo) * c, gather_cache) * c * 3
                    + _rate(k, "gamma_elem", 4.0 * edges * heads, cache) * heads * 8)
        owned_part, halo_part = per_edge * (ein + n), per_edge * eb
        dense = _dense(k, n, a, c, cache)
        # the edges from owned sources are scored and aggregated while the halo travels, the
        # halo's edges after it; backward in reverse (the halo's edges give the gradients sent)
        return (_Pass([(dense + pack + cp, owned_part + fl, xf)], halo_part + elementwise),
                _Pass([(output_back + 2 * halo_part + cp, 2 * owned_part + fl, xf)],
                      pack + dense * (1 if first else 2)))
    width = min(a, c)
    transform_first = spec.transforms_first(layer)
    if first and not transform_first and not (training and spec.dropout):
        # the aggregate of the raw features is computed once and kept (RankGraph's cache of
        # constant inputs), halo exchange included: evaluation (and training without input
        # dropout) only transforms it
        dense = _dense(k, out_rows, a, c, cache) * (2 if spec.name == "sage" else 1)
        return _Pass([], dense + elementwise), _Pass([], dense + output_back)
    if first and not transform_first:
        # an input needing no gradient (the raw features through dropout) is aggregated for
        # every row, the rows computed selected from it (LocalGraph.aggregate_rows)
        ein, eb, agg_rows = w["inner_edges"], w["boundary_edges"], n
        bnd_rows = _boundary_rows(w, n, eb)
    # transforming first transforms the rows the input holds (SAGE's root transform on the
    # first layer: the rows computed only); aggregating first, the rows computed
    dense = _dense(k, in_rows if transform_first else out_rows, a, c, cache)
    if spec.name == "sage":
        dense = dense + _dense(k, in_rows if transform_first and not first else out_rows, a, c,
                               cache)
    dense_back = dense * (1 if first else 2)
    root_select = _root_select(k, w, spec, training, out_rows, in_rows, a, cache)
    self_loops = agg_rows if spec.name == "gcn" else 0
    per_edge = _per_edge(k, w, width, n + halo, gather_cache)
    # each product's output rows: the inner block's rows fresh; the boundary block adds into
    # its rows with a non-zero (at most one per edge); backward, the transposed products
    # write the input's rows and the halo's
    inner_edges, bnd_edges = per_edge * (ein + self_loops), per_edge * eb
    inner = inner_edges + _per_row(k, width, agg_rows, cache)
    bnd = bnd_edges + _per_row(k, width, bnd_rows, cache)
    inner_back = inner_edges + _per_row(k, width, in_rows, cache)
    bnd_back = bnd_edges + _per_row(k, width, np.minimum(halo, eb), cache)
    pack, cp, fl, x = _sending(k, xchg, n, width, cache)
    none = 0.0 * n
    pre, post = (dense, none) if transform_first else (none, dense)
    post = post + root_select
    if w["kind"] == "vertex_cut":  # masters -> mirrors, local product, partial sums -> masters
        # (a local row's products from masters' and from mirrors' rows are summed inside the
        # kernel, gnnscale/graph/vertex_cut.py: no elementwise pass of their own)
        oo, om, mo, mm = _vertex_cut_blocks(w, ein, self_loops, per_edge)
        # output rows: forward, oo and mo write the masters' and the mirrors' rows, om and mm
        # add into those they reach; backward (transposed), oo and om write them, mo and mm
        # add into them
        fresh = _per_row(k, width, n, cache) + _per_row(k, width, halo, cache)
        om_adds, mo_adds, mm_adds = (_per_row(k, width, r, cache)
                                     for r in _vertex_cut_adds(w, n, halo))
        fwd = _Pass([(pre + pack + cp, oo + mo + fresh + fl, x),
                     (mm + mm_adds + cp, om + om_adds + fl, x)],
                    pack + post + elementwise)
        back = [(pack + cp, oo + om + fresh + fl, x), (mm + mm_adds + cp, mo + mo_adds + fl, x)]
    else:
        fwd = _Pass([(pre + pack + cp, inner + fl, x)], bnd + post + elementwise)
        back = [(bnd_back + cp, inner_back + fl, x)]
    needs_agg_grad = not first or transform_first
    # the root rows' gradient added into the input's (index_add) where the input needs one
    dense_back = dense_back + (none if first else root_select)
    if not needs_agg_grad:
        return fwd, _Pass([], dense_back + output_back)
    # backward runs the layer in reverse: elementwise, then the dense transform's gradient where
    # it came last, the aggregation's (its exchange), then the transform's where it came first
    (b0, ov0, x0), rest = back[0], back[1:]
    before = b0 + output_back + (none if transform_first else dense_back)
    after = pack + (dense_back if transform_first else none)
    return fwd, _Pass([(before, ov0, x0), *rest], after)


def _output_passes(k: dict, spec: ModelSpec, layer: int, training: bool, out_rows, n,
                   cache: float) -> tuple:
    """Seconds of a layer's output passes per rank, (forward, backward): the last layer's bias
    (``gamma_elem`` a value; twice backward); below it, in training with dropout, ReLU and the
    next layer's input dropout, fused with the next layer's transform where that layer (GCN,
    SAGE) transforms first (``gamma_activation``, ``gamma_activation_back`` a value, its
    products being the next layer's dense terms), else the dropout kernel and the bias
    (``gamma_dropout`` + ``gamma_elem`` forward, 4 ``gamma_elem`` backward); in evaluation 2
    ``gamma_elem`` forward."""
    c = spec.widths[layer + 1]
    values, working = out_rows * c, 4.0 * n * c
    elem = _rate(k, "gamma_elem", working, cache)
    if layer == spec.layers - 1:
        return elem * values, 2 * elem * values
    if not (training and spec.dropout):
        return 2 * elem * values, 4 * elem * values
    if spec.name in ("gcn", "sage") and spec.transforms_first(layer + 1):
        return (_rate(k, "gamma_activation", working, cache) * values,
                _rate(k, "gamma_activation_back", working, cache) * values)
    return (_rate(k, "gamma_dropout", working, cache) + elem) * values, 4 * elem * values


def stream_cache(model: CostModel, share: float, cores_per_rank: int = 1) -> float:
    """The cache a rank's streaming ops count on (every op but the aggregation's gathers): its
    share of the host's cache (``share``), at most the cache its cores have to themselves
    (``private_cache_bytes`` each; where unknown, the share)."""
    own = model.private_cache_bytes * max(1, int(cores_per_rank))
    return min(share, own) if own > 0 else share


def _boundary_rows(w: dict, agg_rows, eb, level: int | None = None):
    """Rows an edge cut's boundary product adds into per rank: the ``agg_rows`` aggregated
    that have a boundary in-edge (the workload's ``boundary_rows``, or its
    ``computed_boundary_rows[level]`` for the rows a training step narrows to), at most one
    per edge of ``eb``; without the count as many as the edges, every row at most."""
    bound = np.minimum(agg_rows, eb)
    counted, computed = w.get("boundary_rows"), w.get("computed_boundary_rows")
    if level is not None and computed is not None and level < len(computed):
        counted = computed[level]
    return bound if counted is None else np.minimum(bound, counted)


def _vertex_cut_blocks(w: dict, edges, self_loops, per_edge) -> list:
    """Seconds of a vertex cut's four block products (masters <- masters with the self loops,
    masters <- mirrors, mirrors <- masters, mirrors <- mirrors) per rank; a workload without
    ``vertex_cut_edges`` gives them all to the last, which overlaps no exchange."""
    blocks = w.get("vertex_cut_edges")
    if blocks is None:
        return [0.0 * edges, 0.0 * edges, 0.0 * edges, per_edge * (edges + self_loops)]
    oo, om, mo, mm = np.asarray(blocks, dtype=np.float64)
    return [per_edge * (oo + self_loops), per_edge * om, per_edge * mo, per_edge * mm]


def _vertex_cut_adds(w: dict, masters, mirrors) -> tuple:
    """Rows per rank that a vertex cut's adding products reach: masters <- mirrors (forward)
    and mirrors <- masters transposed (backward) add into masters' rows, mirrors <- mirrors
    into mirrors' rows, each at most one row per non-zero of its block (without
    ``vertex_cut_edges``: none but the last, which reaches every mirror)."""
    masters, mirrors = (np.asarray(v, dtype=np.float64) for v in (masters, mirrors))
    blocks = w.get("vertex_cut_edges")
    if blocks is None:
        return 0.0 * masters, 0.0 * masters, mirrors
    _, om, mo, mm = np.asarray(blocks, dtype=np.float64)
    return np.minimum(masters, om), np.minimum(masters, mo), np.minimum(mirrors, mm)


def _root_select(k: dict, w: dict, spec: ModelSpec, training: bool, out_rows, in_rows,
                 a: int, cache: float):
    """SAGE's root transform in a training step of an edge cut that computes only the rows
    the loss needs (the workload's ``computed_*``): it reads the rows it computes, selected
    from the layer's input (``index_select`` of ``out_rows x a`` values, ``nn/conv.py``
    ``_select``; 205,000 rows 128 wide a step per rank on R-MAT 18 in 2 parts). Zero
    elsewhere, and for evaluation, which passes every row."""
    if spec.name != "sage" or not training or w["kind"] == "vertex_cut" or \
            not len(w.get("computed_rows", ())):
        return 0.0 * np.asarray(out_rows, dtype=np.float64)
    return _rate(k, "gamma_gather", 4.0 * a * np.asarray(in_rows, dtype=np.float64),
                 cache) * np.asarray(out_rows, dtype=np.float64) * a


def _rows_computed(w: dict, spec: ModelSpec, layer: int, training: bool) -> tuple:
    """``(rows computed, rows of the input, rows aggregated, inner edges, boundary edges
    read, rows the boundary edges add into)`` per rank for one layer: every row, except in
    a training step whose workload counts the narrowed rows (``computed_*``,
    :func:`planning.workload.part_workload`; GCN and SAGE, GAT computes every row). Edge cut: the last layer computes the loss's rows only, each
    layer below the rows the layer above reads, and each aggregation reads only the in-edges
    of its rows. Vertex cut: every layer aggregates every master over every edge; the last
    layer's output (its bias, its transform where it aggregates first) is the loss's rows
    only, selected from that aggregate."""
    n, ein, eb = w["nodes"], w["inner_edges"], w["boundary_edges"]
    levels = np.asarray(w.get("computed_rows", np.zeros((0, n.size))))
    level = spec.layers - 1 - layer
    every = _boundary_rows(w, n, eb)
    if not training or spec.name not in ("gcn", "sage"):
        return n, n, n, ein, eb, every
    if w["kind"] == "vertex_cut":
        return (levels[0] if level == 0 and len(levels) else n), n, n, ein, eb, every
    out_rows, in_rows, bnd_rows = n, n, every
    if level < len(levels):
        out_rows = levels[level]
        ein = np.asarray(w["computed_inner_edges"], dtype=np.float64)[level]
        eb = np.asarray(w["computed_boundary_edges"], dtype=np.float64)[level]
        bnd_rows = _boundary_rows(w, out_rows, eb, level)
    if layer > 0 and level + 1 < len(levels):
        in_rows = levels[level + 1]
    return out_rows, in_rows, out_rows, ein, eb, bnd_rows


def _outputs(k: dict, kind: str, rows: float, classes: int, cache: float) -> float:
    """Seconds of the training loss (``kind`` "loss", over the training rows, forward and
    backward) or the evaluation's metrics ("eval", over every row) of ``rows`` rows of
    ``classes`` logits: per row and per logit where calibrated (``gamma_loss_row``, ...), else
    10 elementwise ops per logit."""
    if f"gamma_{kind}_row" in k:
        return rows * (k[f"gamma_{kind}_row"] + k[f"gamma_{kind}_logit"] * classes)
    return float(_rate(k, "gamma_elem", 4.0 * rows * classes, cache)) * 10 * rows * classes


def _exchange_widths(spec: ModelSpec) -> list:
    """Values per row each layer's exchange sends: the narrower of its input and output
    (GAT: its transformed row and attention terms)."""
    return [min(a, c) if spec.name != "gat" else c + h for a, c, h in
            zip(spec.widths[:-1], spec.widths[1:], spec.heads or [1] * spec.layers)]


def _without_waits(passes: _Pass) -> tuple:
    """A training pass under a stale policy: its stages wait for no exchange; returns the pass
    and each rank's travel time of its exchanges (they travel while the step computes)."""
    travel = sum((x for _, _, x in passes.stages), 0.0 * passes.after)
    return _Pass([(b, o, 0.0 * x) for b, o, x in passes.stages], passes.after), travel


def predict(workload: dict, spec: ModelSpec, cluster: Cluster | None = None,
            model: CostModel | None = None, halo: HaloOptions | None = None) -> dict:
    """Predicted seconds of one training step and one evaluation pass (see module docstring).

    ``halo``: the halo dtype and staleness policy (default float32, exact).

    Returns ``step_s``, ``eval_s``, ``epoch_s`` (both), the step's parts ``forward_s``,
    ``backward_s``, ``allreduce_exposed_s``, ``optimizer_s``, ``exchange_exposed_s`` (time the
    slowest ranks wait for halos), ``slowest_rank`` (most busy in the step), ``slowest_layer``
    and ``slowest_phase`` (the costliest phase), ``bound`` ("communication" or "compute"), and
    per-rank ``rank_step_s`` (each rank's own work with no waiting for others) and
    ``halo_bytes`` (per rank, received per exchange of the widest layer); per step,
    ``exchanges_step`` (halo exchanges), ``collectives_step`` (gradient allreduces),
    ``halo_bytes_step`` (per rank, bytes sent) and
    ``exchange_s`` (the longest rank's time its exchanges travel, hidden or not).
    """
    cluster = cluster or Cluster()
    model = model or CostModel()
    p = int(workload["num_parts"])
    slow = cluster.oversubscription(p)
    k = model.constants_for(cluster.cores_per_rank)
    halo = halo or HaloOptions()
    stale = halo.staleness
    xchg = _Exchange(workload["recv_rows"], cluster, model, 1.0, halo)
    train_xchg = xchg if stale.wire_fraction == 1.0 else \
        _Exchange(workload["recv_rows"], cluster, model, 1.0, halo, stale.wire_fraction)
    background = np.zeros(p)  # stale policies: each rank's exchanges travelling in the step
    overhead = model.layer_overhead_s
    hosts = cluster.hosts_of(p)
    recv = np.asarray(workload["recv_rows"], dtype=np.float64)
    senders = (recv > 0) | (recv.T > 0)  # the exchanges run both ways (forward, backward)

    def timeline(passes: list, coupled: bool = True) -> np.ndarray:
        """When each pass ends, the slowest rank's (:mod:`planning.shared_cores`); ranks not
        ``coupled`` wait for no peer (stale policies use rows sent in an earlier step)."""
        return latest_pass_ends([(w.stages, w.after) for w in passes],
                                senders if coupled else np.zeros_like(senders), hosts,
                                cluster.host_cores, cluster.cores_per_rank, model.noise_s)
    gathers = model.cache_bytes / np.bincount(hosts).max()  # each rank's share of the LLC
    cache = stream_cache(model, gathers, cluster.cores_per_rank)
    fwd, bwd, ev, exposed = [], [], [], []
    travel, sent, exchanges = 0.0, 0.0, 0
    for layer, width in enumerate(_exchange_widths(spec)):
        f, b = _layer_times(workload, spec, layer, k, train_xchg, True, cache, gathers)
        if not stale.waits:
            (f, f_travel), (b, b_travel) = _without_waits(f), _without_waits(b)
            background = background + f_travel + b_travel
        fe, _ = _layer_times(workload, spec, layer, k, xchg, False, cache, gathers)
        fwd.append(f.plus(overhead))
        bwd.append(b.plus(overhead))
        ev.append(fe.plus(overhead))
        exposed.append(f.exposed() + b.exposed())
        stages = f.stages + b.stages
        travel = travel + sum(x for _, _, x in stages)
        sent = sent + len(stages) * train_xchg.out_all * train_xchg.row_bytes(width)
        exchanges += len(stages)
    ends = timeline(fwd + bwd[::-1], coupled=stale.waits)
    computed = float(ends[-1])
    # a stale step lasts at least as long as its exchanges take to travel
    ends[-1] = max(computed, float(background.max()))
    t_fwd = float(ends[spec.layers - 1])
    # allreduce buckets: layers grouped from the last until a quarter of the gradients
    grads = [4.0 * n for n in spec.layer_weights()]
    bucket_min = min(4 * 2**20, max(64 * 2**10, sum(grads) / 4))
    comm_free = 0.0
    pending = 0.0
    # an allreduce is a collective like an exchange: its fixed cost as well
    fixed = model.exchange_overhead_s if p > 1 else 0.0
    collectives = 0
    for done, layer in zip(ends[spec.layers:], reversed(range(spec.layers))):
        pending += grads[layer]
        if pending >= bucket_min or layer == 0:
            start = max(float(done) - t_fwd, comm_free)
            comm_free = start + allreduce_time(pending, p, cluster, model, slow) + fixed
            collectives += 1
            pending = 0.0
    t_bwd = float(ends[-1]) - t_fwd
    ar_exposed = max(0.0, comm_free - t_bwd)
    optimizer = 12 * sum(spec.layer_weights()) * k["gamma_elem"] * slow
    loss = slow * _outputs(k, "loss", float(np.max(workload["train_nodes"])), spec.widths[-1],
                           cache)
    step = t_fwd + t_bwd + ar_exposed + optimizer + loss
    t_eval = float(timeline(ev)[-1]) + allreduce_time(64, p, cluster, model, slow) + fixed \
        + slow * _outputs(k, "eval", float(np.max(workload["nodes"])), spec.widths[-1], cache)
    rank_step = sum(f.alone() for f in fwd) + sum(b.alone() for b in bwd)
    slowest = int(np.argmax(rank_step))
    phases = [(float(fwd[l].alone().max()), l, "forward") for l in range(spec.layers)] + \
             [(float(bwd[l].alone().max()), l, "backward") for l in range(spec.layers)]
    _, slow_layer, slow_phase = max(phases)
    exch_exposed = float(sum(x.max() for x in exposed)) + float(ends[-1]) - computed
    comm_s = exch_exposed + ar_exposed
    widest = max(_exchange_widths(spec))
    halo_rows = np.asarray(workload["recv_rows"]).sum(1)
    return {"step_s": step, "eval_s": t_eval, "epoch_s": step + t_eval, "forward_s": t_fwd,
            "backward_s": t_bwd, "allreduce_exposed_s": ar_exposed, "optimizer_s": optimizer,
            "exchange_exposed_s": exch_exposed,
            "exchange_s": float(np.max(travel + background)) if p > 1 else 0.0,
            "halo_bytes_step": np.asarray(sent, dtype=np.float64) * np.ones(p),
            "exchanges_step": exchanges, "collectives_step": collectives,
            "bound": "communication" if comm_s > 0.5 * step else "compute",
            "slowest_rank": slowest, "slowest_layer": slow_layer + 1,
            "slowest_phase": slow_phase, "rank_step_s": rank_step,
            "halo_bytes": halo_rows * xchg.row_bytes(widest),
            "imbalance": float(rank_step.max() / rank_step.mean()) if rank_step.mean() else 1.0}
