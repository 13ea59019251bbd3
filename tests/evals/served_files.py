"""Served-results files in the exact layouts their writers produce (no SSH, no GPU).

- `zlab_*`: z-lab/dflash `dflash/benchmark.py` output as `... | tee logs/gsm8k.log` saves it:
  the same f-strings printed through rich (the script's `from rich import print`) to a
  non-terminal, which rich wraps at 80 columns.
- `ddtree_pt`: liranringel/ddtree `benchmark.py --save-path`: `torch.save(run_data)` with
  one `types.SimpleNamespace` per (response, method), the fields `dflash_generate` /
  `ddtree_generate` return.
- `specforge_json`: sgl-project/SpecForge `benchmarks/bench_eagle3.py`: `json.dump(results,
  f, indent=4)` of `asdict(BenchmarkMetrics)` lists per config.
"""

from __future__ import annotations

import io
import json
import types
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console


def _rich_print(out: io.StringIO, *lines: str) -> None:
    console = Console(file=out, width=80, color_system=None)  # what rich does when piped
    for line in lines:
        console.print(line)


def zlab_transformers(
    tau: float = 6.54,
    speedup: float = 4.47,
    block_size: int = 16,
    banner: str | None = None,
    old: bool = False,
) -> str:
    """`_print_decode_summary` (transformers/mlx), after a tqdm bar; `old`: before the
    throughput lines existed. `banner`: run_benchmark.sh's echo before the run."""
    out = io.StringIO()
    if banner:
        out.write("=" * 56 + f"\nRunning Benchmark: {banner} with 128 samples\n" + "=" * 56 + "\n")
    out.write("2026-03-01 10:00:00.000 | WARNING  | flash_attn not installed. Falling back.\n")
    out.write(
        " 50%|█████     | 8/16 [00:10<00:10,  1.2s/it]\r100%|██████████| 16/16 [00:20<00:00]\n"
    )
    histogram = [0.0] + [(1 - 0.17) / block_size] * (block_size - 1) + [0.17]
    lines = (
        []
        if old
        else [f"Baseline throughput: {45.12:.2f} tok/s", f"DFlash throughput:  {201.5:.2f} tok/s"]
    )
    lines += [
        f"Decoding speedup: {speedup:.2f}",
        f"Average Acceptance length: {tau:.2f}",
        f"Acceptance length histogram: {[f'{x * 100:.1f}%' for x in histogram]}",
    ]
    _rich_print(out, *lines)
    return out.getvalue()


def zlab_server(
    backend: str = "sglang", dataset: str = "humaneval", accept: float | None = 5.321
) -> str:
    """`_run_server`'s summary block (SGLang prints the accept length, vLLM does not)."""
    out = io.StringIO()
    lines = [
        f"[warmup] {1} requests ...",
        f"Running benchmark: {128} prompts, concurrency={1} ...",
        f"\n{'=' * 50}",
        f"Backend:          {backend}",
        f"Dataset:          {dataset}",
        f"Num prompts:      {128}",
        f"Concurrency:      {1}",
        f"Latency:          {95.04:.1f}s",
        f"Output tokens:    {131072}",
        f"Throughput:       {1379.123:,.2f} tok/s",
    ]
    if accept is not None:
        lines += [f"Accept length:    {accept:.3f}", f"Spec verify ct:   {24633}"]
    lines.append(f"{'=' * 50}")
    _rich_print(out, *lines)
    return out.getvalue()


def _generated(tpot: float, lengths: list[int], trees: bool = False) -> types.SimpleNamespace:
    """What `dflash_generate` (and, with round_trees, `ddtree_generate`) return."""
    import torch

    fields: dict[str, Any] = dict(
        output_ids=torch.arange(12, dtype=torch.long).reshape(1, 12),
        num_input_tokens=4,
        num_output_tokens=sum(lengths),
        time_to_first_token=0.05,
        time_per_output_token=tpot,
        acceptance_lengths=lengths,
        decode_rounds=len(lengths),
        stage_times={"draft": 0.1, "verify": 0.2, "commit": 0.01},
        round_timestamps=[0.1 * (i + 1) for i in range(len(lengths))],
    )
    if trees:
        fields["round_trees"] = None  # benchmark.py never asks for traces
    return types.SimpleNamespace(**fields)


def ddtree_run_data(dataset: str = "gsm8k", budgets: tuple[int, ...] = (16, 64)) -> dict[str, Any]:
    """`run_data` of DDTree's benchmark.py: baseline (block 1), dflash, ddtree_tbN per turn."""
    responses = []
    for turn in range(3):
        response = {
            "baseline": _generated(0.020, [1] * 6),
            "dflash": _generated(0.005, [6, 7, 5 + turn]),
        }
        for budget in budgets:
            response[f"ddtree_tb{budget}"] = _generated(
                0.004 - budget * 1e-6, [8, 9, 7 + turn], trees=True
            )
        responses.append(response)
    return {
        "responses": responses,
        "block_size": 16,
        "draft_attn_implementation": "flash_attention_2",
        "target_attn_implementation": "sdpa",
        "args": {
            "model_name_or_path": "Qwen/Qwen3-8B",
            "draft_name_or_path": "z-lab/Qwen3-8B-DFlash-b16",
            "block_size": None,
            "tree_budget": ",".join(str(b) for b in budgets),
            "dataset": dataset,
            "max_samples": 3,
            "max_new_tokens": 2048,
            "temperature": 0.0,
            "flash_attn": False,
            "disable_cpp_compact_cache": False,
            "save_path": f"runs/{dataset}__Qwen_Qwen3-8B__temp0.0__sdpa.pt",
        },
    }


