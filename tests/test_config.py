"""hosts.toml loading: the example config loads, and every bad input names file, line and key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dflash_tui.core.config import ConfigError
from dflash_tui.core.config_parse import build_line_index, load_config, parse_config

EXAMPLE = """
[console]
results_dir = "results"
state_dir = "~/.local/state/dflash-tui"
known_hosts = "~/.ssh/known_hosts"
refresh_s = 2.0

[hosts.ct129]
address = "10.1.230.172"
user = "root"
port = 22
identity = "~/.ssh/id_ed25519"
jump = "bastion"
python = "/root/venv/bin/python"
model_roots = ["/root/models"]
roles = ["eval"]

[hosts.ct200]
address = "10.1.2.6"
user = "root"
exec_prefix = ["pct", "exec", "200", "--"]
roles = ["train"]

[hosts.bastion]
address = "bastion.example.org"

[[runs]]
name = "slammed5"
host = "ct200"
log = "/workspace/train_slammed5.log"
process = "train_dflash_pipeline.py"
total_steps = 70000
metric_patterns = ['step (?P<step>\\d+).*loss (?P<loss>[\\d.]+)']

[[checkpoints]]
name = "zlab"
host = "ct129"
path = "/root/models/Qwen3.6-27B-DFlash"
baseline = true

[[suites]]
name = "coding10"
host = "ct129"
cache = "/root/eval/cached_hidden_states"
"""


def test_design_example_loads_with_paths_resolved(tmp_path: Path, isolated_home: Path) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text(EXAMPLE)
    config = load_config(path)
    assert config.console.results_dir == tmp_path / "results"
    assert config.console.known_hosts == isolated_home / ".ssh" / "known_hosts"
    assert config.hosts["ct129"].identity == isolated_home / ".ssh" / "id_ed25519"
    assert config.hosts["ct129"].jump == "bastion"
    assert config.hosts["ct200"].exec_prefix == ("pct", "exec", "200", "--")
    assert config.hosts["bastion"].port is None
    assert config.run("slammed5").total_steps == 70000
    assert config.checkpoints[0].baseline
    assert config.suites[0].cache == "/root/eval/cached_hidden_states"


def test_config_path_comes_from_env_then_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "hosts.toml").write_text(EXAMPLE)
    monkeypatch.chdir(tmp_path)
    assert load_config().path == Path("hosts.toml")
    other = tmp_path / "other.toml"
    other.write_text("[hosts.x]\n")
    monkeypatch.setenv("DFLASH_TUI_CONFIG", str(other))
    assert list(load_config().hosts) == ["x"]


BAD = [
    ("syntax", "[hosts.a]\naddress = \n", 2, "TOML syntax error"),
    (
        "unknown key",
        "[hosts.a]\naddress = 'x'\nadress = 'y'\n",
        3,
        'hosts.a.adress: unknown key; did you mean "address"?',
    ),
    ("unknown top", "[host.a]\n", 1, 'host: unknown key; did you mean "hosts"?'),
    (
        "wrong type",
        "[hosts.a]\nport = '22'\n",
        2,
        "hosts.a.port: expected an integer, got a string '22'",
    ),
    ("bad port", "[hosts.a]\nport = 70000\n", 2, "hosts.a.port: must be a TCP port"),
    (
        "unknown host ref",
        "[hosts.ct129]\n[[runs]]\nname = 'r'\nhost = 'ct12'\nlog = '/l'\n",
        4,
        'runs[0].host: unknown host "ct12"; did you mean "ct129"?',
    ),
    ("jump to nowhere", "[hosts.a]\njump = 'nope'\n", 2, 'hosts.a.jump: unknown host "nope"'),
    (
        "jump cycle",
        "[hosts.a]\njump = 'b'\n[hosts.b]\njump = 'a'\n",
        2,
        "jump hosts form a cycle: a -> b -> a",
    ),
    ("self jump", "[hosts.a]\njump = 'a'\n", 2, "hosts.a.jump: a host cannot jump through itself"),
    (
        "duplicate run",
        "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\nlog = '/a'\n[[runs]]\nname = 'r'\nhost = 'h'\nlog = '/b'\n",
        7,
        'runs[1].name: duplicate name "r" (also runs[0])',
    ),
    (
        "missing key",
        "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\n",
        2,
        "runs[0].log: missing; expected a string",
    ),
    (
        "bad regex",
        "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\nlog = '/l'\nmetric_patterns = ['(']\n",
        6,
        "runs[0].metric_patterns: regex '(' does not compile",
    ),
    (
        "metrics over https",
        "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\nlog = '/l'\n"
        "metrics = 'https://127.0.0.1:8000/metrics'\n",
        6,
        "runs[0].metrics: https is not read: the request already travels inside the host's SSH",
    ),
    (
        "metrics without a scheme",
        "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\nlog = '/l'\nmetrics = '127.0.0.1:8000/metrics'\n",
        6,
        "runs[0].metrics: expected an http:// URL as the run's host reaches the server, such as "
        '"http://127.0.0.1:8000/metrics"',
    ),
    (
        "metrics without a path",
        "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\nlog = '/l'\nmetrics = 'http://gpu:8000'\n",
        6,
        "runs[0].metrics: name the path too: vLLM and SGLang serve it at /metrics",
    ),
    (
        "metrics with a bad port",
        "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\nlog = '/l'\n"
        "metrics = 'http://gpu:80000/metrics'\n",
        6,
        "runs[0].metrics: 'http://gpu:80000/metrics' is not a URL (Port out of range 0-65535)",
    ),
    (
        "metrics not a string",
        "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\nlog = '/l'\nmetrics = 8000\n",
        6,
        "runs[0].metrics: expected a string, got an integer 8000",
    ),
    (
        "metrics misspelt",
        "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\nlog = '/l'\nmetric = 'http://a/metrics'\n",
        6,
        'runs[0].metric: unknown key; did you mean "metrics"?',
    ),
    (
        "run-no-log-no-tracker",
        "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\n",
        2,
        "runs[0].log: missing; expected a string (or name a tracker",
    ),
    (
        "run-two-trackers",
        "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\ntensorboard = '/t'\nwandb = '/w'\n",
        6,
        "runs[0].wandb: one tracker per run: tensorboard and wandb given",
    ),
    (
        "collapse fraction out of range",
        "[console]\ncollapse_fraction = 1.5\n",
        2,
        "console.collapse_fraction: must be between 0 and 1 (0.6: 60% of tau_greedy)",
    ),
    (
        "empty drafter",
        "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\nlog = '/l'\ndrafter = ' '\n",
        6,
        "runs[0].drafter: must not be empty",
    ),
    (
        "trackio-without-run",
        "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\ntrackio = '/p.db'\n",
        2,
        "runs[0].trackio_run: missing; the run's name in the trackio database",
    ),
]


def test_a_tracker_stands_for_the_log(tmp_path: Path) -> None:
    text = "[hosts.h]\n[[runs]]\nname = 'r'\nhost = 'h'\ntensorboard = 'out/runs'\n"
    (run,) = parse_config(text, tmp_path / "h.toml").runs
    assert run.log is None and run.tracker == ("tensorboard", "out/runs")
    assert run.watched == "out/runs"


@pytest.mark.parametrize(("case", "text", "line", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_config_names_line_and_key(
    tmp_path: Path, case: str, text: str, line: int, message: str
) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    problems = info.value.problems
    assert len(problems) == 1, [str(p) for p in problems]
    assert problems[0].line == line
    assert str(problems[0]).startswith(f"{path}:{line}: ")
    assert message in str(problems[0])


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = "[hosts.a]\nport = 'x'\nuser = 3\n[[runs]]\nname = 'r'\nhost = 'zz'\nlog = '/l'\n"
    with pytest.raises(ConfigError) as info:
        parse_config(text, tmp_path / "h.toml")
    assert sorted(p.key for p in info.value.problems) == [
        "hosts.a.port",
        "hosts.a.user",
        "runs[0].host",
    ]


def test_missing_file_says_how_to_point_at_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file not found; pass --config PATH"):
        load_config(tmp_path / "nope.toml")


def test_line_index_maps_tables_arrays_and_quoted_keys() -> None:
    text = '[console]\nrefresh_s = 1\n\n[hosts."ct 1"]\nport = 2\n[[runs]]\nname = "a"\n[[runs]]\nname = "b"\n'
    index = build_line_index(text)
    assert index["console.refresh_s"] == 2
    assert index["hosts.ct 1.port"] == 5
    assert index["runs[1].name"] == 9


@pytest.mark.parametrize(("case", "text", "line", "message"), BAD, ids=[b[0] for b in BAD])
def test_cli_exits_2_with_one_line_and_no_traceback(
    tmp_path: Path, case: str, text: str, line: int, message: str
) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    out = subprocess.run(
        [sys.executable, "-m", "dflash_tui", "check", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and f"{path}:{line}" in lines[0]
    assert "Traceback" not in out.stderr


SUITE_WITH_TARGET = """
[hosts.gpu]
address = "10.0.0.2"

