"""Finding what to evaluate: checkpoint targets and auto-eval sweeps."""
