"""Why a transfer failed, and whether running it again would pick up where it stopped."""

from __future__ import annotations


class TransferError(Exception):
    """A transfer failed; `message` says what and where, `kind` names the cause.

    `resumable` failures (the link dropped, the console was stopped) keep the
    verified `NAME.part` files so a rerun sends only the rest; every other
    failure removes them.
    """

    def __init__(self, message: str, *, kind: str = "failed", resumable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.resumable = resumable
        self.transfer_id: str | None = None  # set once it ended a recorded transfer
        self.hint: str | None = None  # what to do next, when the failure suggests it


class ConnectionLost(TransferError):
    """The SSH link to `host` broke while data was moving; retried with backoff, then resumable."""

    def __init__(self, host: str, message: str) -> None:
        super().__init__(f"{host}: {message}", kind="connection", resumable=True)
        self.host = host
