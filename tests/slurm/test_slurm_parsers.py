"""Slurm's plain-text output, recorded from slurm-wlm 22.05 (Debian bookworm), parsed."""

from __future__ import annotations

import subprocess

import pytest

from dflash_tui.core.config import SlurmConfig
from dflash_tui.evals.jobs.slurm import (
    BATCH_SCRIPT,
    SlurmOutputError,
    SlurmState,
    accounting_disabled,
    argv_file,
    normalise_state,
    parse_duration,
    parse_exit_code,
    parse_sacct,
    parse_sbatch,
    parse_scontrol,
    parse_scontrol_record,
    parse_squeue,
    sbatch_argv,
    script_path,
)

SQUEUE = """\
2|PENDING|Resources|0:00|
3|PENDING|Priority|0:00|
5|PENDING|BeginTime|0:00|
8_1|PENDING|QOSMaxGRESPerUser|0:00|
8_2|PENDING|JobArrayTaskLimit|0:00|
4|PENDING|JobHeldUser|0:00|
1|RUNNING|None|1-02:03:04|dnode
9|COMPLETING|None|12:07|dnode
"""

SACCT = """\
1|CANCELLED by 0|0:15|00:00:02
2|COMPLETED|0:0|00:00:00
6|FAILED|7:0|00:01:30
7|FAILED|0:9|00:00:00
8_0|COMPLETED|0:0|00:00:00
10|TIMEOUT|0:0|01:00:07
11|RUNNING|0:0|00:00:05
"""

SACCT_WITH_STEPS = """\
5|FAILED|3:0|00:00:01
5.batch|FAILED|3:0|00:00:01
5.extern|COMPLETED|0:0|00:00:01
"""

SCONTROL_FAILED = (
    "JobId=2 JobName=ok.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901758 "
    "Nice=0 Account=(null) QOS=(null) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) "
    "Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0 RunTime=00:00:04 TimeLimit=01:00:00 "
    "TimeMin=N/A SubmitTime=2026-11-29T17:50:36 AllocNode:Sid=localhost:20289 "
    "ReqB:S:C:T=0:0:*:* NodeList=dnode NumNodes=1 CPUs/Task=1 Socks/Node=* "
    "Command=/tmp/sp/jobs/ok.sh a 0 3 WorkDir=/tmp/sp StdErr=/tmp/sp/jobs/a.log Power= \n"
)
SCONTROL_ARRAY = (
    "JobId=2 ArrayJobId=2 ArrayTaskId=2 ArrayTaskThrottle=1 JobName=wrap JobState=PENDING "
    "Reason=JobArrayTaskLimit ExitCode=0:0 RunTime=00:00:00 NodeList= Power= \n"
    "JobId=4 ArrayJobId=2 ArrayTaskId=1 ArrayTaskThrottle=1 JobName=wrap JobState=RUNNING "
    "Reason=None ExitCode=0:0 RunTime=00:00:03 NodeList=dnode Power= \n"
    "JobId=3 ArrayJobId=2 ArrayTaskId=0 ArrayTaskThrottle=1 JobName=wrap JobState=COMPLETED "
    "Reason=None ExitCode=0:0 RunTime=00:00:02 NodeList=dnode Power= \n"
)


def test_sbatch_parsable_with_and_without_cluster() -> None:
    assert parse_sbatch("123\n").job_id == "123"
    both = parse_sbatch("sbatch: warning: something odd\n456;gpucluster\n")
    assert (both.job_id, both.cluster) == ("456", "gpucluster")
    assert both.task(3) == "456_3"
    with pytest.raises(SlurmOutputError):
        parse_sbatch("")
    with pytest.raises(SlurmOutputError):
        parse_sbatch("Submitted batch job 12\n")


def test_squeue_states_and_pending_reasons() -> None:
    states = parse_squeue(SQUEUE)
    assert states["2"].queued and states["2"].reason == "Resources"
    assert states["2"].describe() == "PENDING (Resources)"
    assert states["8_1"].reason == "QOSMaxGRESPerUser"
    assert states["4"].describe() == "PENDING (JobHeldUser)"
    running = states["1"]
    assert running.running and running.reason is None and running.nodes == "dnode"
    assert running.elapsed_s == 86400 + 2 * 3600 + 3 * 60 + 4
    assert states["9"].running and not states["9"].finished  # COMPLETING is not done yet
    assert states["9"].elapsed_s == 727
    assert parse_squeue("garbage\n\n") == {}


def test_sacct_final_states_exit_codes_and_steps() -> None:
    states = parse_sacct(SACCT)
    assert states["1"].state == "CANCELLED" and states["1"].signal == 15
    assert states["1"].describe() == "CANCELLED (signal 15)"
    assert states["2"].succeeded and states["2"].source == "sacct"
    assert states["6"].state == "FAILED" and states["6"].exit_code == 7
    assert states["6"].elapsed_s == 90 and states["6"].describe() == "FAILED (exit 7)"
    assert states["7"].signal == 9
    assert states["10"].finished and not states["10"].succeeded
    assert not states["11"].finished
    stepped = parse_sacct(SACCT_WITH_STEPS)
    assert list(stepped) == ["5"] and stepped["5"].exit_code == 3


