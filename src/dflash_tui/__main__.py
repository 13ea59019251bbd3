"""`python -m dflash_tui` runs the same CLI as the `dflash-tui` script."""

import sys

from dflash_tui.cli import main

sys.exit(main())
