"""`[stores.NAME]` and `[console] hf_endpoint` in hosts.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_tui.core.config import ConfigError
from dflash_tui.core.config_parse import parse_config

GOOD = """[console]
hf_endpoint = "https://hf-mirror.example.org"

[hosts.ct129]
address = "10.0.0.1"

[stores.backup]
url = "s3://train-dflash-qwen36-27b/drafters/"
endpoint_url = "https://s3.example.org"
region = "eu-west-1"
profile = "training"
"""


def test_a_store_is_read_with_bucket_and_prefix() -> None:
    config = parse_config(GOOD, Path("hosts.toml"))
    store = config.stores["backup"]
    assert (store.bucket, store.prefix) == ("train-dflash-qwen36-27b", "drafters")
    assert (store.endpoint_url, store.region, store.profile) == (
        "https://s3.example.org",
        "eu-west-1",
        "training",
    )
    assert config.console.hf_endpoint == "https://hf-mirror.example.org"
    assert (
        parse_config('[stores.b]\nurl = "s3://bucket-a"\n', Path("h.toml")).stores["b"].prefix == ""
    )


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (
            '[stores.b]\nurl = "https://x/y"\n',
            'h.toml:2: stores.b.url: expected "s3://bucket/prefix"',
        ),
        (
            '[stores.b]\nurl = "s3://UPPER/y"\n',
            "h.toml:2: stores.b.url: 'UPPER' is not a valid bucket",
        ),
        (
            '[stores.b]\nurl = "s3://ok-bucket"\nregoin = "x"\n',
            'h.toml:3: stores.b.regoin: unknown key; did you mean "region"?',
        ),
        ('[stores.b]\nregion = "x"\n', "h.toml:1: stores.b.url: missing; expected a string"),
        (
            '[stores.b]\nurl = "s3://ok-bucket"\nendpoint_url = "s3.example"\n',
            "h.toml:3: stores.b.endpoint_url: expected an http:// or https:// URL",
        ),
        (
            '[hosts.b]\naddress = "x"\n[stores.b]\nurl = "s3://ok-bucket"\n',
            'h.toml:3: stores.b: "b" is also a host',
        ),
        (
            '[console]\nhf_endpoint = "mirror"\n',
            "h.toml:2: console.hf_endpoint: expected an http:// or https:// URL",
        ),
        (
            '[storse.b]\nurl = "s3://ok-bucket"\n',
            'h.toml:1: storse: unknown key; did you mean "stores"?',
        ),
    ],
)
def test_store_problems_name_file_line_and_key(table: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(table, Path("h.toml"))
    assert any(str(p).startswith(expected) for p in caught.value.problems), caught.value