def test_scontrol_record_keeps_values_with_spaces() -> None:
    record = parse_scontrol_record(SCONTROL_FAILED)
    assert record["Command"] == "/tmp/sp/jobs/ok.sh a 0 3"
    assert record["AllocNode:Sid"] == "localhost:20289"
    assert record["CPUs/Task"] == "1" and record["Power"] == ""
    state = parse_scontrol(SCONTROL_FAILED, "2")
    assert state == SlurmState(
        "2", "FAILED", "NonZeroExitCode", 3, 0, 4.0, "dnode", source="scontrol"
    )


def test_scontrol_picks_the_array_task_asked_for() -> None:
    task1 = parse_scontrol(SCONTROL_ARRAY, "2_1")
    assert task1 is not None and task1.state == "RUNNING" and task1.job_id == "2_1"
    task0 = parse_scontrol(SCONTROL_ARRAY, "2_0")
    assert task0 is not None and task0.succeeded
    assert parse_scontrol(SCONTROL_ARRAY, "2_7") is None
    assert parse_scontrol(SCONTROL_FAILED, "99") is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0:00", 0),
        ("12:07", 727),
        ("1:02:03", 3723),
        ("00:00:01", 1),
        ("2-00:00:00", 172800),
        ("00:01.500", 1.5),
        ("INVALID", None),
        ("UNLIMITED", None),
        ("N/A", None),
    ],
)
def test_durations(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


def test_state_words_and_exit_codes() -> None:
    assert normalise_state("CANCELLED by 1000") == "CANCELLED"
    assert normalise_state("CA") == "CANCELLED"
    assert normalise_state("PD") == "PENDING"
    assert normalise_state("COMPLETED+") == "COMPLETED"
    assert parse_exit_code("0:15") == (0, 15)
    assert parse_exit_code("") == (None, None)
    assert accounting_disabled("Slurm accounting storage is disabled\n")


def test_sbatch_argv_settings_extra_args_last_and_arrays() -> None:
    settings = SlurmConfig(
        partition="gpu",
        gres="gpu:1",
        time="00:30:00",
        account="lab",
        extra_args=("--qos=low", "--partition=debug"),
    )
    single = sbatch_argv(settings, "s.sbatch", ["jobs/a"], job_name="eval step-1")
    assert single[:2] == ["sbatch", "--parsable"]
    assert "--job-name=eval step-1" in single
    assert "--output=jobs/a/log" in single
    assert single.index("--partition=gpu") < single.index("--partition=debug")
    assert single[-2:] == ["s.sbatch", "jobs/a"]
    assert not any(a.startswith("--array") for a in single)
    array = sbatch_argv(SlurmConfig(), "s.sbatch", ["jobs/a", "jobs/b", "jobs/c"], max_parallel=2)
    assert "--array=0-2%2" in array and "--output=jobs/slurm-%A_%a.out" in array
    assert array[-4:] == ["s.sbatch", "jobs/a", "jobs/b", "jobs/c"]
    assert not any(a.startswith("--partition") for a in array)


def test_argv_file_refuses_line_breaks() -> None:
    assert argv_file(["python", "-m", "x y"]) == "python\n-m\nx y\n"
    with pytest.raises(ValueError, match="line break"):
        argv_file(["ok", "bad\nword"])
    with pytest.raises(ValueError):
        argv_file([])


def test_batch_script_is_valid_sh_and_content_named() -> None:
    assert subprocess.run(["sh", "-n"], input=BATCH_SCRIPT, text=True).returncode == 0
    assert script_path().endswith(".sbatch") and "/eval-" in script_path()


def test_batch_script_runs_the_argv_of_its_task(tmp_path) -> None:
    """Without Slurm: the script's own logic (task selection, argv words, log, rc)."""
    script = tmp_path / "run.sbatch"
    script.write_text(BATCH_SCRIPT)
    dirs = []
    for i, words in enumerate(
        [["sh", "-c", "echo first; exit 0"], ["printf", "%s|", "a b", "$HOME;x"]]
    ):
        d = tmp_path / f"job{i}"
        d.mkdir()
        (d / "argv").write_text(argv_file(words))
        dirs.append(str(d))
    env = {
        "PATH": "/usr/bin:/bin",
        "SLURM_JOB_ID": "77",
        "SLURM_ARRAY_JOB_ID": "70",
        "SLURM_ARRAY_TASK_ID": "1",
    }
    done = subprocess.run(["sh", str(script), *dirs], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    job = tmp_path / "job1"
    assert "a b|$HOME;x|" in (job / "log").read_text()
    assert (job / "rc").read_text() == "0\n"
    assert (job / "slurm_job_id").read_text() == "70_1\n"
    assert not (tmp_path / "job0" / "log").exists()
    missing = subprocess.run(
        ["sh", str(script), *dirs], env={**env, "SLURM_ARRAY_TASK_ID": "5"}, capture_output=True
    )
    assert missing.returncode == 96
