"""GPUs with their owners, from nvidia-smi's CSV as nvidia-smi prints it.

The lines are nvidia-smi's own forms (`--format=csv,noheader,nounits`): the values
of an H100 under load, a MIG-enabled H100 (utilisation `[N/A]`), and a process whose
memory nvidia-smi cannot read (`[N/A]`, as under Windows' WDDM), taken from captures
of real hosts (nvidia_gpu_exporter's internal/captures, driver 590.48.01).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from dflash_tui.core.config_parse import load_config
from dflash_tui.monitor.gpu import GpuProcess, parse_gpu_csv
from dflash_tui.monitor.liveness import parse_probe, probe_argv, probe_input
from dflash_tui.remote import HostPool
from tests.testbed import SshdHost

UUID = "GPU-8d3f2b1c-41a7-5e09-b2c4-7f1e0a9d6c35"
MIG_UUID = "GPU-1c9e7a52-0b3d-4f86-a1e2-93d5c7b40f18"
GPU_LINES = [
    f"0, NVIDIA H100 80GB HBM3, 100, 19818, 81559, {UUID}, 59, 631.95, 700.00, 0x0000000000000000",
    f"1, NVIDIA H100 80GB HBM3, [N/A], 11125, 81559, {MIG_UUID}, 53, 433.78, 700.00, 0x0000000000000004",
    "2, NVIDIA H100 80GB HBM3, 0, 0, 81559, GPU-77c1d0e4-2a8b-4c3f-9e15-b06a4d2f8e71, 41, 69.85, 700.00, 0x0000000000000001",
]
APP_LINES = [f"11327, {UUID}, 2566", f"11345, {UUID}, 15690", f"2056, {MIG_UUID}, [N/A]"]
PS_LINES = ["11327 11300 /root/tools/memhog", "11345 11300 ./gpu_burn -d 60"]


def test_gpus_carry_temperature_power_throttling_and_their_processes() -> None:
    gpus, error = parse_gpu_csv(GPU_LINES, APP_LINES, PS_LINES)
    assert error is None and [g.index for g in gpus] == [0, 1, 2]
    busy, mig, idle = gpus
    assert (busy.temp_c, busy.power_w, busy.power_limit_w) == (59.0, 631.95, 700.0)
    assert busy.throttle == 0 and busy.throttle_reasons == ()
    assert busy.processes == (
        GpuProcess(11327, 2566.0, 11300, "/root/tools/memhog"),
        GpuProcess(11345, 15690.0, 11300, "./gpu_burn -d 60"),
    )
    assert mig.util_pct is None and mig.throttle_reasons == ("power cap",)
    # A process ps could not see (another pid namespace) keeps its pid, no command.
    assert mig.processes == (GpuProcess(2056, None),)
    assert idle.processes == () and idle.throttle_reasons == ()  # idle is not throttling
    assert idle.as_dict()["throttle_reasons"] == []


def test_an_old_nvidia_smi_falls_back_to_the_basic_fields() -> None:
    # The probe asks again with the basic fields when nvidia-smi rejects one: both its
    # complaint and the answer reach the parser.
    lines = [
        'Field "clocks_throttle_reasons.active" is not a valid field to query.',
        "",
        "0, NVIDIA A100-SXM4-80GB, 97, 70000, 81920",
    ]
    gpus, error = parse_gpu_csv(lines, ["0, NVIDIA A100-SXM4-80GB, 97, 70000, 81920"])
    assert error is None and gpus[0].name == "NVIDIA A100-SXM4-80GB"
    assert gpus[0].uuid is None and gpus[0].processes == () and gpus[0].temp_c is None


def test_the_probe_joins_compute_apps_to_gpus() -> None:
    out = "\n".join(
        [
            "NOW 1700000000.25",
            "SELF 500 500 400",
            "RUN 0",
            "STAT 64:12 2048 1699999990",
            "P 11345 11300 7265 ./gpu_burn -d 60",
            "GPU",
            *(f"G {line}" for line in GPU_LINES),
            *(f"A {line}" for line in APP_LINES),
            *(f"AP {line}" for line in PS_LINES),
            "END",
        ]
    )
    probe = parse_probe(out, 1)
    assert probe.runs[0].processes[0].sid == 11300  # a run's session: matches its GPU's
    assert [len(g.processes) for g in probe.gpus] == [2, 1, 0]


def _fake_smi(folder: Path, script: str) -> list[str]:
    """An exec_prefix whose PATH has this nvidia-smi stand-in first."""
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + script)
    smi.chmod(0o755)
    return ["env", f"PATH={folder}:/usr/local/bin:/usr/bin:/bin"]


async def test_the_probe_over_ssh_joins_a_real_process_to_its_gpu(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    # A process of its own session holds the GPU; the stand-in answers each query as
    # nvidia-smi does (a field list it knows, the compute apps with that pid).
    holder = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        script = (
            'case "$*" in\n'
            f'*--query-compute-apps*) echo "{holder.pid}, {UUID}, 2566" ;;\n'
            f'*) echo "{GPU_LINES[0]}" ;;\n'
            "esac\n"
        )
        prefix = _fake_smi(tmp_path / "new", script)
        config = write_config({"gpu": (sshd, {"exec_prefix": prefix})})
        async with HostPool(load_config(config)) as pool:
            result = await pool.run("gpu", probe_argv(), input=probe_input([]), timeout=20)
        probe = parse_probe(result.stdout, 0)
        assert probe.gpu_error is None and probe.gpus[0].temp_c == 59.0
        assert probe.gpus[0].processes == (GpuProcess(holder.pid, 2566.0, holder.pid, "sleep 300"),)
    finally:
        holder.kill()
        holder.wait()


async def test_an_nvidia_smi_that_rejects_a_field_is_asked_the_basic_ones(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    script = (
        'case "$*" in\n'
        '*clocks_throttle_reasons*) echo \'Field "clocks_throttle_reasons.active" is not a '
        "valid field to query.'; exit 2 ;;\n"
        '*--query-gpu=*) echo "0, NVIDIA A100-SXM4-80GB, 97, 70000, 81920" ;;\n'
        "esac\n"
    )
    config = write_config({"gpu": (sshd, {"exec_prefix": _fake_smi(tmp_path / "old", script)})})
    async with HostPool(load_config(config)) as pool:
        result = await pool.run("gpu", probe_argv(), input=probe_input([]), timeout=20)
    probe = parse_probe(result.stdout, 0)
    assert probe.gpu_error is None and [g.name for g in probe.gpus] == ["NVIDIA A100-SXM4-80GB"]
    assert probe.gpus[0].util_pct == 97.0 and probe.gpus[0].uuid is None
