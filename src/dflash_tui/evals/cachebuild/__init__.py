"""The name DESIGN §4.10 gives the cache builder (`python -m dflash_tui.evals.cachebuild`).

The builder lives in `shipped/cachebuild/` with the other programs that run on GPU
hosts; this package keeps the documented command working.
"""
