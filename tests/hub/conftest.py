"""Hub tests may also use a store (a fallback copy): the S3 fixtures of tests/stores."""

from tests.stores.s3env import moto_server, s3  # noqa: F401 (fixtures)
