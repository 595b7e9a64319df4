"""User-facing error types.

Anything raised as a :class:`GnnscaleError` is a problem with the user's input or environment:
entry points print it as one line (``gnnscale: error: ...``) and exit with code 2, with no
traceback. Everything else is a bug or a crash and aborts the whole job with a traceback.
"""


class GnnscaleError(Exception):
    """Base class for errors caused by bad input, files or environment (exit code 2)."""


class DataError(GnnscaleError):
    """A dataset file or graph array is missing, malformed or inconsistent."""


class DatasetNotFoundError(DataError):
    """A named dataset is not under the data root. ``where`` says what was looked for and
    ``download`` how to download it (None for a name that cannot be downloaded); without it
    the message says how to point Python at the data (entry points say it their own way)."""

    def __init__(self, where: str, download: str | None = None):
        super().__init__(f"{where}; "
                         f"{download or 'pass root= to load_dataset or set GNNSCALE_DATA_ROOT'}")
        self.where, self.download = where, download


class UsageError(GnnscaleError):
    """A command-line option or API argument has an impossible value."""


class CommError(GnnscaleError):
    """A collective call failed or was used inconsistently across ranks."""
