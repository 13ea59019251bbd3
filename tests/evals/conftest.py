"""The eval tests' fixtures, defined in tests/evals/cluster.py (other test packages use them too)."""

from tests.evals.cluster import assets, cluster, gate  # noqa: F401 - fixtures
