"""Error type raised by :mod:`partitioning` on bad input.

``PartitionError`` subclasses :class:`ValueError` so callers that do not know this package can
still catch it. Messages are one line, name the problem and the offending value.
``partitioning`` never imports ``gnnscale``; entry points in ``gnnscale`` translate this into
their own exit-code-2 error handling.
"""


class PartitionError(ValueError):
    """Bad partitioning input: a malformed graph, an impossible parameter, or a damaged store."""
