"""Give every rank of a job read access to the whole graph without every rank holding it.

A converted graph folder (``gnnscale convert``) is opened memory-mapped by every rank: pages
are shared through the page cache and a rank reads only the rows of its part. Any other source
is loaded once per host, by the host's lowest rank, and written as a converted graph into a
temporary folder that the host's ranks then map; the folder is deleted as soon as every rank
has it open (the mappings stay valid), so nothing is left behind.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from pathlib import Path

from .arguments import load_graph, resolve_data_root
from .common import AgreedError, agreed_failure, user_error_types


def _converted_folder(args) -> Path | None:
    from ..data.converted import is_converted

    root = Path(resolve_data_root(args))
    for candidate in (Path(args.dataset).expanduser(), root / args.dataset):
        try:
            if candidate.is_dir() and is_converted(candidate):
                return candidate
        except OSError:
            return None
    return None


def load_shared_graph(args, comm):
    """The dataset the arguments name, as a ``GraphData`` that every rank of ``comm`` maps.

    Collective. One process (``comm.size == 1``) loads the dataset directly.
    """
    from ..data.converted import open_converted, write_converted

    if comm.size == 1:
        with agreed_failure(comm):
            return load_graph(args)
    if _converted_folder(args) is not None:  # every rank maps it (options checked as usual)
        with agreed_failure(comm):
            return load_graph(args)
    hosts = comm.allgather_object(socket.gethostname())
    leader = hosts.index(hosts[comm.rank])  # lowest rank on this host
    outcome = None  # leader: the temporary folder, or the error message
    if comm.rank == leader:
        try:
            data = load_graph(args)
            tmp = Path(tempfile.mkdtemp(prefix="gnnscale-graph-"))
            try:
                write_converted(data, tmp / "graph", source=str(args.dataset))
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            del data
            outcome = ("ok", str(tmp))
        except user_error_types() as exc:
            outcome = ("error", str(exc))
        except MemoryError:
            outcome = ("error", f"not enough memory to load {args.dataset} on {hosts[leader]}")
    outcomes = comm.allgather_object(outcome)
    failed = [o[1] for o in outcomes if o is not None and o[0] == "error"]
    if failed:
        raise AgreedError(failed[0])
    tmp = Path(outcomes[leader][1])
    try:
        with agreed_failure(comm):
            data = open_converted(tmp / "graph")
        comm.barrier()  # every rank on every host has mapped its host's copy
    finally:
        if comm.rank == leader:
            shutil.rmtree(tmp, ignore_errors=True)
    return data
