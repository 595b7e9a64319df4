import sys

from gnnscale.cli.main import main

sys.exit(main())
