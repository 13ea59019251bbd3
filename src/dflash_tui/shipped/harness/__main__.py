"""Entry point for ``python -m dflash_tui.shipped.harness``.

An uploaded copy runs as a directory instead, through the bundle's own
``__main__.py`` (``shipped/bundle_main.py``), which gives it a package first.
"""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
