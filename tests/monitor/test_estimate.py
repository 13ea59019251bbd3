"""Acceptance-length estimates (docs/evals.md "Estimates"): closed forms and the calibration."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dflash_tui.monitor.tau import (
    calibrated_tau,
    estimate_tau,
    independence_tau,
    upper_bound_tau,
)


def test_independence_estimate_and_upper_bound_by_hand() -> None:
    a = [0.9, 0.5, 0.8]
    assert independence_tau(a) == pytest.approx(1 + 0.9 + 0.45 + 0.36)
    assert upper_bound_tau(a) == pytest.approx(1 + 0.9 + 0.5 + 0.5)
    assert independence_tau([1.0] * 15) == 16.0
    assert independence_tau([0.0] * 15) == 1.0
    with pytest.raises(ValueError, match=r"acc_per_position\[1\]"):
        independence_tau([0.5, 1.5])


@given(st.lists(st.floats(0, 1), min_size=1, max_size=15))
def test_the_estimate_never_exceeds_the_bound(a: list[float]) -> None:
    assert 1.0 <= independence_tau(a) <= upper_bound_tau(a) + 1e-12 <= len(a) + 1 + 1e-12


def test_calibration_interpolates_monotonically_and_says_its_basis() -> None:
    pairs = [(0.30, 2.0), (0.40, 2.6), (0.45, 2.4), (0.50, 3.0)]  # one noisy inversion
    est = calibrated_tau(0.35, pairs)
    assert est.method == "calibrated" and est.basis.startswith("calibrated on 4 pairs")
    assert 2.0 < est.value < 2.6  # type: ignore[operator]
    values = [calibrated_tau(a / 100, pairs).value for a in range(30, 51)]
    assert values == sorted(values)  # monotone despite the inversion
    above = calibrated_tau(0.7, pairs)
    assert above.value == 3.0 and above.extrapolated and "above" in above.basis


def test_without_enough_pairs_it_says_what_is_missing() -> None:
    for pairs in ([], [(0.4, 2.5)], [(0.4, 2.5), (0.4, 2.7)]):
        est = calibrated_tau(0.4, pairs)
        assert est.value is None and est.missing is not None and "pairs" in est.missing
    assert estimate_tau().missing is not None


def test_per_position_accuracies_win_over_the_calibration() -> None:
    est = estimate_tau(acc=0.4, acc_per_position=[0.8, 0.6], pairs=[(0.3, 2), (0.5, 3)])
    assert est.method == "independence" and est.value == pytest.approx(1 + 0.8 + 0.48)
    assert est.upper == pytest.approx(1 + 0.8 + 0.6)
    assert "2 per-position" in est.basis
    fallback = estimate_tau(acc=0.4, acc_per_position=[2.0], pairs=[(0.3, 2), (0.5, 3)])
    assert fallback.method == "calibrated" and fallback.value == pytest.approx(2.5)