[hosts.store]
address = "10.0.0.3"

[[suites]]
name = "specforge"
host = "gpu"
cache = "/data/specforge_cache"
target = "{target}"
cache_layer_ids = {ids}
"""


def test_suite_target_and_cache_layer_ids(tmp_path: Path) -> None:
    text = SUITE_WITH_TARGET.format(target="gpu:/models/Qwen3-8B", ids="[1, 17, 33]")
    (suite,) = parse_config(text, tmp_path / "h.toml").suites
    assert suite.target == "/models/Qwen3-8B" and suite.cache_layer_ids == (1, 17, 33)


@pytest.mark.parametrize(
    ("target", "ids", "key", "message"),
    [
        (
            "store:/models/Qwen3-8B",
            "[1]",
            "suites[0].target",
            'the target must be on the suite\'s host "gpu", not "store"',
        ),
        ("/models/Qwen3-8B", "[1]", "suites[0].target", 'expected "host:DIR"'),
        ("gpu:/m", "[1, 1]", "suites[0].cache_layer_ids", "distinct layer ids"),
        ("gpu:/m", '["1"]', "suites[0].cache_layer_ids", "expected an array of integers"),
    ],
)
def test_suite_target_problems(tmp_path: Path, target: str, ids: str, key: str, message: str):
    with pytest.raises(ConfigError) as info:
        parse_config(SUITE_WITH_TARGET.format(target=target, ids=ids), tmp_path / "h.toml")
    (problem,) = info.value.problems
    assert problem.key == key and message in str(problem), str(problem)
