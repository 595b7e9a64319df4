"""Cases shared by the exactness driver (under mpirun) and the one-process PyG reference."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from gnnscale.data import generate_sbm, load_dataset
from gnnscale.nn import GNN

STEPS = 5
LR, WEIGHT_DECAY, HIDDEN, SEED = 0.01, 5e-4, 16, 3
DATASETS = ("cora", "isolated")
# Edge cuts; the vertex cuts have their own exactness test in tests/vertex_cut.
PARTITIONERS = ("random", "block", "metis", "kaminpar", "ldg", "fennel")
# Every rank partitions on its own, so each partitioner must give the same parts on every rank:
# KaMinPar does for a seed on one thread.
PARTITIONER_PARAMS = {"kaminpar": {"threads": 1}}
MODELS = ("gcn", "sage")


def load_case_dataset(name: str, datasets_root):
    """Cora from the shared folder, or a generated graph where 15% of the nodes are isolated."""
    if name == "cora":
        return load_dataset("cora", root=str(datasets_root))
    return generate_sbm(num_nodes=400, num_classes=4, avg_degree=6.0, num_features=24,
                        train_per_class=20, num_val=80, num_test=120, seed=11,
                        isolated_fraction=0.15)


def initial_model(model: str, data) -> GNN:
    """The model every rank (and the reference) starts from: same seed, same weights."""
    torch.manual_seed(SEED)
    return GNN(model, data.num_features, HIDDEN, data.num_classes, num_layers=2, dropout=0.0)


def case_key(dataset: str, partitioner: str, model: str) -> str:
    return f"{dataset}-{partitioner}-{model}"


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max |actual - expected| / max |expected|: error relative to the values' scale."""
    scale = max(float(np.abs(expected).max()), 1e-12)
    return float(np.abs(actual - expected).max()) / scale


def pyg_reference(model_name: str, data, steps: int = STEPS) -> tuple[np.ndarray, np.ndarray]:
    """Train PyG's own layers on the whole graph from gnnscale's initial weights for ``steps``
    Adam steps; return (losses, logits after the last step). (PyG is imported here: the
    ranks under mpirun never need it, and it takes each of them seconds to import.)"""
    from torch_geometric.nn import GCNConv, SAGEConv

    ours = initial_model(model_name, data)
    convs = []
    for layer in ours.layers:
        if model_name == "gcn":
            conv = GCNConv(layer.in_dim, layer.out_dim)
            conv.lin.weight.data.copy_(layer.lin.weight)
            conv.bias.data.copy_(layer.bias)
        else:
            conv = SAGEConv(layer.in_dim, layer.out_dim)
            conv.lin_l.weight.data.copy_(layer.lin_l.weight)
            conv.lin_l.bias.data.copy_(layer.lin_l.bias)
            conv.lin_r.weight.data.copy_(layer.lin_r.weight)
        convs.append(conv)
    pyg = data.to_pyg()

    def forward():
        return convs[1](F.relu(convs[0](pyg.x, pyg.edge_index)), pyg.edge_index)

    optimizer = torch.optim.Adam(torch.nn.ModuleList(convs).parameters(), lr=LR,
                                 weight_decay=WEIGHT_DECAY)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(forward()[pyg.train_mask], pyg.y[pyg.train_mask])
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    with torch.no_grad():
        return np.asarray(losses), forward().numpy()


# Both sides compute in float32 and sum in different orders (rows split across ranks, partial
# sums of vertex cuts, SAGE's two transforms in one GEMM); Adam's normalised step turns ~1e-7
# gradient differences into ~1e-5 weight differences within the 5 steps. A real fault (an edge
# lost or counted twice, a wrong normalisation) is off by 1e-3 or more.
TOLERANCE = 5e-5


def compare_with_references(saved, expected: dict,
                            tolerance: float = TOLERANCE) -> tuple[list[str], list]:
    """Compare saved ``{key}/losses`` and ``{key}/logits`` with ``expected[key]`` = (losses,
    logits) for every key; (one line per key outside ``tolerance``, [(largest relative error,
    key)] for every key)."""
    failures, errors = [], []
    for key, (ref_losses, ref_logits) in expected.items():
        loss_err = relative_error(saved[f"{key}/losses"], ref_losses)
        logit_err = relative_error(saved[f"{key}/logits"], ref_logits)
        errors.append((max(loss_err, logit_err), key))
        if not (loss_err <= tolerance and logit_err <= tolerance):
            failures.append(f"{key}: loss err {loss_err:.2e}, logit err {logit_err:.2e}")
    return failures, errors


