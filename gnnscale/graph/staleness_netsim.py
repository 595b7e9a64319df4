"""A *simulated* slow network for the halo exchange (benchmarks only; not a real network).

:class:`SlowNetwork` wraps a communicator: an ``alltoallv_async`` posted at time ``t`` with ``B``
bytes leaving this rank completes no earlier than ``t + latency_s + B / bandwidth_bps``; its
``wait()`` sleeps for what is left. Everything else is delegated untouched. The sleep is charged
only where a rank waits, so a policy that completes an exchange an epoch after posting it
(pipelined, delayed) hides the simulated delay the way it would hide a real one, while exact
waits for it within the layer. A halo plan uses it after
``plan.configure(simulate_network=(latency_s, bytes_per_s))``.
"""

from __future__ import annotations

import time

from ..comm import Work


class SlowNetwork:
    """Communicator wrapper adding latency + bytes/bandwidth to every ``alltoallv_async``."""

    def __init__(self, comm, latency_s: float = 1e-3, bandwidth_bps: float = 1.25e8):
        if latency_s < 0 or bandwidth_bps <= 0:
            raise ValueError(f"need latency_s >= 0 and bandwidth_bps > 0, got {latency_s}, "
                             f"{bandwidth_bps}")
        self.inner, self.latency_s, self.bandwidth_bps = comm, latency_s, bandwidth_bps

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def alltoallv_async(self, send, send_counts, recv_counts) -> Work:
        ready_at = (time.perf_counter() + self.latency_s
                    + send.numel() * send.element_size() / self.bandwidth_bps)
        work = self.inner.alltoallv_async(send, send_counts, recv_counts)

        def finish():
            result = work.wait()
            left = ready_at - time.perf_counter()
            if left > 0:
                time.sleep(left)
            return result

        return Work(finish, test_fn=work.test)  # test() drives the real exchange's progress
