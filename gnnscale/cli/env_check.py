"""Refuse to train when the ranks of a job run different software.

Ranks on different hosts may pick up different environments (a stale virtualenv on one node, a
module loaded on another). Mixed versions of torch or gnnscale can compute subtly different
results or pickle incompatible metadata, so the job stops at start-up with one line naming the
package, the versions and the ranks, instead of failing later with a confusing error.
"""

from __future__ import annotations

import platform

from ..errors import UsageError

CHECKED_PACKAGES = ("gnnscale", "torch", "numpy", "mpi4py")


def package_versions() -> dict:
    """This process's Python and package versions (``"absent"`` for a package not installed)."""
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for name in CHECKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def check_same_versions(comm) -> None:
    """Collective: raise :class:`UsageError` (the same message on every rank) if any rank's
    versions differ from rank 0's."""
    everyone = comm.allgather_object(package_versions())
    reference = everyone[0]
    for name, expected in reference.items():
        odd = [rank for rank, versions in enumerate(everyone)
               if versions.get(name) != expected]
        if odd:
            found = everyone[odd[0]].get(name)
            others = f" (and {len(odd) - 1} more ranks)" if len(odd) > 1 else ""
            raise UsageError(f"package versions differ across ranks: {name} {expected} on rank 0 "
                             f"but {found} on rank {odd[0]}{others}; install the same "
                             f"environment on every host")
