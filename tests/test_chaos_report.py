"""The soak's alert counting (bench/chaos_report.py): conditions, not names.

A host alerted by a link cut and later by a reboot has two conditions, neither
repeated; an alert sent twice for one condition, or a reboot nobody was told
about, must count.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from chaos_report import alert_counts

DOWN, UP = "HOST DOWN\n| host eval |", "HOST RECOVERED\n| host eval |"
REBOOT = {"kind": "reboot", "host": "eval", "start": 100.0}


def test_a_link_cut_then_a_reboot_are_two_conditions_not_repeats() -> None:
    told = [(10.0, DOWN), (40.0, UP), (105.0, DOWN), (130.0, UP)]
    (row,) = alert_counts([REBOOT], told)
    assert (row["conditions"], row["recoveries"], row["missing"], row["repeated"]) == (2, 2, 0, 0)


def test_a_second_alert_for_one_condition_is_a_repeat() -> None:
    (row,) = alert_counts([REBOOT], [(105.0, DOWN), (110.0, DOWN), (130.0, UP)])
    assert (row["conditions"], row["missing"], row["repeated"]) == (1, 0, 1)


def test_a_reboot_with_no_alert_and_a_condition_never_recovered_are_missing() -> None:
    (quiet,) = alert_counts([REBOOT], [(10.0, DOWN), (40.0, UP)])
    assert quiet["missing"] == 1
    (stuck,) = alert_counts([REBOOT], [(105.0, DOWN)])
    assert (stuck["missing"], stuck["repeated"]) == (1, 0)


def test_a_reboot_while_already_alerted_needs_no_new_alert() -> None:
    (row,) = alert_counts([REBOOT], [(90.0, DOWN), (150.0, UP)])
    assert (row["conditions"], row["missing"], row["repeated"]) == (1, 0, 0)
