"""A long link's streams started with the relay, from the round trips noted last time.

On a long link a large file moves over N streams, each a pair of `ssh` processes
(ssh_streams.py, ssh_splice.py), and each pays its own handshake over the link and
its login shell before its first byte. Started after the walk and the round-trip
measure, that came on top of the connection's and the SFTP session's own start:
bytes began about 2 s into a 40 ms relay. Every measure is noted per host in the
state database (TransferLedger.note_round_trip), so a later relay of a file named
like weights to the same hosts starts its streams at once, beside the connection,
the walk and the destination's check; it still measures again, for the next one.
A wrong guess (the file is small after all, or the link got short) costs the
streams' sessions, killed unused (docs/relay.md "Long links").
"""

from __future__ import annotations

import posixpath

from dflash_tui.transfer.endpoints import Endpoint
from dflash_tui.transfer.hosts.leg_procs import LARGE_FILE_SUFFIXES, LONG_LINK_S, available
from dflash_tui.transfer.hosts.ssh_streams import streams_for
from dflash_tui.transfer.ledger import TransferLedger
from dflash_tui.transfer.results import RelayOptions


def early_stream_count(
    ledger: TransferLedger, options: RelayOptions, src: Endpoint, dst: Endpoint
) -> int:
    """How many streams to start before the walk: the long link's N where both hosts'
    noted round trips make a long link and the source is named like a large file;
    0 otherwise (the walk's measure decides, as on a first relay)."""
    if src.host is None or dst.host is None:
        return 0
    if options.direct or options.keep_local or not options.openssh_legs:
        return 0
    if not options.splice or options.long_streams == 1:
        return 0
    if not src.path.startswith("/") or src.path.endswith("/"):
        return 0
    if not posixpath.basename(src.path).lower().endswith(LARGE_FILE_SUFFIXES):
        return 0
    noted = ledger.round_trips([src.host, dst.host])
    if src.host not in noted or dst.host not in noted:
        return 0
    longest = max(noted[src.host], noted[dst.host])
    if longest < LONG_LINK_S or not available():
        return 0
    return options.long_streams or streams_for(longest)
