"""The hosts.toml of the leaderboard tests: one host, the baseline, one suite."""

from __future__ import annotations

# results and state next to hosts.toml; the baseline zlab and suite coding10 on host gpu
BOARD_CONFIG = """
[console]
results_dir = "results"
state_dir = "state"
[hosts.gpu]
address = "127.0.0.1"
[[checkpoints]]
name = "zlab"
host = "gpu"
path = "/models/zlab"
baseline = true
[[suites]]
name = "coding10"
host = "gpu"
cache = "/eval/coding10"
"""

# a training run whose evals the board groups and plots
RUN1 = """
[[runs]]
name = "run1"
host = "gpu"
log = "train.log"
"""
