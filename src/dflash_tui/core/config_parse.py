"""hosts.toml -> typed, validated, frozen objects (`core/config.py`).

Every problem becomes a :class:`ConfigProblem` naming the file, the line (when
the text tells us), the dotted key and what was expected. Validation collects
all problems instead of stopping at the first, so `dflash-tui check` can show
them together; callers turn a :class:`ConfigError` into exit code 2.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dflash_tui.core.config import (
    CONFIG_ENV,
    SLIDING_MODES,
    TRACKER_KEYS,
    CheckpointConfig,
    Config,
    ConfigError,
    ConfigProblem,
    ConsoleConfig,
    HostConfig,
    MetricsEndpoint,
    RunConfig,
    SlurmConfig,
    StoreConfig,
    SuiteConfig,
    config_path,
    expand_local,
)
from dflash_tui.core.notify_settings import parse_notify

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib


# --------------------------------------------------------------------------- line index

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)


def _split_dotted(text: str) -> list[str]:
    parts = re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", text)
    return [p[1:-1] if p[:1] in "\"'" else p for p in parts]


def build_line_index(text: str) -> dict[str, int]:
    """Map dotted keys (`hosts.ct129.port`, `runs[1].host`) to 1-based line numbers.

    tomllib only reports lines for syntax errors, so we scan the text ourselves.
    Inline tables and multi-line values map to the line where their key starts.
    """
    index: dict[str, int] = {}
    array_counts: dict[str, int] = {}
    prefix = ""
    in_multiline: str | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if in_multiline:
            if in_multiline in line:
                in_multiline = None
            continue
        header = _HEADER.match(line)
        if header and "=" not in line.split("#", 1)[0]:
            dotted = ".".join(_split_dotted(header.group(2)))
            if header.group(1) == "[[":
                n = array_counts.get(dotted, 0)
                array_counts[dotted] = n + 1
                prefix = f"{dotted}[{n}]"
            else:
                prefix = dotted
            index.setdefault(prefix, lineno)
            continue
        key = _KEY.match(line)
        if key:
            dotted = ".".join(_split_dotted(key.group(1)))
            full = f"{prefix}.{dotted}" if prefix else dotted
            index.setdefault(full, lineno)
            rest = line[key.end() :]
            for quote in ('"""', "'''"):
                if rest.count(quote) == 1:
                    in_multiline = quote
    return index


# --------------------------------------------------------------------------- validation helpers


class _Checker:
    """Collects problems while reading a parsed TOML document."""

    def __init__(self, path: Path, index: Mapping[str, int]) -> None:
        self.path = path
        self.index = index
        self.problems: list[ConfigProblem] = []

    def line_of(self, key: str) -> int | None:
        """The key's own line, else its first child's (a table given only as
        `[a.b]` has no line for `a`), else its nearest parent's."""
        if key in self.index:
            return self.index[key]
        children = [n for k, n in self.index.items() if k.startswith((f"{key}.", f"{key}["))]
        if children:
            return min(children)
        while "." in key:
            key = key.rsplit(".", 1)[0]
            if key in self.index:
                return self.index[key]
        return None

    def add(self, key: str, message: str) -> None:
        self.problems.append(ConfigProblem(self.path, key, message, self.line_of(key)))

    def table(self, value: Any, key: str) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        self.add(key, f"expected a table, got {_describe(value)}")
        return {}

    def unknown_keys(self, table: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
        allowed = list(allowed)
        for name in table:
            if name not in allowed:
                key = f"{where}.{name}" if where else name
                hint = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
                suggestion = (
                    f'; did you mean "{hint[0]}"?' if hint else f" (allowed: {', '.join(allowed)})"
                )
                self.add(key, f"unknown key{suggestion}")


def _describe(value: Any) -> str:
    names = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "a table",
    }
    label = names.get(type(value), type(value).__name__)
    shown = repr(value) if isinstance(value, (bool, int, float, str)) else ""
    return f"{label} {shown}".strip()


_MISSING = object()


