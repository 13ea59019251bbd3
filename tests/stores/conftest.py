"""The store tests' fixtures, defined in tests/stores/s3env.py (other test packages use them too)."""

from tests.stores.s3env import moto_server, s3, store_config  # noqa: F401 - fixtures
