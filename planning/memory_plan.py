"""Memory plan: the peak resident memory of every rank in every phase of a run, before it runs.

Phases (bytes per rank; ``N``/``E``: nodes/edges of the graph, ``F`` features, ``P`` parts,
part ``p`` with ``N_p`` owned nodes, ``E_p`` local edges, ``H_p`` halo rows):

* ``load``: the runtime (interpreter, libraries, MPI: :data:`BASELINE_BYTES`) plus the graph
  (``8 (N+1) + 8 E`` CSR, ``4 N F`` features, ``8 N`` labels, ``3 N`` masks) plus what the
  input layout needs while it reads (:data:`LOADING`, per edge and per node). In a multi-rank
  ``train`` only the host's lowest rank loads; it writes a memory-mapped copy that every rank
  maps, and a rank then holds only the pages it touches (its rows, its halo's features); a
  ``converted`` folder is mapped by every rank without loading.
* ``partition``: the graph plus the method's working memory (:data:`PARTITIONING`); in an
  in-memory ``train`` only rank 0 partitions (touching the whole mapped graph).
* ``store``: the graph, the assignment and one part's arrays being written (``partition``).
* ``setup``: building a rank's part: the graph (in memory: every rank loaded it) plus the
  local CSR blocks, built in a transient COO form (``SETUP_BYTES_PER_EDGE``).
* ``train``: the part's features, labels and masks; the local sparse blocks and their
  transposes (``BLOCK_BYTES_PER_EDGE`` per local edge, ``ROW_BLOCK_BYTES_PER_EDGE`` more per
  edge into a training row for the last layer's blocks of those rows); for every layer what
  autograd keeps for backward (:func:`_layer_floats`: the aggregate when a layer aggregates first, the
  activated output; GAT: ``4 N_p (a + w + 2 c)`` per node and two floats per edge and head,
  ``8 (E_p + N_p) H``, its messages never held whole); weights, gradients and Adam's two
  moments (``16`` bytes per weight); the largest layer's transient temporaries and gradients,
  with its halo rows (GAT: two floats per edge and head and four per node of its wider
  width; no sparse blocks, but ``GAT_INDEX_BYTES_PER_EDGE`` of cached edge lists).
* ``eval``: forward without autograd: one layer's input, aggregate and output live at a time
  (GAT: two layers' node tensors and one layer's per-edge ones), the halo rows, and the
  logits.

A rank's peak is the largest phase; the plan's peak is the largest rank. Coefficients come from
reading the code (array dtypes and copies) and are checked against measured peak RSS by
``benchmarks/memory_plan_validation.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partitioning.errors import PartitionError

__all__ = ["DatasetShape", "plan_memory", "balanced_workload", "LOADING", "PARTITIONING",
           "BASELINE_BYTES", "RETAINED_GROWTH_PER_LAYER", "RETAINED_GROWTH_BOUND",
           "RETAINED_GROWTH_BOUND_PER_LAYER", "RETAINED_GROWTH_BOUND_NO_DROPOUT",
           "retained_growth", "format_plan",
           "format_bytes", "partitioning_cost"]

#: peak resident memory of a command on a graph too small to matter (Python, torch, numpy,
#: scipy, numba and its compiled kernels, MPI): ``gnnscale train`` and ``gnnscale partition``
#: on a 300-node graph (docs/planning.md, "Measured against the plan").
BASELINE_BYTES = {"train": 520 * 2**20, "partition": 380 * 2**20}

#: input layout -> transient bytes (per edge, per node) while loading, on top of the graph.
LOADING = {
    # generated R-MAT/SBM: int64 edge keys, sort and de-duplication, a COO -> CSR pass
    # (80 B per edge: `gnnscale partition --method random` on R-MAT 18 peaks while loading)
    "generated": (80.0, 16.0),
    # arrays read into memory (npz, OGB, Planetoid, PyG/DGL/scipy files): one COO -> CSR copy
    "arrays": (24.0, 8.0),
    # SNAP text edge list: parsed int64 pairs, symmetrised, COO -> CSR
    "edge-list": (56.0, 16.0),
    # a converted folder (`gnnscale convert`): memory-mapped, nothing read until touched
    "converted": (0.0, 0.0),
}

#: partitioner -> working bytes (per edge, per node, fixed) on top of the graph.
PARTITIONING = {
    "random": (0.0, 16.0, 0.0),
    "block": (0.0, 16.0, 0.0),
    # pymetis: symmetric int64 adjacency, its int32 copy, METIS's own graph, the part views
    # built for the summary (100 B per edge: `gnnscale partition --method metis`, R-MAT 18)
    "metis": (100.0, 64.0, 0.0),
    # gnnscale writes the undirected adjacency as a ParHIP file (page cache, not the process's
    # memory) through a transposed copy of the CSR; the bindings read it into their own CSR and
    # coarsen it; the fixed part is the library and its thread pool. Measured beyond the
    # mapped graph, 2 threads, 4-256 parts, with and without `--balance nodes,edges`
    # (docs/planning.md, "Measured against the plan"). Symmetric graphs (the loaders'
    # default); a directed one's file holds up to twice its entries
    "kaminpar": (14.0, 64.0, 80.0 * 2**20),
    # multilevel library without a measurement here: METIS's figure (a plan errs on caution)
    "parhip": (100.0, 64.0, 0.0),
    # streaming: int64 assignment, per-part loads, the edge order
    "ldg": (16.0, 24.0, 0.0),
    "fennel": (16.0, 24.0, 0.0),
    # vertex cuts: int64 (src, dst), a shuffled order, the edge assignment, replica sets
    "libra": (40.0, 32.0, 0.0),
    "hdrf": (40.0, 32.0, 0.0),
}

#: growth of a step's tensors (activations, their gradients and temporaries: what a training
#: or evaluation step allocates and frees) when the allocator keeps freed pages for reuse
#: (``gnnscale.engine.memory.retain_freed_memory``, faster steps): the holes between the step's
#: differently sized tensors stay in the heap; what stays allocated (features, sparse blocks,
#: weights, optimiser state, the raw features' aggregate on pages of its own) does not grow.
#: Retained minus lean peak RSS is measured by ``benchmarks/memory_plan_validation.py`` and
#: ``benchmarks/peak_memory_vs_dgl.py`` (docs/planning.md, "Measured against the plan"): more
#: with 3 layers than with 2 (more tensors of different lifetimes, more holes) and more
#: without dropout, the kept heap settling by whole 256 MiB blocks, so a run may land a block
#: or two higher than the committed one. The expected figure adds
#: :data:`RETAINED_GROWTH_PER_LAYER` of them per layer after the first; whether a retained
#: heap fits is decided with the bound of :func:`retained_growth`: :data:`RETAINED_GROWTH_BOUND` of them with 2 layers and dropout,
#: :data:`RETAINED_GROWTH_BOUND_PER_LAYER` more per further layer and
#: :data:`RETAINED_GROWTH_BOUND_NO_DROPOUT` more without dropout, or twice the expected growth
#: where that is more (above every measured growth, so it errs towards the lean run: slower
#: steps, never a heap that does not fit).
RETAINED_GROWTH_PER_LAYER = 0.3
RETAINED_GROWTH_BOUND = 1.0
RETAINED_GROWTH_BOUND_PER_LAYER = 1.0
RETAINED_GROWTH_BOUND_NO_DROPOUT = 1.0


def retained_growth(layers: int, dropout: float = 0.5) -> tuple[float, float]:
    """(expected, bound): the fractions of a step's tensors a retained heap grows by, for a
    model of ``layers`` layers trained with ``dropout``."""
    expected = RETAINED_GROWTH_PER_LAYER * max(1, layers - 1)
    bound = (RETAINED_GROWTH_BOUND + RETAINED_GROWTH_BOUND_PER_LAYER * max(0, layers - 2)
             + (RETAINED_GROWTH_BOUND_NO_DROPOUT if dropout == 0.0 else 0.0))
    return expected, max(bound, 2.0 * expected)


#: bytes per local edge the engine keeps: the sparse block and its transpose (int32 column
#: index and float32 value each, ``gnnscale.graph.sparse``) and the part view's int64 local
#: CSR index.
BLOCK_BYTES_PER_EDGE = 24.0
#: of which the part view's int64 local CSR index (the rest is built by a layer's first
#: aggregation, which GAT never asks for)
VIEW_BYTES_PER_EDGE = 8.0
#: bytes per local edge into a training row kept for training's last layer, which aggregates
#: only the loss's rows (``LocalGraph.aggregate_rows``): the blocks of those rows and their
#: transposes (int32 index and float32 value each)
ROW_BLOCK_BYTES_PER_EDGE = 16.0
#: transient bytes per local edge while the blocks are built (int64 rows/cols, float64 weights)
SETUP_BYTES_PER_EDGE = 32.0
#: GAT's int64 edge lists (``gnnscale.nn.edge_ops``, cached per graph): the local edges, the
#: same with one self-loop per node, and (on more than one rank) those with owned sources first
GAT_INDEX_BYTES_PER_EDGE = 48.0
#: floats per edge and head a GAT layer keeps for backward (its scores before the LeakyReLU and
#: the softmax numerators; the messages are never held, ``gnnscale.nn.edge_ops.weighted_sum``)
GAT_KEPT_FLOATS_PER_EDGE_HEAD = 2.0
#: floats per edge and head alive at once besides (gathered terms, maxima, their gradients)
GAT_TRANSIENT_FLOATS_PER_EDGE_HEAD = 2.0
#: and per node, of the layer's wider width (the input's dropout draw and mask, the parts'
#: sums rescaled and combined, their gradients)
GAT_TRANSIENT_FLOATS_PER_NODE_WIDTH = 4.0
#: the messages of one chunk of edges, gathered and weighted (``edge_ops.CHUNK_BYTES``, twice)
GAT_MESSAGE_BYTES = 2 * 2.0**20
#: bytes per owned node of the part view (owned ids, local CSR row pointers, degrees)
VIEW_BYTES_PER_NODE = 40.0


@dataclass(frozen=True)
class DatasetShape:
    """The sizes the plan needs: nodes, directed edges (CSR entries), features, classes, and
    the input layout (a key of :data:`LOADING`)."""

    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    layout: str = "arrays"

    def __post_init__(self):
        if self.layout not in LOADING:
            raise PartitionError(f"unknown input layout {self.layout!r}; the memory plan "
                                 f"knows {', '.join(sorted(LOADING))}")

    @classmethod
    def of(cls, data, layout: str = "arrays") -> "DatasetShape":
        """Shape of a loaded ``GraphData`` (or anything with the same attributes)."""
        return cls(int(data.num_nodes), int(data.num_edges), max(int(data.num_features), 1),
                   max(int(data.num_classes), 1), layout)

    @property
    def graph_bytes(self) -> float:
        n, e = self.num_nodes, self.num_edges
        return 8.0 * (n + 1) + 8.0 * e + 4.0 * n * self.num_features + 8.0 * n + 3.0 * n


def balanced_workload(shape: DatasetShape, parts: int, edge_imbalance: float = 1.0,
                      halo_fraction: float | None = None) -> dict:
    """A workload for a partition not computed yet: every part gets ``N/P`` nodes and
    ``edge_imbalance x E/P`` edges; its halo is ``halo_fraction`` of its edges (default: every
    edge crosses, capped by the nodes of the other parts, a random partition's worst case)."""
    from .workload import workload_from_arrays

    if parts < 1 or parts > shape.num_nodes:
        raise PartitionError(f"parts={parts} must be between 1 and the {shape.num_nodes} nodes")
    n = shape.num_nodes / parts
    e = edge_imbalance * shape.num_edges / parts
    fraction = (1.0 - 1.0 / parts) if halo_fraction is None else halo_fraction
    halo = min(e * fraction, shape.num_nodes - n) if parts > 1 else 0.0
    recv = np.full((parts, parts), halo / max(parts - 1, 1))
    np.fill_diagonal(recv, 0.0)
    return workload_from_arrays("edge_cut", np.full(parts, n), np.full(parts, e - halo),
                                np.full(parts, halo), recv, np.full(parts, n / 2),
                                num_nodes=shape.num_nodes, num_edges=shape.num_edges)


def partitioning_cost(method: str) -> tuple[float, float, float]:
    """(bytes per edge, bytes per node, fixed bytes) a partitioner works with; a method without
    an entry is assumed to need as much as the hungriest known one (a plan errs on the side of
    caution)."""
    if method in PARTITIONING:
        return PARTITIONING[method]
    return max(PARTITIONING.values())


def _layer_floats(spec, layer: int, a: int, c: int) -> tuple[float, float, float]:
    """(kept, transient, constant) floats per owned node of one GCN/SAGE layer ``a -> c`` in
    training.

    Kept until backward reaches the layer: what the weight gradient needs besides the input the
    previous activation already keeps (aggregating first: the aggregate of this step's input,
    a dropped-out one in the first layer with input dropout; transforming first, which
    ``order="auto"`` does when ``c <= a``: nothing, except the dropped-out raw features of the
    first layer) and the layer's activated output (the last layer: its logits and their
    log-softmax). Transient: the layer's temporaries forward and its gradients backward, at
    most two rows of the wider width, and for SAGE one of the narrower besides (its second
    product, the root weight's, has its own input and gradient). Constant: the first layer's
    aggregate of the raw features when it aggregates first, computed once and kept on pages of
    its own outside the heap (``gnnscale.graph.rank_graph``), reused by every evaluation and,
    without input dropout, by every training step; it lives across steps and leaves no holes.
    """
    last = layer == spec.layers - 1
    transform_first = spec.transforms_first(layer)
    dropped_input = layer == 0 and spec.dropout > 0.0
    constant = float(a) if layer == 0 and not transform_first else 0.0
    if layer == 0:
        kept_in = float(a) if dropped_input else 0.0
    else:
        kept_in = 0.0 if transform_first else float(a)
    kept_out = 2.0 * c if last else float(c)
    second = float(min(a, c)) if spec.name == "sage" else 0.0
    return kept_in + kept_out, 2.0 * max(a, c) + second, constant


def _training_bytes(shape: DatasetShape, spec, work: dict) -> tuple[np.ndarray, ...]:
    """(train, eval, train's per-step tensors, eval's) bytes per rank on top of the runtime:
    the per-step part is what a step allocates and frees (activations, their gradients and
    temporaries), the rest (features, blocks, weights and optimiser state) stays allocated."""
    n, halo = work["nodes"], np.asarray(work["recv_rows"]).sum(1)
    local_edges = work["inner_edges"] + work["boundary_edges"]
    f = shape.num_features
    data = n * (4.0 * f + 8.0 + 3.0) + VIEW_BYTES_PER_NODE * (n + halo)
    if spec.name == "gat":  # no sparse blocks (built on a layer's first aggregation), the
        # part view's index and the edge lists; one rank has none with owned sources first
        lists = GAT_INDEX_BYTES_PER_EDGE * (1.0 if int(work["num_parts"]) > 1 else 2.0 / 3.0)
        blocks = VIEW_BYTES_PER_EDGE * local_edges + lists * (local_edges + n)
    else:
        rows = local_edges + (n if spec.name == "gcn" else 0)  # GCN's self-loops
        train_share = np.minimum(1.0, np.asarray(work["train_nodes"]) / np.maximum(n, 1.0))
        blocks = (BLOCK_BYTES_PER_EDGE + ROW_BLOCK_BYTES_PER_EDGE * train_share) * rows
    weights = float(sum(spec.layer_weights()))
    params = 16.0 * weights  # weights, gradients, Adam's two moments
    kept, largest, eval_live = np.zeros_like(n), np.zeros_like(n), np.zeros_like(n)
    constant = np.zeros_like(n)
    heads = spec.heads or (1,) * spec.layers
    for layer, (a, c) in enumerate(zip(spec.widths[:-1], spec.widths[1:])):
        if spec.name == "gat":
            w = c + heads[layer]  # the exchanged row: values and source attention terms
            edge_heads = (local_edges + n) * heads[layer]  # self-loops added
            nodes = 4.0 * n * (a + w + 2 * c) + 4.0 * halo * w
            edge_kept = 4.0 * edge_heads * GAT_KEPT_FLOATS_PER_EDGE_HEAD
            edge_transient = 4.0 * edge_heads * GAT_TRANSIENT_FLOATS_PER_EDGE_HEAD
            kept += nodes + edge_kept
            node_transient = 4.0 * n * GAT_TRANSIENT_FLOATS_PER_NODE_WIDTH * max(a, c)
            largest = np.maximum(largest, edge_transient + node_transient + GAT_MESSAGE_BYTES)
            eval_live = np.maximum(eval_live, 2 * nodes + edge_kept + edge_transient
                                   + GAT_MESSAGE_BYTES)
            continue
        w = min(a, c)  # the aggregated (and exchanged) width
        layer_kept, transient, layer_constant = _layer_floats(spec, layer, a, c)
        kept += 4.0 * n * layer_kept
        constant += 4.0 * n * layer_constant
        largest = np.maximum(largest, 4.0 * n * transient + 4.0 * halo * w)
        aggregate = 0.0 if layer_constant else w  # a constant aggregate is counted above
        eval_live = np.maximum(eval_live, 4.0 * n * (a + aggregate + c) + 4.0 * halo * w)
    static = data + blocks + params + constant
    train_step = kept + largest
    eval_step = eval_live + 4.0 * n * spec.widths[-1] * 2
    return static + train_step, static + eval_step, train_step, eval_step


def plan_memory(shape: DatasetShape, spec, work: dict, *, partition_method: str | None = None,
                mode: str = "in-memory", baseline_bytes: float | None = None) -> dict:
    """Per-rank, per-phase peak bytes of a run.

    Args:
        shape: the dataset's sizes and input layout.
        spec: the model (:class:`planning.cost_model.ModelSpec`).
        work: the partition's workload (:func:`planning.workload.part_workload` or
            :func:`balanced_workload`).
        partition_method: the partitioner (see :func:`partitioning_cost`); None: no
            partitioning phase.
        mode: ``"in-memory"`` (``gnnscale train`` without a store: every rank loads the graph,
            rank 0 partitions), ``"store"`` (``train --partitions``: a rank reads its part) or
            ``"partition"`` (``gnnscale partition``: one process loads, partitions, writes).
        baseline_bytes: the runtime's own memory per process (default: :data:`BASELINE_BYTES`
            of the command).
    Returns: ``phases`` (name -> per-rank bytes), ``per_rank_peak`` and ``per_rank_phase``
    (the phase that sets it), ``peak_bytes``,
    ``peak_rank``, ``peak_phase`` (the allocator's defaults: freed memory returned), and
    ``per_rank_peak_retained`` (freed memory kept for reuse: :func:`retained_growth`'s expected
    growth) and ``per_rank_peak_retained_bound`` (the same with its bound).
    """
    if mode not in ("in-memory", "store", "partition"):
        raise PartitionError(f"unknown mode {mode!r}; choose in-memory, store or partition")
    p = int(work["num_parts"])
    n, e = shape.num_nodes, shape.num_edges
    if baseline_bytes is None:
        baseline_bytes = BASELINE_BYTES["partition" if mode == "partition" else "train"]
    base = np.full(p if mode != "partition" else 1, float(baseline_bytes))
    per_edge, per_node = LOADING[shape.layout]
    graph = shape.graph_bytes
    phases, step_bytes = {}, {}  # step_bytes: each training phase's per-step tensors
    local_edges = work["inner_edges"] + work["boundary_edges"]
    halo = np.asarray(work["recv_rows"]).sum(1)
    mapped = shape.layout == "converted"
    # rows of the whole graph a rank touches to build its part: its nodes' CSR rows, its own
    # and its halo nodes' features and labels
    own_rows = (8.0 * work["nodes"] + 8.0 * local_edges
                + (4.0 * shape.num_features + 11.0) * (work["nodes"] + halo))
    if mode == "partition" or p == 1:
        loading = base + (0.0 if mapped else graph + per_edge * e + per_node * n)
        touched = graph  # the partitioner or the single rank reads every row
    else:  # the host's lowest rank loads and writes a mapped copy; every rank maps it
        loading = base.copy()
        if not mapped:
            loading[0] += graph + per_edge * e + per_node * n
        touched = own_rows.copy()
    if mode in ("in-memory", "partition"):
        phases["load"] = loading
        if partition_method is not None:
            pe, pn, fixed = partitioning_cost(partition_method)
            part = base + (touched if mode == "in-memory" else graph) + 8.0 * n
            part[0] = base[0] + graph + 8.0 * n + pe * e + pn * n + fixed
            phases["partition"] = part
    if mode == "partition":
        largest = float(np.max(local_edges * 8 + work["nodes"] * (4.0 * shape.num_features
                                                                   + 32)))
        phases["store"] = base + graph + 8.0 * n + 2 * largest
    else:
        resident = touched if mode == "in-memory" else 0.0
        phases["setup"] = (base + resident + SETUP_BYTES_PER_EDGE * local_edges
                           + BLOCK_BYTES_PER_EDGE * local_edges
                           + work["nodes"] * (4.0 * shape.num_features + 11.0)
                           + VIEW_BYTES_PER_NODE * (work["nodes"] + halo))
        train, evaluate, train_step, eval_step = _training_bytes(shape, spec, work)
        phases["train"] = base + train
        phases["eval"] = base + evaluate
        step_bytes.update(train=train_step, eval=eval_step)
    names = list(phases)
    stacked = np.vstack([np.broadcast_to(phases[k], (len(base),)) for k in names])
    steps = np.vstack([np.broadcast_to(step_bytes.get(k, 0.0), (len(base),)) for k in names])
    per_rank = stacked.max(axis=0)

    def retained(growth: float) -> np.ndarray:
        return (stacked + growth * steps).max(axis=0)
    expected, bound = retained_growth(spec.layers, spec.dropout)
    rank = int(np.argmax(per_rank))
    return {"phases": {k: np.asarray(phases[k], dtype=np.float64) for k in names},
            "per_rank_peak": per_rank,
            "per_rank_phase": [names[i] for i in np.argmax(stacked, axis=0)],
            "per_rank_peak_retained": retained(expected),
            "per_rank_peak_retained_bound": retained(bound),
            "peak_bytes": float(per_rank[rank]), "peak_rank": rank,
            "peak_phase": names[int(np.argmax(stacked[:, rank]))], "mode": mode}


def format_plan(plan: dict) -> str:
    """Text table: each phase's largest rank, and the line naming the plan's peak."""
    lines = [f"{'phase':<10} {'largest rank':>12} {'bytes':>12}"]
    for name, values in plan["phases"].items():
        values = np.asarray(values)
        lines.append(f"{name:<10} {int(np.argmax(values)):>12} {format_bytes(values.max()):>12}")
    lines.append(f"peak: rank {plan['peak_rank']} in phase {plan['peak_phase']}, "
                 f"{format_bytes(plan['peak_bytes'])}")
    retained = np.asarray(plan.get("per_rank_peak_retained", plan["per_rank_peak"]))
    bound = np.asarray(plan.get("per_rank_peak_retained_bound", retained))
    if plan["phases"].keys() & {"train", "eval"}:
        lines.append(f"with freed memory kept for reuse (faster steps, `gnnscale train`'s "
                     f"choice when it fits): {format_bytes(retained.max())} on rank "
                     f"{int(np.argmax(retained))} (up to {format_bytes(bound.max())}), "
                     f"{format_bytes(retained.sum())} over all ranks (up to "
                     f"{format_bytes(bound.sum())}; lean: "
                     f"{format_bytes(np.asarray(plan['per_rank_peak']).sum())})")
    return "\n".join(lines)


def format_bytes(num: float) -> str:
    """``1.23 GiB`` or ``456 MiB``."""
    return f"{num / 2**30:.2f} GiB" if num >= 2**30 else f"{num / 2**20:.0f} MiB"
