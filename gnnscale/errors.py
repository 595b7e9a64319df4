"""User-facing error types.

Anything raised as a :class:`GnnscaleError` is a problem with the user's input or environment:
entry points print it as one line (``gnnscale: error: ...``) and exit with code 2, with no
traceback. Everything else is a bug or a crash and aborts the whole job with a traceback.
"""


class GnnscaleError(Exception):
    """Base class for errors caused by bad input, files or environment (exit code 2)."""


class DataError(GnnscaleError):
    """A dataset file or graph array is missing, malformed or inconsistent."""


class UsageError(GnnscaleError):
    """A command-line option or API argument has an impossible value."""


class CommError(GnnscaleError):
    """A collective call failed or was used inconsistently across ranks."""
