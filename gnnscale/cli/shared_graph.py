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

from .common import AgreedError, agreed_failure, user_error_types


def _converted_folder(dataset, data_root) -> Path | None:
    from ..data.converted import is_converted

    for candidate in (Path(dataset).expanduser(), Path(data_root) / dataset):
        try:
            if candidate.is_dir() and is_converted(candidate):
                return candidate
        except OSError:
            return None
    return None


def load_shared_graph(comm, dataset, data_root, load):
    """The dataset ``load()`` returns (``dataset``: its name or path, read under
    ``data_root``), as a ``GraphData`` that every rank of ``comm`` maps.

    Collective. One process (``comm.size == 1``), and every rank where ``dataset`` is a
    converted folder, calls ``load()`` itself; elsewhere the lowest rank of each host does.
    """
    from ..data.converted import open_converted, write_converted

    if comm.size == 1 or _converted_folder(dataset, data_root) is not None:
        with agreed_failure(comm):  # a converted folder: every rank maps it
            return load()
    hosts = comm.allgather_object(socket.gethostname())
    leader = hosts.index(hosts[comm.rank])  # lowest rank on this host
    outcome = None  # leader: the temporary folder, or the error message
    if comm.rank == leader:
        try:
            data = load()
            tmp = Path(tempfile.mkdtemp(prefix="gnnscale-graph-"))
            try:
                write_converted(data, tmp / "graph", source=str(dataset))
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            del data
            outcome = ("ok", str(tmp))
        except user_error_types() as exc:
            outcome = ("error", str(exc))
        except MemoryError:
            outcome = ("error", f"not enough memory to load {dataset} on {hosts[leader]}")
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
