"""The virtual cluster for cross-host tests: two hosts, made once per session where namespaces
can be made (root), else every test here is skipped with the reason."""

from __future__ import annotations

import pytest

from gnnscale.testing.cluster import VirtualCluster, unavailable_reason


@pytest.fixture(scope="module")
def cluster():
    """Hosts node0 and node1, unshaped links; removed after each test file (made in a second)."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with VirtualCluster(hosts=2) as made:
        yield made
