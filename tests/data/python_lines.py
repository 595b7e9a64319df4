"""Counting the Python lines a call runs: the check that a generator is vectorised."""

import sys


def lines_run(function, *args, **kwargs) -> int:
    """Python lines executed while ``function(*args, **kwargs)`` runs (its callees' included).

    A generator whose count does not grow with the graph does no Python work per node or edge.
    """
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        count += event == "line"
        return trace

    sys.settrace(trace)
    try:
        function(*args, **kwargs)
    finally:
        sys.settrace(None)
    return count
