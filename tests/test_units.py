"""Sizes, rates and counts are written by one module (`dflash_tui.core.units`), the same way
everywhere: binary units for bytes, decimal ones for parameters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import dflash_tui
from dflash_tui.core.units import GiB, KiB, MiB, TiB, count, plural, rate, size, size_pair

SRC = Path(dflash_tui.__file__).parent


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (0, "0 B"),
        (677, "677 B"),
        (1023, "1023 B"),
        (1024, "1.00 KiB"),
        (340_582, "333 KiB"),
        (MiB - 1, "1.00 MiB"),  # rounds up into the next unit, never "1024 KiB"
        (int(3.46 * GiB), "3.46 GiB"),
        (81559 * MiB, "79.6 GiB"),
        (int(1.5 * TiB), "1.50 TiB"),
        (None, "-"),
        (float("nan"), "-"),
    ],
)
def test_size_is_binary_with_three_significant_digits(nbytes, text) -> None:  # type: ignore[no-untyped-def]
    assert size(nbytes) == text


def test_pairs_rates_counts_and_plurals() -> None:
    assert size_pair(0, 340_582) == "0/333 KiB"
    assert size_pair(int(1.23 * GiB), int(3.46 * GiB)) == "1.23/3.46 GiB"
    assert size_pair(5, 677) == "5/677 B"
    assert rate(int(118 * MiB)) == "118 MiB/s" and rate(2 * KiB) == "2.00 KiB/s"
    assert rate(None) == "-"
    assert count(82_368) == "82.4 K" and count(1_730_000_000) == "1.73 B" and count(950) == "950"
    assert plural(1, "file") == "1 file" and plural(2, "file") == "2 files"


# A unit name in a string (a unit table: "KB", "MiB") or written after a formatted value
# (`{n / 1e9:.2f} GB`, `{used}/{total} GiB`, `{bps} MB/s`): a formatter of its own.
OWN_FORMATTER = re.compile(r"""["'](?:[KMGTP]i?B)["']|\{[^{}\n]*\}\s?(?:[KMGTP]i?B)\b""")
# Modules that may not import the package (they run alone on GPU hosts) print no sizes
# today; if they ever do, they keep a local copy (with a comment saying why).
ALONE = ("shipped/",)


def test_no_module_formats_sizes_on_its_own() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "core/units.py" or rel.startswith(ALONE):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if OWN_FORMATTER.search(line):
                offenders.append(f"{rel}:{number}: {line.strip()}")
    assert not offenders, "format sizes with dflash_tui.core.units:\n" + "\n".join(offenders)
