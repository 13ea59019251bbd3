"""Served results: acceptance lengths measured by real decoding, beside the offline evals.

The field's benchmarks decode for real and report the mean acceptance length a
drafter gets (tau, bonus token included) with throughput and speedup: z-lab's
`dflash.benchmark` (its printed summary, saved), DDTree's `benchmark.py`
(`torch.save` of SimpleNamespaces) and SpecForge's `bench_eagle3.py` (JSON).
`formats` picks the reader by content, each reader (`zlab`, `ddtree`,
`specforge`) returns a `record.ServedReport`, `store` keeps them in the results
store, and `board` lays them beside a suite's leaderboard, labelled, never in the
same ranking column as the offline streaks (which come from cached hidden
states, not from decoding).
"""