def _get(
    checker: _Checker,
    table: Mapping[str, Any],
    name: str,
    where: str,
    kind: str,
    default: Any = _MISSING,
    check: Callable[[Any], str | None] | None = None,
) -> Any:
    """Read `table[name]` as `kind`, recording a problem and returning the default on error."""
    key = f"{where}.{name}" if where else name
    if name not in table:
        if default is _MISSING:
            checker.add(key, f"missing; expected {_KIND_WORDS[kind]}")
            return None
        return default
    value = table[name]
    ok = _KIND_CHECKS[kind](value)
    if not ok:
        checker.add(key, f"expected {_KIND_WORDS[kind]}, got {_describe(value)}")
        return None if default is _MISSING else default
    if kind == "float":
        value = float(value)
    if kind in ("strings", "ints"):
        value = tuple(value)
    if check is not None:
        message = check(value)
        if message:
            checker.add(key, message)
            return None if default is _MISSING else default
    return value


_KIND_CHECKS: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "strings": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "ints": lambda v: (
        isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
    ),
    "table": lambda v: isinstance(v, dict),
}
_KIND_WORDS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "strings": "an array of strings",
    "ints": "an array of integers",
    "table": "a table",
}


def _non_empty(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


def _positive(value: float) -> str | None:
    return None if value > 0 else "must be greater than 0"


def _port(value: int) -> str | None:
    return None if 1 <= value <= 65535 else "must be a TCP port between 1 and 65535"


def _valid_regexes(patterns: tuple[str, ...]) -> str | None:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            return f"regex {pattern!r} does not compile: {exc}"
    return None


# --------------------------------------------------------------------------- sections

_TOP_KEYS = ("console", "hosts", "stores", "runs", "checkpoints", "suites", "keys", "notify")
_CONSOLE_KEYS = (
    "results_dir",
    "state_dir",
    "known_hosts",
    "refresh_s",
    "bell",
    "connect_timeout_s",
    "keepalive_s",
    "stall_after_s",
    "hf_endpoint",
    "collapse_fraction",
)
_STORE_KEYS = ("url", "endpoint_url", "region", "profile")
_HOST_KEYS = (
    "address",
    "user",
    "port",
    "identity",
    "jump",
    "python",
    "model_roots",
    "roles",
    "exec_prefix",
    "max_sessions",
    "env",
    "scheduler",
    "slurm",
    "device",
    "vllm",
    "sglang",
)
_SLURM_KEYS = ("partition", "gres", "time", "account", "extra_args")
_RUN_KEYS = (
    "name",
    "host",
    "log",
    "process",
    "total_steps",
    "metric_patterns",
    "stall_after_s",
    "checkpoints",
    "auto_eval",
    "max_parallel",
    "metrics",
    "tensorboard",
    "trackio",
    "trackio_run",
    "wandb",
    "drafter",
)
_CHECKPOINT_KEYS = ("name", "host", "path", "baseline", "step", "run")
_SUITE_KEYS = (
    "name",
    "host",
    "cache",
    "import",
    "max_anchors",
    "device",
    "target",
    "cache_layer_ids",
    "sliding",
)
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _console(ch: _Checker, raw: Mapping[str, Any], base: Path) -> ConsoleConfig:
    ch.unknown_keys(raw, _CONSOLE_KEYS, "console")
    w = "console"
    return ConsoleConfig(
        results_dir=expand_local(_get(ch, raw, "results_dir", w, "str", "results"), base),
        state_dir=expand_local(
            _get(ch, raw, "state_dir", w, "str", "~/.local/state/dflash-tui"), base
        ),
        known_hosts=expand_local(
            _get(ch, raw, "known_hosts", w, "str", "~/.ssh/known_hosts"), base
        ),
        refresh_s=_get(ch, raw, "refresh_s", w, "float", 2.0, _positive),
        bell=_get(ch, raw, "bell", w, "bool", True),
        connect_timeout_s=_get(ch, raw, "connect_timeout_s", w, "float", 10.0, _positive),
        keepalive_s=_get(ch, raw, "keepalive_s", w, "float", 15.0, _positive),
        stall_after_s=_get(ch, raw, "stall_after_s", w, "float", 300.0, _positive),
        hf_endpoint=_get(ch, raw, "hf_endpoint", w, "str", None, _http_url),
        collapse_fraction=_get(ch, raw, "collapse_fraction", w, "float", 0.6, _fraction),
    )


def _fraction(value: float) -> str | None:
    return None if 0 < value < 1 else "must be between 0 and 1 (0.6: 60% of tau_greedy)"


def _http_url(value: str) -> str | None:
    if re.match(r"^https?://[^/\s]+", value):
        return None
    return 'expected an http:// or https:// URL such as "https://hf-mirror.example.org"'


# S3 bucket names: 3-63 of lowercase letters, digits, '.', '-' (the AWS rules, loosely).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def _store(ch: _Checker, name: str, raw: Any) -> StoreConfig | None:
    where = f"stores.{name}"
    table = ch.table(raw, where)
    ch.unknown_keys(table, _STORE_KEYS, where)
    if not _HOST_NAME.match(name):
        ch.add(where, "store names may use letters, digits, '.', '_' and '-' only")
    url = _get(ch, table, "url", where, "str")
    endpoint = _get(ch, table, "endpoint_url", where, "str", None, _http_url)
    region = _get(ch, table, "region", where, "str", None, _non_empty)
    profile = _get(ch, table, "profile", where, "str", None, _non_empty)
    if url is None:
        return None
    match = re.match(r"^s3://([^/]*)/?(.*)$", url)
    if not match:
        ch.add(f"{where}.url", f'expected "s3://bucket/prefix", got {url!r}')
        return None
    bucket, prefix = match.group(1), match.group(2).strip("/")
    if not _BUCKET.match(bucket):
        ch.add(
            f"{where}.url",
            f"{bucket!r} is not a valid bucket name (3-63 lowercase letters, digits, '.', '-')",
        )
        return None
    if "//" in prefix:
        ch.add(f"{where}.url", "the prefix must not contain empty path segments ('//')")
    return StoreConfig(name, url, bucket, prefix, endpoint, region, profile)


def _slurm(ch: _Checker, raw: Any, where: str) -> SlurmConfig:
    table = ch.table(raw, where)
    ch.unknown_keys(table, _SLURM_KEYS, where)
    return SlurmConfig(
        partition=_get(ch, table, "partition", where, "str", None),
        gres=_get(ch, table, "gres", where, "str", None),
        time=_get(ch, table, "time", where, "str", None),
        account=_get(ch, table, "account", where, "str", None),
        extra_args=_get(ch, table, "extra_args", where, "strings", ()),
    )


def _env(ch: _Checker, raw: Any, where: str) -> dict[str, str]:
    table = ch.table(raw, where)
    env: dict[str, str] = {}
    for name, value in table.items():
        if not _ENV_NAME.match(name):
            ch.add(f"{where}.{name}", "not a valid environment variable name")
        elif not isinstance(value, str):
            ch.add(f"{where}.{name}", f"expected a string, got {_describe(value)}")
        else:
            env[name] = value
    return env


def _device(value: str) -> str | None:
    """Eval jobs run where the config says, never on a silent CPU fallback."""
    return None if value in ("cuda", "cpu") else 'expected "cuda" or "cpu"'


def _host(ch: _Checker, name: str, raw: Any, base: Path) -> HostConfig:
    where = f"hosts.{name}"
    table = ch.table(raw, where)
    ch.unknown_keys(table, _HOST_KEYS, where)
    if not _HOST_NAME.match(name):
        ch.add(where, "host names may use letters, digits, '.', '_' and '-' only")
    identity = _get(ch, table, "identity", where, "str", None)
    scheduler = _get(
        ch,
        table,
        "scheduler",
        where,
        "str",
        "ssh",
        lambda v: None if v in ("ssh", "slurm") else 'expected "ssh" or "slurm"',
    )
    slurm = _slurm(ch, table["slurm"], f"{where}.slurm") if "slurm" in table else None
    if scheduler == "slurm" and slurm is None:
        slurm = SlurmConfig()
    return HostConfig(
        name=name,
        address=_get(ch, table, "address", where, "str", name, _non_empty),
        user=_get(ch, table, "user", where, "str", None),
        port=_get(ch, table, "port", where, "int", None, _port),
        identity=expand_local(identity, base) if identity else None,
        jump=_get(ch, table, "jump", where, "str", None),
        python=_get(ch, table, "python", where, "str", "python3", _non_empty),
        model_roots=_get(ch, table, "model_roots", where, "strings", ()),
        roles=_get(ch, table, "roles", where, "strings", ()),
        exec_prefix=_get(ch, table, "exec_prefix", where, "strings", ()),
        max_sessions=_get(
            ch,
            table,
            "max_sessions",
            where,
            "int",
            10,
            lambda v: None if v >= 1 else "must be at least 1",
        ),
        env=_env(ch, table["env"], f"{where}.env") if "env" in table else {},
        scheduler=scheduler,
        slurm=slurm,
        device=_get(ch, table, "device", where, "str", None, _device),
        vllm=_engine(ch, table, "vllm", where),
        sglang=_engine(ch, table, "sglang", where),
    )


def _engine(ch: _Checker, table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    """An engine command: a path (one string) or a non-empty argv list of strings."""
    if key not in table:
        return None
    value = table[key]
    if isinstance(value, str) and value:
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    ch.add(f"{where}.{key}", f"expected a path or a list of strings, got {_describe(value)}")
    return None


def _entries(
    ch: _Checker, doc: Mapping[str, Any], section: str
) -> list[tuple[str, dict[str, Any]]]:
    raw = doc.get(section, [])
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        ch.add(section, f"expected an array of tables ([[{section}]]), got {_describe(raw)}")
        return []
    return [(f"{section}[{i}]", entry) for i, entry in enumerate(raw)]


def _run(ch: _Checker, where: str, t: Mapping[str, Any]) -> RunConfig:
    ch.unknown_keys(t, _RUN_KEYS, where)
    trackers = [k for k in TRACKER_KEYS if k in t]
    if len(trackers) > 1:
        ch.add(f"{where}.{trackers[1]}", f"one tracker per run: {' and '.join(trackers)} given")
    if "trackio" in t and "trackio_run" not in t:
        ch.add(f"{where}.trackio_run", "missing; the run's name in the trackio database")
    if "trackio_run" in t and "trackio" not in t:
        ch.add(f"{where}.trackio_run", "needs `trackio` (the database's path)")
    if not trackers and "log" not in t:
        ch.add(f"{where}.log", "missing; expected a string (or name a tracker: tensorboard, "
               "trackio or wandb; see docs/monitoring.md \"Trackers\")")  # fmt: skip
    return RunConfig(
        name=_get(ch, t, "name", where, "str", check=_non_empty),
        host=_get(ch, t, "host", where, "str"),
        log=_get(ch, t, "log", where, "str", None, _non_empty),
        tensorboard=_get(ch, t, "tensorboard", where, "str", None, _non_empty),
        trackio=_get(ch, t, "trackio", where, "str", None, _non_empty),
        trackio_run=_get(ch, t, "trackio_run", where, "str", None, _non_empty),
        wandb=_get(ch, t, "wandb", where, "str", None, _non_empty),
        process=_get(ch, t, "process", where, "str", None, _non_empty),
        total_steps=_get(ch, t, "total_steps", where, "int", None, _positive),
        metric_patterns=_get(ch, t, "metric_patterns", where, "strings", (), _valid_regexes),
        stall_after_s=_get(ch, t, "stall_after_s", where, "float", None, _positive),
        checkpoints=_get(ch, t, "checkpoints", where, "str", None, _non_empty),
        auto_eval=_get(ch, t, "auto_eval", where, "strings", ()),
        max_parallel=_get(ch, t, "max_parallel", where, "int", 1, _positive),
        metrics=_metrics_endpoint(ch, where, t),
        drafter=_get(ch, t, "drafter", where, "str", None, _non_empty),
    )


_METRICS_EXAMPLE = '"http://127.0.0.1:8000/metrics"'


def _metrics_endpoint(ch: _Checker, where: str, t: Mapping[str, Any]) -> MetricsEndpoint | None:
    """`metrics = "http://ADDRESS:PORT/PATH"`: plain http, as the run's host reaches it."""
    raw = _get(ch, t, "metrics", where, "str", None)
    if raw is None:
        return None
    endpoint, problem = parse_metrics_url(raw)
    if problem is not None:
        ch.add(f"{where}.metrics", problem)
    return endpoint


def parse_metrics_url(raw: str) -> tuple[MetricsEndpoint | None, str | None]:
    """(endpoint, None), or (None, what is wrong with `raw`) for a `metrics` value."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(raw.strip())
        port = parts.port
    except ValueError as exc:
        return None, f"{raw!r} is not a URL ({exc}); expected one such as {_METRICS_EXAMPLE}"
    if port == 0:
        return None, f"port 0 is not a server's port; expected one such as {_METRICS_EXAMPLE}"
    if parts.scheme == "https":
        return None, (
            "https is not read: the request already travels inside the host's SSH "
            f"connection; name the server's plain http address, such as {_METRICS_EXAMPLE}"
        )
    if parts.scheme != "http" or not parts.hostname:
        return None, (
            f"expected an http:// URL as the run's host reaches the server, such as "
            f"{_METRICS_EXAMPLE}; got {raw!r}"
        )
    if parts.username is not None or parts.password is not None:
        return None, "no user or password in the URL: /metrics is read without credentials"
    if parts.fragment:
        return None, f"no '#' fragment in the URL; got {raw!r}"
    if not parts.path or parts.path == "/":
        return None, (
            f"name the path too: vLLM and SGLang serve it at /metrics, as in {_METRICS_EXAMPLE}"
        )
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    return MetricsEndpoint(raw, parts.hostname, port or 80, path), None


def _checkpoint(ch: _Checker, where: str, t: Mapping[str, Any]) -> CheckpointConfig:
    ch.unknown_keys(t, _CHECKPOINT_KEYS, where)
    return CheckpointConfig(
        name=_get(ch, t, "name", where, "str", check=_non_empty),
        host=_get(ch, t, "host", where, "str"),
        path=_get(ch, t, "path", where, "str", check=_non_empty),
        baseline=_get(ch, t, "baseline", where, "bool", False),
        step=_get(ch, t, "step", where, "int", None),
        run=_get(ch, t, "run", where, "str", None),
    )


def _suite(ch: _Checker, where: str, t: Mapping[str, Any]) -> SuiteConfig:
    ch.unknown_keys(t, _SUITE_KEYS, where)
    return SuiteConfig(
        name=_get(ch, t, "name", where, "str", check=_non_empty),
        host=_get(ch, t, "host", where, "str"),
        cache=_get(ch, t, "cache", where, "str", check=_non_empty),
        imports=_get(ch, t, "import", where, "strings", ()),
        max_anchors=_get(ch, t, "max_anchors", where, "int", None, _positive),
        device=_get(ch, t, "device", where, "str", None, _device),
        target=_suite_target(ch, where, t),
        cache_layer_ids=_get(ch, t, "cache_layer_ids", where, "ints", None, _layer_ids),
        sliding=_get(ch, t, "sliding", where, "str", None, _sliding),
    )


def _suite_target(ch: _Checker, where: str, t: Mapping[str, Any]) -> str | None:
    """`target = "host:DIR"`: the target model directory, which must be on the suite's host
    (the harness reads it there); returns DIR."""
    raw = _get(ch, t, "target", where, "str", None, _non_empty)
    if raw is None:
        return None
    head, sep, path = raw.partition(":")
    if not sep or not head or "/" in head or not path:
        ch.add(f"{where}.target", f'expected "host:DIR" (the target model directory), got "{raw}"')
        return None
    host = t.get("host")
    if isinstance(host, str) and head != host:
        ch.add(
            f"{where}.target",
            f'the target must be on the suite\'s host "{host}", not "{head}": the harness reads '
            "its embed_tokens and lm_head there; copy config.json, model.safetensors.index.json "
            "and the shard(s) holding model.embed_tokens.weight and lm_head.weight to a "
            f'directory on "{host}" and name that',
        )
        return None
    return path


def _layer_ids(value: tuple[int, ...]) -> str | None:
    if not value or any(v < 0 for v in value) or len(set(value)) != len(value):
        return "expected a non-empty list of distinct layer ids >= 0"
    return None


def _sliding(value: str) -> str | None:
    if value in SLIDING_MODES:
        return None
    return f"must be one of {', '.join(repr(m) for m in SLIDING_MODES)}, got {value!r}"


def _check_host_ref(
    ch: _Checker, key: str, name: str | None, hosts: Mapping[str, HostConfig]
) -> None:
    if name is None or name in hosts:
        return
    hint = difflib.get_close_matches(name, list(hosts), n=1, cutoff=0.6)
    known = f'did you mean "{hint[0]}"?' if hint else f"known hosts: {', '.join(hosts) or 'none'}"
    ch.add(key, f'unknown host "{name}"; {known}')


def _check_duplicates(ch: _Checker, section: str, names: list[str | None]) -> None:
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name is None:
            continue
        if name in seen:
            ch.add(
                f"{section}[{i}].name", f'duplicate name "{name}" (also {section}[{seen[name]}])'
            )
        else:
            seen[name] = i


def _check_jump_cycles(ch: _Checker, hosts: Mapping[str, HostConfig]) -> None:
    reported: set[frozenset[str]] = set()
    for start in hosts:
        chain = [start]
        current = hosts[start].jump
        if current == start:
            continue  # reported on its own: "cannot jump through itself"
        while current is not None and current in hosts:
            if current in chain:
                cycle = chain[chain.index(current) :]
                members = frozenset(cycle)
                if members not in reported:
                    reported.add(members)
                    path = " -> ".join([*cycle, current])
                    ch.add(f"hosts.{cycle[0]}.jump", f"jump hosts form a cycle: {path}")
                break
            chain.append(current)
            current = hosts[current].jump


# --------------------------------------------------------------------------- entry points


def parse_config(text: str, path: Path) -> Config:
    """Validate TOML text as a dflash-tui config; raises ConfigError listing every problem."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"\(at line (\d+), column (\d+)\)", message)
        line = int(match.group(1)) if match else None
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", message)
        col = f" (column {match.group(2)})" if match else ""
        raise ConfigError(
            [ConfigProblem(path, "", f"TOML syntax error: {message}{col}", line)]
        ) from None

    index = build_line_index(text)
    ch = _Checker(path, index)
    base = path.resolve().parent
    ch.unknown_keys(doc, _TOP_KEYS, "")

    console = _console(ch, ch.table(doc.get("console", {}), "console"), base)

    hosts: dict[str, HostConfig] = {}
    for name, raw in ch.table(doc.get("hosts", {}), "hosts").items():
        hosts[name] = _host(ch, name, raw, base)

    stores: dict[str, StoreConfig] = {}
    for name, raw in ch.table(doc.get("stores", {}), "stores").items():
        store = _store(ch, name, raw)
        if name in hosts:
            ch.add(
                f"stores.{name}",
                f'"{name}" is also a host; `{name}:path` must name one place, rename one of them',
            )
        elif store is not None:
            stores[name] = store

    runs = [_run(ch, where, t) for where, t in _entries(ch, doc, "runs")]
    checkpoints = [_checkpoint(ch, where, t) for where, t in _entries(ch, doc, "checkpoints")]
    suites = [_suite(ch, where, t) for where, t in _entries(ch, doc, "suites")]

    notify, notify_problems = parse_notify(doc.get("notify"))
    for key, message in notify_problems:
        ch.add(key, message)

    keys: dict[str, str] = {}
    for action, binding in ch.table(doc.get("keys", {}), "keys").items():
        if isinstance(binding, str) and binding.strip():
            keys[action] = binding
        else:
            ch.add(
                f"keys.{action}",
                f'expected keys as a string such as "j,down", got {_describe(binding)}',
            )

    for host in hosts.values():
        if host.jump is not None:
            if host.jump == host.name:
                ch.add(f"hosts.{host.name}.jump", "a host cannot jump through itself")
            else:
                _check_host_ref(ch, f"hosts.{host.name}.jump", host.jump, hosts)
    _check_jump_cycles(ch, hosts)
    sections: list[tuple[str, Sequence[RunConfig | CheckpointConfig | SuiteConfig]]] = [
        ("runs", runs),
        ("checkpoints", checkpoints),
        ("suites", suites),
    ]
    for section, entries in sections:
        for i, entry in enumerate(entries):
            _check_host_ref(ch, f"{section}[{i}].host", entry.host, hosts)
        _check_duplicates(ch, section, [e.name for e in entries])
    suite_names = {s.name for s in suites}
    for i, run in enumerate(runs):
        for suite in run.auto_eval:
            if suite not in suite_names:
                ch.add(f"runs[{i}].auto_eval", f'unknown suite "{suite}"')
        if run.auto_eval and not run.checkpoints:
            ch.add(f"runs[{i}].auto_eval", "needs `checkpoints` (a glob of checkpoint directories)")

    if ch.problems:
        raise ConfigError(sorted(ch.problems, key=lambda p: p.line or 1 << 30))
    return Config(
        path=path,
        console=console,
        hosts=hosts,
        runs=tuple(runs),
        checkpoints=tuple(checkpoints),
        suites=tuple(suites),
        keys=keys,
        stores=stores,
        line_index=index,
        notify=notify,
    )


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Read and validate the config at `path` (or the default location)."""
    resolved = config_path(path)
    try:
        text = resolved.read_text(encoding="utf-8")
    except FileNotFoundError:
        hint = f"pass --config PATH, set ${CONFIG_ENV}, or run `dflash-tui demo --print-config`"
        raise ConfigError([ConfigProblem(resolved, "", f"config file not found; {hint}")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigProblem(resolved, "", f"cannot read config: {exc}")]) from None
    config = parse_config(text, resolved)
    return dataclasses.replace(config, given_as=os.fspath(path)) if path else config
