"""KaMinPar edge cut: shared-memory multilevel partitioning built for large part counts.

Runs the PyPI package ``kaminpar`` (the KaHIP group's Python bindings). The bindings read a
graph only from a file, so the graph's undirected adjacency is written as a ParHIP binary file
(:mod:`.parhip`) into a temporary folder that is removed afterwards, also when anything fails.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ..base import Partitioner
from ..errors import PartitionError
from .metis import check_balance, check_imbalance, combined_vertex_weights, constraint_weights
from .parhip import read_parhip, write_parhip
from .rebalance import rebalance


def _kaminpar():
    try:
        import kaminpar  # deferred: importing the package must not require KaMinPar
    except ImportError as exc:
        raise PartitionError(
            f"partitioner 'kaminpar' needs the kaminpar package (pip install kaminpar): {exc}"
        ) from None
    return kaminpar


def _affinity_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class KaMinParPartitioner(Partitioner):
    """KaMinPar multilevel k-way edge cut on the symmetrised graph (self loops, repeats dropped).

    Balance: ``balance=("nodes",)`` (default) is KaMinPar's own node balance: every part holds
    at most ``(1 + imbalance) * ceil(N / P)`` nodes. KaMinPar takes one node weight, so several
    targets or a weighted one (``"edges"``, ``"train"``) follow :class:`MetisPartitioner`: each
    target's weights are normalised to the same total and summed into one node weight, then a
    greedy pass (:mod:`.rebalance`) moves nodes until every target is within ``imbalance`` of the
    mean (best effort where a single node exceeds it).

    Results are identical for a seed when ``threads=1``; with several threads KaMinPar's
    parallel phases make them vary from run to run (same quality, other assignments).

    Args:
        num_parts: number of parts.
        seed: KaMinPar's random seed (default 0).
        preset: a KaMinPar configuration from ``kaminpar.context_names()``, e.g. ``"default"``,
            ``"largek"`` (built for hundreds of parts and more), ``"fast"``, ``"eco"``,
            ``"strong"``, ``"terapart"`` (memory-efficient; needs ``compress``). Default
            ``"largek"``.
        imbalance: allowed load excess over the mean, 0.03 = 3% (default 0.03).
        balance: tuple of ``"nodes"``, ``"edges"``, ``"train"`` (default ``("nodes",)``);
            ``"train"`` needs ``graph.train_mask``.
        threads: worker threads; ``None`` (default) means every core this process may run on.
        compress: load the graph compressed (less memory, a little slower); ``None`` (default)
            means only for the ``terapart`` presets, which require it.
        tmp_dir: folder for the temporary ParHIP file (about ``4 * E`` bytes for the symmetrised
            edges); ``None`` means the system's temporary folder (``$TMPDIR``).
    """

    name = "kaminpar"
    kind = "edge_cut"
    defaults = {"preset": "largek", "imbalance": 0.03, "balance": ("nodes",), "threads": None,
                "compress": None, "tmp_dir": None}

    def _check_params(self):
        params = self.method_params
        params["balance"] = check_balance(params["balance"])
        check_imbalance(params["imbalance"])
        presets = sorted(_kaminpar().context_names())
        if params["preset"] not in presets:
            raise PartitionError(
                f"preset={params['preset']!r} is not a KaMinPar preset; choose one of: "
                f"{', '.join(presets)}")
        threads = params["threads"]
        if threads is not None and (isinstance(threads, (bool, np.bool_))
                                    or not isinstance(threads, (int, np.integer)) or threads < 1):
            raise PartitionError(f"threads={threads!r} must be a positive integer or None")
        compress = params["compress"]
        if compress is not None and not isinstance(compress, (bool, np.bool_)):
            raise PartitionError(f"compress={compress!r} must be True, False or None")
        if compress is False and params["preset"].startswith("terapart"):
            raise PartitionError(
                f"preset={params['preset']!r} needs a compressed graph; drop compress=False")
        tmp_dir = params["tmp_dir"]
        if tmp_dir is not None and not Path(tmp_dir).is_dir():
            raise PartitionError(f"tmp_dir={str(tmp_dir)!r} is not an existing folder")

    def _partition(self, graph, train_mask):
        balance = self.method_params["balance"]
        imbalance = float(self.method_params["imbalance"])
        weights = None if balance == ("nodes",) else \
            constraint_weights(graph, balance, train_mask)
        if self.num_parts == 1:
            return np.zeros(graph.num_nodes, dtype=np.int32), None
        kaminpar = _kaminpar()
        tmp_dir = self.method_params["tmp_dir"]
        with tempfile.TemporaryDirectory(prefix="gnnscale-kaminpar-",
                                         dir=None if tmp_dir is None else str(tmp_dir)) as work:
            path = Path(work) / "graph.parhip"
            vweights = None if weights is None else combined_vertex_weights(weights)
            try:
                write_parhip(path, graph, vweights, wide=bool(kaminpar.__64bit__))
            except OSError as exc:
                raise PartitionError(
                    f"cannot write the temporary ParHIP file in {work}: {exc.strerror or exc}"
                ) from None
            node_parts = self._run(kaminpar, path, graph.num_nodes, imbalance)
            if weights is not None:
                indptr, neighbours, _ = read_parhip(path)
                node_parts = rebalance(indptr, neighbours, node_parts, weights, self.num_parts,
                                       imbalance, self.seed)
                del neighbours  # unmap before the folder is removed
        return node_parts, None

    def _run(self, kaminpar, path: Path, num_nodes: int, imbalance: float) -> np.ndarray:
        preset = self.method_params["preset"]
        compress = self.method_params["compress"]
        if compress is None:
            compress = preset.startswith("terapart")
        try:
            kgraph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP,
                                         compress=bool(compress))
        except ValueError as exc:
            raise PartitionError(f"KaMinPar could not load {path}: {exc}") from None
        if kgraph.n() != num_nodes:
            raise PartitionError(f"KaMinPar read {kgraph.n()} nodes from {path}, "
                                 f"expected {num_nodes}")
        threads = self.method_params["threads"] or _affinity_cores()
        kaminpar.reseed(self.seed)
        solver = kaminpar.KaMinPar(int(threads), kaminpar.context_by_name(preset))
        parts = solver.compute_partition(kgraph, self.num_parts, imbalance)
        return np.asarray(parts, dtype=np.int32)
