"""The host engine: a relay between SSH hosts through this machine (walk, check, small files by shell, streamed ranges, worker processes for large files) and the direct host-to-host mode."""
