"""Keeping notification secrets out of output, logs, state and --json.

A target is shown as its scheme and host only (`json://hooks.example.org`), and the
host only when the template writes it literally and it looks like a network
address: for many apprise services the "host" is a token (`tgram://BOTTOKEN/...`,
`discord://WEBHOOK_ID/TOKEN`, `ntfy://TOPIC`), so those show as `tgram://***`.

`Scrubber` replaces every secret-looking part of the expanded URLs (the values of
`${VAR}`s, passwords, users, path segments, query values, the URLs themselves) in
any text before it is shown or logged: apprise's own log lines and the errors it
returns go through it.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, unquote, urlsplit

from dflash_tui.core.notify_settings import expand, variables

MASK = "***"
_HOSTLIKE = re.compile(r"^(localhost|\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+)$")
_MIN_SECRET = 4  # shorter pieces (a port, "api") are not worth hiding and would mangle text
_MIN_PIECE = 8  # a path segment or query value shorter than this is a word, not a token


def _split(url: str) -> tuple[str, str]:
    """(scheme, the rest after ://) without trusting urlsplit on apprise's odd forms."""
    scheme, sep, rest = url.partition("://")
    return (scheme.lower(), rest) if sep else ("", url)


def _host_of(rest: str) -> str:
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    host = netloc.rpartition("@")[2]
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.split(":", 1)[0]


def redact_url(template: str) -> str:
    """How a target is shown anywhere: `scheme://host`, or `scheme://***` when the host
    is a variable or does not look like an address. Takes the template (unexpanded)."""
    scheme, rest = _split(template)
    if not scheme:
        return MASK
    host = _host_of(rest)
    if "$" in host or not _HOSTLIKE.match(host):
        return f"{scheme}://{MASK}"
    return f"{scheme}://{host}"


def secret_parts(template: str, env: Mapping[str, str] | None = None) -> set[str]:
    """Every piece of `template`'s expanded URL that could be a secret."""
    parts: set[str] = set()
    try:
        url = expand(template, env)
    except LookupError:
        url = template
    environ = os.environ if env is None else env
    for name in variables(template):
        if name in environ:
            parts.add(environ[name])
    parts.add(url)
    _, rest = _split(url)
    parts.add(rest)
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        parts.add(userinfo)
        parts.update(userinfo.split(":", 1))
    host = _host_of(rest)
    if redact_url(template).endswith(MASK):
        parts.add(host)
        parts.add(hostport)
    pieces: set[str] = set()  # path segments and query values: tokens are long, words short
    try:
        split = urlsplit(url)
        pieces.update(p for p in split.path.split("/") if p)
        for _, value in parse_qsl(split.query, keep_blank_values=False):
            pieces.add(value)
        if split.fragment:
            pieces.add(split.fragment)
    except ValueError:
        pieces.update(p for p in rest.split("/")[1:] if p)
    parts |= {p for p in pieces if len(p) >= _MIN_PIECE}
    # the same pieces as they may appear percent-decoded in a message
    parts |= {unquote(p) for p in parts}
    shown = redact_url(template)
    # never a piece of what is shown anyway (the scheme and a literal host)
    return {p for p in parts if len(p) >= _MIN_SECRET and p not in shown}


class Scrubber:
    """Replaces known secrets in text; longest first, so a URL goes before its pieces."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        merged = set(self._secrets) | {s for s in secrets if len(s) >= _MIN_SECRET}
        self._secrets = sorted(merged, key=len, reverse=True)

    @classmethod
    def for_templates(
        cls, templates: Iterable[str], env: Mapping[str, str] | None = None
    ) -> Scrubber:
        scrubber = cls()
        for template in templates:
            scrubber.add(secret_parts(template, env))
        return scrubber

    def __call__(self, text: object) -> str:
        out = str(text)
        for secret in self._secrets:
            if secret in out:
                out = out.replace(secret, MASK)
        return out


class ScrubFilter(logging.Filter):
    """A logging filter that renders a record's message and scrubs it (apprise logs
    request URLs at debug level, with any token in their path)."""

    def __init__(self, scrubber: Scrubber) -> None:
        super().__init__()
        self.scrubber = scrubber

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: drop its arguments rather than fail
            message = str(record.msg)
        record.msg = self.scrubber(message)
        record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            # the traceback's text would show the exception's message unscrubbed
            record.msg += f" ({self.scrubber(record.exc_info[1])})"
            record.exc_info = None
            record.exc_text = None
        return True
