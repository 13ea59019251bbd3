"""[notify] read into settings: env expansion for these URLs only, errors naming the key."""

from __future__ import annotations

import pytest

from dflash_tui.core.notify_settings import expand
from dflash_tui.notify import EVENTS, MissingVariable, parse_notify, redact_url
from dflash_tui.notify.redact import Scrubber


def test_absent_table_is_no_settings() -> None:
    assert parse_notify(None, {}) == (None, [])


def test_reads_urls_events_and_limit() -> None:
    raw = {
        "urls": ["json://hooks.example.org/x", "ntfys://ntfy.example.org/${TOPIC}"],
        "events": ["run_dead", "eval_finished"],
        "max_per_hour": 5,
    }
    settings, problems = parse_notify(raw, {"TOPIC": "s3cret-topic"})
    assert problems == []
    assert settings is not None
    assert settings.urls == tuple(raw["urls"])  # templates kept, never expanded here
    assert settings.events == {"run_dead", "eval_finished"}
    assert settings.max_per_hour == 5
    assert "s3cret" not in repr(settings) and "example" not in repr(settings)


def test_default_events_are_all() -> None:
    settings, _ = parse_notify({"urls": ["json://localhost/"]}, {})
    assert settings is not None and settings.events == set(EVENTS)


@pytest.mark.parametrize(
    ("raw", "key", "words"),
    [
        ({"urls": ["json://h.example.org/${NOPE}"]}, "notify.urls[0]", "NOPE is not set"),
        (
            {"urls": ["json://a.example.org", "ntfy://${bad-name}"]},
            "notify.urls[1]",
            "not a variable",
        ),
        ({"urls": ["json://h.example.org/$TOKEN"]}, "notify.urls[0]", "${NAME}"),
        ({"urls": ["hooks.example.org/x"]}, "notify.urls[0]", "apprise URL"),
        ({"urls": "json://h"}, "notify.urls", "array of strings"),
        ({"urls": []}, "notify.urls", "at least one"),
        ({}, "notify.urls", "missing"),
        ({"urls": ["json://h.example.org"], "events": ["run_ded"]}, "notify.events", "run_dead"),
        (
            {"urls": ["json://h.example.org"], "max_per_hour": 0},
            "notify.max_per_hour",
            "at least 1",
        ),
        ({"urls": ["json://h.example.org"], "url": []}, "notify.url", "unknown key"),
    ],
)
def test_problems_name_the_key(raw: dict, key: str, words: str) -> None:
    settings, problems = parse_notify(raw, {})
    assert settings is None
    assert any(k == key and words in m for k, m in problems), problems


def test_problem_never_quotes_the_url() -> None:
    _, problems = parse_notify({"urls": ["tgram://123456:SECRETBOT/${CHAT}"]}, {})
    assert problems and all("SECRETBOT" not in m for _, m in problems)


def test_expand_only_named_variables() -> None:
    assert expand("json://h/${A}/$HOME", {"A": "x"}) == "json://h/x/$HOME"
    with pytest.raises(MissingVariable, match=r"notify.urls\[2\]: environment variable B"):
        expand("json://h/${B}", {}, key="notify.urls[2]")


@pytest.mark.parametrize(
    ("template", "shown"),
    [
        ("json://user:pw@hooks.example.org:8080/path/tok", "json://hooks.example.org"),
        ("ntfys://ntfy.example.org/${TOPIC}", "ntfys://ntfy.example.org"),
        ("form://127.0.0.1:9000/x", "form://127.0.0.1"),
        ("json://localhost/x", "json://localhost"),
        ("tgram://123456:ABCDEF/98765", "tgram://***"),
        ("discord://1234567890/webhooktoken", "discord://***"),
        ("ntfy://${TOPIC}", "ntfy://***"),
        ("ntfy://mytopic", "ntfy://***"),
        ("not a url", "***"),
    ],
)
def test_redacted_form_is_scheme_and_host(template: str, shown: str) -> None:
    assert redact_url(template) == shown


def test_scrubber_hides_every_piece() -> None:
    env = {"TOKEN": "tok-abcdef", "PW": "hunter22"}
    scrub = Scrubber.for_templates(
        ["json://bob:${PW}@hooks.example.org/hook/${TOKEN}?key=qvalue99", "tgram://111:BOTKEY/42"],
        env,
    )
    text = "POST http://hooks.example.org/hook/tok-abcdef with hunter22 qvalue99 and 111:BOTKEY"
    out = scrub(text)
    for secret in ("tok-abcdef", "hunter22", "qvalue99", "BOTKEY"):
        assert secret not in out
    assert "hooks.example.org" in out  # the host stays readable
