"""Settings of the guard: collective timeout, checked mode, polling intervals.

The timeout and checked mode come from the caller, else from the environment
(:data:`ENV_TIMEOUT`, :data:`ENV_CHECK`), else the defaults here.
"""

from __future__ import annotations

import os

from ...errors import CommError

DEFAULT_TIMEOUT_S = 300.0
ENV_TIMEOUT = "GNNSCALE_COMM_TIMEOUT"
ENV_CHECK = "GNNSCALE_COMM_CHECK"
FAILURE_GRACE_S = 1.5  # how long a failing rank waits for peers to read its notice
BOARD_POLL_S = 0.1
SPIN_S = float(os.environ.get("GNNSCALE_SPIN_US", "100")) * 1e-6  # busy-poll first
YIELD_S = 1e-3  # then poll with sched_yield, then sleep
MAX_SIGNED_COUNTS = 64  # alltoallv counts are compared in full up to this many ranks


def resolve_timeout(timeout: float | None) -> float:
    """The timeout to use: the argument, else ``$GNNSCALE_COMM_TIMEOUT``, else the default."""
    if timeout is None:
        raw = os.environ.get(ENV_TIMEOUT, "")
        try:
            timeout = float(raw) if raw else DEFAULT_TIMEOUT_S
        except ValueError:
            raise CommError(f"{ENV_TIMEOUT}={raw!r} is not a number of seconds") from None
    if not timeout > 0:
        raise CommError(f"collective timeout must be positive seconds, got {timeout}")
    return float(timeout)


def resolve_check(check: bool | None) -> bool:
    """Checked mode: the argument, else ``$GNNSCALE_COMM_CHECK`` (0/1), else on."""
    if check is None:
        return os.environ.get(ENV_CHECK, "1").strip().lower() not in ("0", "false", "no", "off")
    return bool(check)

