"""Measure what serving gets: a real engine with a drafter, on a suite's own prompts.

The program shipped to GPU hosts for `dflash-tui bench` (docs/evals.md "Served
bench jobs"). It starts the host's engine (vLLM or SGLang) serving the suite's
target with the checkpoint as its DFlash drafter on a free loopback port, waits
for `/health` with a deadline, sends every cached prompt (its token ids, greedy,
`max_tokens` = that sample's continuation length), brackets each task with
`/metrics` snapshots (served tau = 1 + d(accepted) / d(drafts), per-position
rates), then serves the target alone on the same prompts for the baseline
throughput, and writes one ``dflash-served/1`` JSON file.

The engine runs in the job's process group and is stopped on every path (done,
failed, SIGTERM from `dflash-tui cancel`); `dflash-tui cancel` kills the whole
group anyway.

Standard library only: it runs with the host's python, next to an engine that
brings its own. Stdout carries JSON events (``start``, ``phase``, ``progress``,
``error``, ``done``); exit codes: 0 ok, 1 the run failed, 2 bad input.
"""

FORMAT = "dflash-served/1"

__all__ = ["FORMAT"]
