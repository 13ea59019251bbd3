"""The cache builder's command, `python -m dflash_tui.evals.cachebuild` (docs/evals.md "Building a cache").

The builder lives in `shipped/cachebuild/` with the other programs that run on GPU
hosts; this package keeps the documented command working.
"""
