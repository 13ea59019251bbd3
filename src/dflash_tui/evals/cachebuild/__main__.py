"""`python -m dflash_tui.evals.cachebuild`: DESIGN §4.10's command for the cache builder."""

import sys

from dflash_tui.shipped.cachebuild.cli import main

if __name__ == "__main__":
    sys.exit(main())