def exactness_failures(saved, references: dict, cases,
                       tolerance: float = TOLERANCE) -> list[str]:
    """:func:`compare_with_references` for ``(dataset, partitioner, model)`` cases against
    ``references[(dataset, model)]``; one line per case outside ``tolerance``."""
    expected = {case_key(dataset, partitioner, model): references[(dataset, model)]
                for dataset, partitioner, model in cases}
    return compare_with_references(saved, expected, tolerance)[0]


def train_and_gather(trainer, steps: int = STEPS) -> tuple[np.ndarray, np.ndarray | None]:
    """``steps`` training steps (collective): (the global loss after each, logits of every node
    in global order on rank 0, None elsewhere)."""
    from gnnscale.engine import gather_predictions

    losses = [trainer.evaluate(trainer.train_step()[0])[0] for _ in range(steps)]
    gathered = gather_predictions(trainer)
    return np.asarray(losses), gathered[0] if gathered else None


def partitioned_problems(datasets, partitioners, load, datasets_root, comm, seed: int = SEED):
    """``(dataset, partitioner, data, this rank's LocalProblem)`` for every dataset (read by
    ``load(name, datasets_root)``) and edge-cut partitioner, with its
    :data:`PARTITIONER_PARAMS` (collective; for drivers)."""
    from gnnscale.engine import LocalProblem
    from partitioning import make_partitioner

    for dataset in datasets:
        data = load(dataset, datasets_root)
        for partitioner in partitioners:
            node_parts = make_partitioner(partitioner, num_parts=comm.size, seed=seed,
                                          **PARTITIONER_PARAMS.get(partitioner, {})
                                          ).fit(data).node_parts
            yield dataset, partitioner, data, LocalProblem.from_graph_data(data, node_parts, comm)


def save_results(comm, out_path, results: dict) -> None:
    """Rank 0 writes a driver's ``results`` to ``out_path`` (.npz)."""
    if comm.rank == 0:
        np.savez(out_path, **results)


def driver_main(run_cases) -> None:
    """A driver's main, ``DATASETS_ROOT OUT_DIR SIZES`` under ``mpirun -n max(SIZES)``: for each
    rank count of ``SIZES`` (comma-separated) the first that many ranks get a communicator of
    their own (``comm.split``) and run ``run_cases(sub, datasets_root) -> results`` on it while
    the others wait; the sub-communicator's rank 0 saves ``OUT_DIR/size-N.npz``. One launch
    covers every rank count."""
    from gnnscale.comm import init

    datasets_root, out_dir = sys.argv[1], Path(sys.argv[2])
    comm = init()
    for size in (int(s) for s in sys.argv[3].split(",")):
        inside = comm.rank < size
        sub = comm.split(0 if inside else 1)
        if inside:
            save_results(sub, out_dir / f"size-{size}.npz", run_cases(sub, datasets_root))
        comm.barrier()


#: the rank counts every exactness test covers, all in one launch (:func:`driver_main`)
SIZES = (1, 2, 3, 4)


def saved_by_size(driver, sizes=SIZES):
    """A module fixture ``saved``: ``{size: what driver saved}`` for every rank count of
    ``sizes``, from one launch."""
    import pytest

    @pytest.fixture(scope="module")
    def saved(datasets_root, tmp_path_factory):
        return run_driver(driver, sizes, datasets_root, tmp_path_factory.mktemp(driver.stem))
    return saved


def run_driver(driver, sizes, datasets_root, tmp_path, timeout: float = 900) -> dict:
    """Run ``driver`` (:func:`driver_main`) once under mpirun for every rank count of
    ``sizes``; ``{size: what it saved}``."""
    from mpi_launch import run_python_mpi

    result = run_python_mpi(max(sizes), driver, [str(datasets_root), str(tmp_path),
                                                 ",".join(map(str, sizes))], timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return {size: np.load(tmp_path / f"size-{size}.npz") for size in sizes}
