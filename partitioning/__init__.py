"""Graph partitioning for full-batch distributed GNN training.

Depends on numpy, scipy, pymetis, kaminpar and numba only (no torch, no MPI, never
``gnnscale``)::

    from partitioning import make_partitioner, part_summary
    partition = make_partitioner("metis", num_parts=8, seed=0).fit(graph)
    print(format_summary_table(part_summary(graph, partition, feature_bytes_per_row=4 * 128)))

``PARTITIONERS`` maps registry names to classes; see each class for its parameters:
edge cut ``random``, ``block``, ``metis``, ``kaminpar``, ``ldg``, ``fennel``; vertex cut
``libra``, ``hdrf``.

Submodules beyond this namespace: :mod:`partitioning.store` (on-disk partition store: write,
read one part, validate), :mod:`partitioning.local_view` (what one part holds). The time and
memory models that read partitions live in the :mod:`planning` package.
"""

from .base import Partition, Partitioner
from .edge_cut import (BlockPartitioner, FennelPartitioner, KaMinParPartitioner, LDGPartitioner,
                       MetisPartitioner, RandomPartitioner)
from .errors import PartitionError
from .graph import CSRGraph, as_csr_graph
from .vertex_cut import HDRFPartitioner, LibraPartitioner
from .metrics import (edge_cut, format_summary_table, halo_counts, part_summary,
                      replication_factor)

PARTITIONERS: dict[str, type[Partitioner]] = {
    cls.name: cls for cls in (RandomPartitioner, BlockPartitioner, MetisPartitioner,
                              KaMinParPartitioner, LDGPartitioner, FennelPartitioner,
                              LibraPartitioner, HDRFPartitioner)
}


def make_partitioner(name: str, **kwargs) -> Partitioner:
    """Instantiate the partitioner registered as ``name`` with keyword parameters.

    Raises :class:`PartitionError` for an unknown name, listing the registered ones.
    """
    try:
        cls = PARTITIONERS[name]
    except (KeyError, TypeError):
        raise PartitionError(
            f"unknown partitioner {name!r}; choose one of: {', '.join(sorted(PARTITIONERS))}"
        ) from None
    return cls(**kwargs)


__all__ = [
    "CSRGraph", "as_csr_graph", "Partition", "Partitioner", "PartitionError", "PARTITIONERS",
    "make_partitioner", "edge_cut", "replication_factor", "halo_counts", "part_summary",
    "format_summary_table",
]
