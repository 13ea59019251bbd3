"""Skip asyncssh's search for liboqs where the dynamic loader has none.

asyncssh looks for liboqs (post-quantum key exchange) with
`ctypes.util.find_library` when it is imported. On Linux that runs
`ldconfig -p`, then `gcc` and `ld`: about 50 ms of every `dflash-tui` start,
far more on a busy machine. Where the loader's cache (/etc/ld.so.cache) has no
liboqs and no library path is set in the environment, the search cannot find
it, so the answer is given without those processes. Anywhere else asyncssh
searches as it always does.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import os
from collections.abc import Iterator

LOADER_CACHE = "/etc/ld.so.cache"
_NAMES = ("oqs", "liboqs")


def _liboqs_may_be_installed() -> bool:
    if os.environ.get("LD_LIBRARY_PATH") or os.environ.get("LIBRARY_PATH"):
        return True
    try:
        with open(LOADER_CACHE, "rb") as f:
            return b"liboqs" in f.read()
    except OSError:
        return True


@contextlib.contextmanager
def without_absent_liboqs_search() -> Iterator[None]:
    """Inside: find_library answers None for liboqs when it cannot be installed."""
    if _liboqs_may_be_installed():
        yield
        return
    search = ctypes.util.find_library
    ctypes.util.find_library = lambda name: None if name in _NAMES else search(name)
    try:
        yield
    finally:
        ctypes.util.find_library = search
