"""Command-line interface (``gnnscale train | partition | tune | info``)."""

#: exit code of a command stopped by Ctrl-C (128 + SIGINT, as a shell reports it)
EXIT_INTERRUPTED = 130
