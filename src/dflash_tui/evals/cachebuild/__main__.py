"""`python -m dflash_tui.evals.cachebuild`: the cache builder's command (docs/evals.md "Building a cache")."""

import sys

from dflash_tui.shipped.cachebuild.cli import main

if __name__ == "__main__":
    sys.exit(main())
