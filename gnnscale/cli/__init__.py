"""Command-line interface (``gnnscale train | partition | tune | info``)."""
