"""``gnnscale <argv>`` where rank 1 pretends to have another torch version (for
test_rel_bad_inputs.py; the version check itself is gnnscale.cli.env_check)."""

import sys

from gnnscale.cli import env_check
from gnnscale.comm import env_rank

if env_rank() == 1:
    real = env_check.package_versions

    def package_versions():
        return {**real(), "torch": "0.0.0-other"}

    env_check.package_versions = package_versions

from gnnscale.cli.main import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
