"""Session-wide Slurm clusters on localhost (see slurmbed.py), shared by every test.

`slurm_plain` has no accounting (sacct fails, so state after the queue comes
from `scontrol show job`); `slurm_accounting` adds MariaDB + slurmdbd so sacct
works. Both skip with the reason when the packages are missing or we are not
root, and fail loudly when a daemon that should start does not.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.slurm.slurmbed import Munge, SlurmCluster, unavailable_reason


@pytest.fixture(scope="session")
def slurm_munge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Munge]:
    reason = unavailable_reason(accounting=False)
    if reason:
        pytest.skip(reason)
    munge = Munge(tmp_path_factory.mktemp("munge")).start()
    yield munge
    munge.stop()


def _cluster(
    tmp_path_factory: pytest.TempPathFactory, munge: Munge, *, accounting: bool, name: str
) -> Iterator[SlurmCluster]:
    reason = unavailable_reason(accounting=accounting)
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster(
        tmp_path_factory.mktemp(f"slurm-{name}"), munge, accounting=accounting, cluster_name=name
    )
    try:
        cluster.start().wait_ready()
    except BaseException:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def slurm_plain(
    tmp_path_factory: pytest.TempPathFactory, slurm_munge: Munge
) -> Iterator[SlurmCluster]:
    """A cluster without accounting (`sacct` reports it disabled)."""
    yield from _cluster(tmp_path_factory, slurm_munge, accounting=False, name="plain")


@pytest.fixture(scope="session")
def slurm_accounting(
    tmp_path_factory: pytest.TempPathFactory, slurm_munge: Munge
) -> Iterator[SlurmCluster]:
    """A cluster with slurmdbd + MariaDB behind it (`sacct` works)."""
    yield from _cluster(tmp_path_factory, slurm_munge, accounting=True, name="acct")


@pytest.fixture
def slurm_clean(request: pytest.FixtureRequest) -> Iterator[None]:
    """Cancel whatever a test left queued on the clusters it used."""
    yield
    for name in ("slurm_plain", "slurm_accounting"):
        if name in request.fixturenames:
            request.getfixturevalue(name).cancel_all()
