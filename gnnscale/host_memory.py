"""How much memory a new allocation can get on this host (``MemAvailable``, capped by the
cgroup limit); ``GNNSCALE_MEMORY_AVAILABLE`` (bytes) overrides it, e.g. in tests."""

from __future__ import annotations

import os
from pathlib import Path

#: overrides what is seen as available (bytes): for tests, and to plan for a host with less
#: memory than this one
AVAILABLE_ENV = "GNNSCALE_MEMORY_AVAILABLE"


def available_bytes() -> int:
    """Memory a new allocation can get on this host: ``MemAvailable``, capped by the cgroup."""
    if os.environ.get(AVAILABLE_ENV):
        return int(float(os.environ[AVAILABLE_ENV]))
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        current = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            room = int(limit) - current
            available = room if available is None else min(available, room)
    except (OSError, ValueError):
        pass
    return available if available is not None else 1 << 62
