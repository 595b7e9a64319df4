"""Under mpirun in the DGL environment: train gnnscale on a graph read from a DGL file.

Usage: mpirun -n P python dglenv_train_driver.py GRAPH.bin OUT.npz

Every rank reads the DGL graph (``dgl.load_graphs``), converts it with ``from_dgl``, partitions
it with METIS, builds the same initial GCN and SAGE models (seeded) and trains each for a few
Adam steps without dropout; rank 0 saves the initial weights, global losses and gathered
logits.
"""

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))

from dglenv_reference import LR, STEPS, WEIGHT_DECAY  # noqa: E402

from gnnscale.comm import init  # noqa: E402
from gnnscale.data import from_dgl  # noqa: E402
from gnnscale.engine import LocalProblem, Trainer  # noqa: E402
from gnnscale.nn import GNN  # noqa: E402
from partitioning import make_partitioner  # noqa: E402


def main() -> None:
    import dgl

    graph_path, out_path = sys.argv[1], sys.argv[2]
    comm = init()
    graphs, _ = dgl.load_graphs(graph_path)
    data = from_dgl(graphs[0], name="from-dgl")
    node_parts = make_partitioner("metis", num_parts=comm.size, seed=0).fit(data).node_parts
    problem = LocalProblem.from_graph_data(data, node_parts, comm)
    results = {"num_owned": np.asarray(comm.allgather_object(len(problem.graph.owned_nodes)))}
    for model_name in ("gcn", "sage"):
        torch.manual_seed(0)
        model = GNN(model_name, data.num_features, 16, data.num_classes, dropout=0.0)
        for name, value in model.state_dict().items():
            results[f"{model_name}/init/{name}"] = value.numpy().copy()
        trainer = Trainer(model, problem, comm, lr=LR, weight_decay=WEIGHT_DECAY, seed=0)
        losses = [trainer.evaluate(trainer.train_step()[0])[0] for _ in range(STEPS)]
        logits = trainer.predict().numpy()
        full = np.zeros((data.num_nodes, logits.shape[1]), dtype=np.float32)
        for owned, part in comm.allgather_object((problem.graph.owned_nodes, logits)):
            full[owned] = part
        results[f"{model_name}/losses"] = np.asarray(losses)
        results[f"{model_name}/logits"] = full
    if comm.rank == 0:
        np.savez(out_path, **results)
    print(f"rank {comm.rank} of {comm.size} done", flush=True)


if __name__ == "__main__":
    main()
