"""The console's garbage-collection policy for a long run (dflash_tui.ui.gc_policy)."""

from __future__ import annotations

import gc

from dflash_tui.ui import gc_policy


def test_a_long_run_collects_the_young_generation_less_often_and_freezes_startup() -> None:
    before = gc.get_threshold()
    try:
        gc_policy.for_a_long_run()
        assert gc.get_threshold()[0] >= 10 * 700  # CPython's default is 700
        kept = [[i] for i in range(1000)]  # long-lived, tracked
        gc_policy.freeze_what_is_alive()
        assert gc.get_freeze_count() >= len(kept)
        assert all(not any(o is k for o in gc.get_objects(2)) for k in kept[:3])
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
