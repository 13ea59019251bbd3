"""The field's table across suites: checkpoint x dataset, "speedup / tau" cells.

DFlash's README and the papers that compare with it print one row per drafter and one
column per dataset (GSM8K, MATH-500, HumanEval, MBPP, MT-Bench), each cell the served
speedup and tau at temperature 0. Here each column is a suite, named by the dataset its
cache was built from (docs/evals.md "The protocol"), each cell a checkpoint's newest served
bench on it. A column head says when its protocol is not z-lab's, or when its benches ran
under different protocols, so no cell passes for a number it is not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dflash_tui.evals.results.protocol import column_label, protocol_of
from dflash_tui.evals.results.served.beside import ServedBeside
from dflash_tui.evals.results.served.field_table import speedup_tau_cell


def dataset_rows(
    columns: Sequence[tuple[str, Mapping[str, ServedBeside]]], order: Sequence[str] = ()
) -> list[list[str]]:
    """Header row, then one row per checkpoint with a bench on any column, in `order` (the
    boards' rows) first. `columns`: (suite, checkpoint -> its newest served bench on the
    suite); suites with no bench are left out."""
    shown = [(suite, beside) for suite, beside in columns if beside]
    benched = {c for _, beside in shown for c in beside}
    checkpoints = [c for c in dict.fromkeys(order) if c in benched]
    for _, beside in shown:
        checkpoints += [c for c in beside if c not in checkpoints]
    head = ["checkpoint"]
    head += [
        column_label(s, [protocol_of(b.settings) for b in beside.values()]) for s, beside in shown
    ]
    rows = [head]
    for name in checkpoints:
        cells = []
        for _, beside in shown:
            b = beside.get(name)
            cells.append(speedup_tau_cell(b.speedup, b.tau) if b is not None else "-")
        rows.append([name, *cells])
    return rows
