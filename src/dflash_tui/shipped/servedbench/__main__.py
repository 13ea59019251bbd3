"""Entry point for ``python -m dflash_tui.shipped.servedbench`` (an uploaded copy runs as a
directory through the bundle's own ``__main__.py``, ``shipped/bundle_main.py``)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
