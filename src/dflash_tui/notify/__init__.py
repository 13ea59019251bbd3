"""Notifications that reach an operator who is away (docs/notify.md).

`[notify]` in hosts.toml (`settings`) names apprise URLs and the events they get;
`Notifier` (`notifier`) applies the once-per-condition rule, the claim shared
with every other console or watcher on the same state database (`store`) and the
per-target rate limit, and sends through apprise (`sender`, the `notify` extra,
imported only when used). `redact` keeps the URLs' secrets out of every output.
No Textual here: the console and `dflash-tui watch` drive the same objects.
"""

from dflash_tui.core.notify_settings import EVENTS, MissingVariable, NotifySettings, parse_notify
from dflash_tui.notify.message import Notice
from dflash_tui.notify.notifier import Delivery, Notifier, Outcome
from dflash_tui.notify.redact import Scrubber, redact_url
from dflash_tui.notify.sender import INSTALL_HINT, NotifyUnavailable, Target, apprise_available
from dflash_tui.notify.store import NotifyStore

__all__ = [
    "EVENTS",
    "INSTALL_HINT",
    "Delivery",
    "MissingVariable",
    "Notice",
    "Notifier",
    "NotifySettings",
    "NotifyStore",
    "NotifyUnavailable",
    "Outcome",
    "Scrubber",
    "Target",
    "apprise_available",
    "parse_notify",
    "redact_url",
]
