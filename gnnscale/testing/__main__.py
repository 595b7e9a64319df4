"""``python -m gnnscale.testing`` is ``python -m gnnscale.testing.cluster``."""

from .cluster_cli import main

if __name__ == "__main__":
    raise SystemExit(main())
