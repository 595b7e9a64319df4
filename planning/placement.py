"""Ranks per host and threads per rank as a choice: one rank per host, per socket or per core.

A job of ``cores`` cores on hosts of ``host_cores`` cores (``sockets`` sockets each) can run one
rank per host with a thread per core, one rank per socket, or one rank per core. Each choice is
a different number of ranks, so a different partition (its own part count, its own halo): fewer,
wider ranks exchange less (a host's ranks no longer fetch the same remote rows separately, and
rows of one host never cross a link) but compute with more threads each, which the time model
charges by the thread counts the constants were calibrated for (``CostModel.constants_for``).
A job smaller than a host uses ``cores`` cores of one host.
"""

from __future__ import annotations

from dataclasses import dataclass

from partitioning.errors import PartitionError

from .cost_model import Cluster, Network

__all__ = ["PLACEMENTS", "Placement", "placements"]

PLACEMENTS = ("host", "socket", "core")


@dataclass(frozen=True)
class Placement:
    """One way to run a job: ``ranks`` ranks, ``ranks_per_host`` to a host, each with
    ``threads_per_rank`` threads, on ``hosts`` hosts of ``host_cores`` cores."""

    name: str
    ranks: int
    ranks_per_host: int
    threads_per_rank: int
    hosts: int
    host_cores: int

    @property
    def label(self) -> str:
        """e.g. ``per host (8 x 32)``: ranks x threads per rank."""
        return f"per {self.name} ({self.ranks} x {self.threads_per_rank})"

    def cluster(self, network: Network | None) -> Cluster:
        """The :class:`Cluster` the time model predicts this placement on."""
        return Cluster(ranks_per_host=self.ranks_per_host, cores_per_rank=self.threads_per_rank,
                       network=network, host_cores=self.host_cores)


def placements(cores: int, host_cores: int, sockets: int = 1,
               names=PLACEMENTS) -> list[Placement]:
    """The placements ``names`` of a job of ``cores`` cores, distinct in their rank counts (the
    first name keeps a count two names share, e.g. ``host`` and ``socket`` on one socket's
    worth of cores). Bad sizes: PartitionError, one line naming the value."""
    for label, value in (("cores", cores), ("host cores", host_cores), ("sockets", sockets)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PartitionError(f"placement: {label} must be a positive integer, got {value!r}")
    if host_cores % sockets:
        raise PartitionError(f"placement: {host_cores} cores per host do not split into "
                             f"{sockets} sockets")
    if cores > host_cores and cores % host_cores:
        raise PartitionError(f"placement: {cores} cores are not whole hosts of {host_cores} "
                             f"cores")
    unknown = [n for n in names if n not in PLACEMENTS]
    if unknown or not names:
        raise PartitionError(f"placement: unknown placement {unknown[0] if unknown else ''!r}; "
                             f"choose from {', '.join(PLACEMENTS)}")
    on_host = min(cores, host_cores)
    hosts = cores // on_host
    threads = {"host": on_host, "socket": min(host_cores // sockets, on_host), "core": 1}
    out, seen = [], set()
    for name in names:
        per_host = on_host // threads[name]
        if per_host not in seen:
            seen.add(per_host)
            out.append(Placement(name, hosts * per_host, per_host, threads[name], hosts,
                                 host_cores))
    return out