def ddtree_pt(run_data: Any | None = None) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(ddtree_run_data() if run_data is None else run_data, buf)
    return buf.getvalue()


@dataclass
class BenchmarkMetrics:
    """SpecForge benchmarks/benchmarker/utils.py's dataclass, field for field."""

    latency: float
    output_throughput: float
    accept_length: float
    accuracy: float | None = None
    num_questions: int = 0
    num_valid_predictions: int = 0
    categorical_performance: dict[str, Any] | None = None


def specforge_results(skip_launch_server: bool = False, model: bool = True) -> dict[str, Any]:
    """bench_eagle3.py's `results` for --config-list 1,0,0,0 1,3,1,4 (or an external server)."""
    results: dict[str, Any] = {}
    if model:
        results["model"] = "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B"
    configs = [(1, None, None, None)] if skip_launch_server else [(1, 0, 0, 0), (1, 3, 1, 4)]
    for bench, n, base_tps, accept in (("mtbench", 80, 150.0, 3.1), ("gsm8k", 200, 160.0, 3.6)):
        results[bench] = []
        for batch_size, steps, topk, num_draft_tokens in configs:
            spec = steps != 0
            metrics = [
                BenchmarkMetrics(
                    latency=60.0,
                    output_throughput=base_tps * (accept * 0.8 if spec else 1.0) + run,
                    accept_length=accept + run / 10 if spec else 1.0,
                    accuracy=0.8 if bench == "gsm8k" else None,
                    num_questions=n,
                )
                for run in range(2)
            ]
            results[bench].append(
                dict(
                    batch_size=batch_size,
                    steps=steps,
                    topk=topk,
                    num_draft_tokens=num_draft_tokens,
                    metrics=[asdict(m) for m in metrics],
                    num_samples=n,
                )
            )
    return results


def specforge_json(**kw: Any) -> str:
    return json.dumps(specforge_results(**kw), indent=4)


def vllm_bench_serve(spec: bool = True) -> str:
    """vllm-project/vllm `vllm bench serve --save-result`: `main` builds `result_json` (setup,
    traffic, then `**benchmark_result`, `spec_decode_*` only while the server drafts), drops
    the per-request lists without --save-detailed, and `json.dump`s it."""
    result: dict[str, Any] = {
        "date": "20260101-120000",
        "endpoint_type": "vllm",
        "backend": "vllm",
        "label": None,
        "model_id": "Qwen/Qwen3-8B",
        "tokenizer_id": "Qwen/Qwen3-8B",
        "num_prompts": 80,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": 1,
        "duration": 41.25,
        "completed": 80,
        "failed": 0,
        "total_input_tokens": 9120,
        "total_output_tokens": 20480,
        "request_throughput": 1.94,
        "request_goodput": None,
        "output_throughput": 496.48,
        "total_token_throughput": 717.57,
        "max_output_tokens_per_s": 612.0,
        "max_concurrent_requests": 1,
        "mean_ttft_ms": 38.1,
        "median_ttft_ms": 37.5,
        "std_ttft_ms": 2.2,
        "p99_ttft_ms": 44.0,
    }
    if spec:
        result.update(
            spec_decode_acceptance_rate=48.1,
            spec_decode_acceptance_length=4.37,
            spec_decode_num_drafts=4686,
            spec_decode_draft_tokens=32802,
            spec_decode_accepted_tokens=15792,
            spec_decode_per_position_acceptance_rates=[0.91, 0.78, 0.62, 0.49, 0.36, 0.2, 0.11],
        )
    return json.dumps(result)


def speculators_acceptance_csv() -> str:
    """vllm-project/speculators `scripts/evaluate/evaluate.py`: its `CsvWriter` (csv.DictWriter,
    header with the first row) of `extract_spec_decode_metrics` per subset, counts as the
    float deltas of prometheus counters."""
    import csv

    rows = []
    for subset, drafts, accepted, per_pos in (
        ("HumanEval", 1200.0, 3300.0, [0.9, 0.75, 0.55, 0.35, 0.2, 0.1, 0.0]),
        ("math_reasoning", 800.0, 2640.0, [0.95, 0.85, 0.7, 0.5, 0.3, 0.2, 0.1]),
    ):
        spec: dict[str, Any] = {
            "num_drafts": drafts,
            "num_draft_tokens": drafts * 7,
            "num_accepted_tokens": accepted,
            "acceptance_length": 1 + accepted / drafts,
        }
        for i, rate in enumerate(per_pos):
            spec[f"acceptance_at_pos_{i}"] = rate
        spec["subset"] = subset
        rows.append(spec)
    columns = ["num_drafts", "num_draft_tokens", "num_accepted_tokens", "acceptance_length"]
    columns += [f"acceptance_at_pos_{i}" for i in range(7)]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["subset", *columns], extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
