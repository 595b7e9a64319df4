"""Alpha-beta cost model of one full-batch training epoch on a partitioned graph.

For a model with layer widths ``dims = [d_0, d_1, ..., d_L]`` (input features, hidden widths,
classes) on ``P`` parts, part ``p`` with ``N_p`` owned nodes, ``E_p`` edges, ``H_p`` halo rows
from ``K_p`` peers (see :func:`partitioning.metrics.part_summary`):

* compute, forward, layer ``l``: aggregation ``gamma_edge * E_p * d_{l-1}`` plus the dense
  transform ``gamma_flop * 2 * N_p * d_{l-1} * d_l``; backward costs ``backward_factor`` times
  the forward: ``T_comp(p) = (1 + backward_factor) * sum_l (...)``.
* halo exchange: each exchange of width ``d`` costs ``alpha * K_p + beta * H_p * d * b`` (``b``
  bytes per value). Forward exchanges the input of every layer (``d_0 .. d_{L-1}``); backward
  returns gradients for layers 2..L (the input features need none):
  ``T_halo(p) = sum_{l=1..L} x(d_{l-1}) + sum_{l=2..L} x(d_{l-1})``.
  For a vertex cut, ``H_p`` counts mirrors: a partial aggregate goes to the master and the
  result comes back, so each exchange is counted twice.
* gradient allreduce (ring): ``2 (P-1) alpha + 2 (P-1)/P * G * beta`` with ``G`` the bytes of
  all weights (``sum_l (d_{l-1} + 1) d_l`` values unless given).

Predicted epoch time: ``max_p (T_comp(p) + T_halo(p)) + T_allreduce``: the slowest part sets
the pace and no overlap is assumed (an upper bound; overlap makes measured times lower).

The default constants are rough numbers for one CPU core and shared-memory MPI; :meth:`fit`
replaces them with least-squares estimates (non-negative) from measured runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .errors import PartitionError

__all__ = ["CostModel", "epoch_terms"]

TERMS = ("agg_work", "flops", "messages", "bytes")


def _check_dims(dims) -> list[int]:
    dims = [int(d) for d in dims]
    if len(dims) < 2 or min(dims) < 1:
        raise PartitionError(f"dims={dims} must list at least two positive layer widths")
    return dims


def epoch_terms(summary: dict, dims, bytes_per_value: int = 4, backward_factor: float = 2.0,
                num_weights: int | None = None) -> dict:
    """The raw workload of one epoch, before multiplying by the constants.

    Returns per-part float arrays ``agg_work`` (edge x feature products, forward+backward),
    ``flops``, ``messages`` and ``bytes`` (halo traffic received), and the allreduce scalars
    ``allreduce_messages``, ``allreduce_bytes``.
    """
    dims = _check_dims(dims)
    nodes = np.asarray(summary["nodes"], dtype=np.float64)
    edges = np.asarray(summary["edges"], dtype=np.float64)
    halo = np.asarray(summary["halo_nodes"], dtype=np.float64)
    peers = np.asarray(summary.get("halo_peers", np.minimum(halo, summary["num_parts"] - 1)),
                       dtype=np.float64)
    passes = 1.0 + backward_factor
    agg = passes * edges * sum(dims[:-1])
    flops = passes * 2.0 * nodes * sum(a * b for a, b in zip(dims[:-1], dims[1:]))
    exchanged = dims[:-1] + dims[1:-1]  # forward inputs of every layer, backward from layer 2
    twice = 2.0 if summary.get("kind") == "vertex_cut" else 1.0
    messages = twice * peers * len(exchanged)
    traffic = twice * halo * sum(exchanged) * bytes_per_value
    p = int(summary["num_parts"])
    if num_weights is None:
        num_weights = sum((a + 1) * b for a, b in zip(dims[:-1], dims[1:]))
    grad_bytes = float(num_weights * bytes_per_value)
    return {"agg_work": agg, "flops": flops, "messages": messages, "bytes": traffic,
            "allreduce_messages": 2.0 * (p - 1), "allreduce_bytes": 2.0 * (p - 1) / p * grad_bytes}


@dataclass
class CostModel:
    """Constants of the epoch-time model (seconds per unit).

    Attributes:
        alpha: latency per message (default 5e-6 s).
        beta: time per byte moved (default 2e-10 s/B, about 5 GB/s).
        gamma_edge: time per edge x feature aggregated (default 1e-9 s).
        gamma_flop: time per floating-point operation of the dense transforms (default 5e-11 s,
            about 20 GFLOP/s).
        backward_factor: backward cost relative to forward (default 2.0).
        bytes_per_value: bytes per feature value (default 4, float32).
    """

    alpha: float = 5e-6
    beta: float = 2e-10
    gamma_edge: float = 1e-9
    gamma_flop: float = 5e-11
    backward_factor: float = 2.0
    bytes_per_value: int = 4

    def predict(self, summary: dict, dims, num_weights: int | None = None) -> dict:
        """Predicted seconds per epoch for the partition described by ``summary``.

        Returns ``compute_s`` and ``halo_s`` of the slowest part, ``allreduce_s``, ``epoch_s``,
        and the per-part arrays ``part_compute_s`` and ``part_halo_s``.
        """
        t = epoch_terms(summary, dims, self.bytes_per_value, self.backward_factor, num_weights)
        compute = self.gamma_edge * t["agg_work"] + self.gamma_flop * t["flops"]
        halo = self.alpha * t["messages"] + self.beta * t["bytes"]
        allreduce = self.alpha * t["allreduce_messages"] + self.beta * t["allreduce_bytes"]
        slowest = int(np.argmax(compute + halo))
        return {"compute_s": float(compute[slowest]), "halo_s": float(halo[slowest]),
                "allreduce_s": float(allreduce),
                "epoch_s": float(compute[slowest] + halo[slowest] + allreduce),
                "part_compute_s": compute, "part_halo_s": halo}

    def to_dict(self) -> dict:
        """The constants as a JSON-friendly dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "CostModel":
        """Inverse of :meth:`to_dict`; unknown keys are refused."""
        unknown = set(values) - set(cls.__dataclass_fields__)
        if unknown:
            raise PartitionError(f"unknown cost model constant {sorted(unknown)[0]!r}")
        return cls(**values)

    @classmethod
    def fit(cls, measurements, backward_factor: float = 2.0,
            bytes_per_value: int = 4) -> "CostModel":
        """Fit ``gamma_edge``, ``gamma_flop``, ``alpha``, ``beta`` by non-negative least squares.

        Args:
            measurements: iterable of dicts, each with ``seconds`` (a measured time) and the
                workload it covered: any of ``agg_work``, ``flops``, ``messages``, ``bytes``
                (missing ones count as 0). Epoch measurements can be turned into such rows with
                :func:`epoch_terms` (slowest part's terms, allreduce added to messages/bytes);
                micro-benchmarks (one SpMM, one GEMM, one alltoallv) fit individual constants.
        A constant whose term never appears keeps its default.
        """
        from scipy.optimize import nnls

        rows = list(measurements)
        if not rows:
            raise PartitionError("CostModel.fit needs at least one measurement")
        design = np.array([[float(r.get(k, 0.0)) for k in TERMS] for r in rows])
        seconds = np.array([float(r["seconds"]) for r in rows])
        if np.any(seconds < 0) or np.any(design < 0):
            raise PartitionError("measurements must have non-negative seconds and workloads")
        defaults = cls(backward_factor=backward_factor, bytes_per_value=bytes_per_value)
        names = ("gamma_edge", "gamma_flop", "alpha", "beta")
        used = design.max(axis=0) > 0
        # Scale columns to unit max so the solver is well conditioned across 10 decades.
        scale = np.where(used, design.max(axis=0), 1.0)
        coef, _ = nnls(design[:, used] / scale[used], seconds)
        values = {name: getattr(defaults, name) for name in names}
        for name, c, s in zip(np.array(names)[used], coef, scale[used]):
            values[str(name)] = float(c / s)
        return cls(**values, backward_factor=backward_factor, bytes_per_value=bytes_per_value)
