"""DFlash drafter eval harness: the program shipped to GPU hosts.

It reads a drafter checkpoint in z-lab format (docs/design.md "Drafter checkpoint") and a
``dflash-cache/1`` directory of cached target hidden states (§4.3), runs the
drafter's block forward for every anchor (§4.4), and writes
``eval_results.json`` (schema ``dflash-eval/1``, §4.6) with the §4.5 metrics.

The directory imports only the standard library, torch and safetensors, and
only relative imports inside itself and the shared ``../common``, so it runs on a
host that has nothing but a python with torch. Two ways to start it:

* inside the installed package::

    python -m dflash_tui.shipped.harness --drafter DIR --cache DIR --out FILE

* as the bundle the console uploads to ``~/.cache/dflash-tui/harness/<sha256>/``
  (this folder, ``common/`` and one bootstrap ``__main__.py``: see
  ``evals/jobs/install.py``), run the bundle's directory; its name does not matter::

    python ~/.cache/dflash-tui/harness/<sha256> --drafter DIR --cache DIR --out FILE

Options: ``--device cuda:0|cpu`` (default: cuda:0 when available),
``--dtype auto|float32|bfloat16|float16`` (auto: bf16 on GPU, fp32 on CPU),
``--topk 1,4,8``, ``--budgets 4,8,16,32``, ``--batch-anchors N``,
``--max-anchors N``, ``--suite NAME``, ``--name NAME``,
``--per-anchor FILE`` (one JSON line per scored anchor: sample, position,
label ranks, streaks), ``--sliding bidirectional|causal`` (what ``sliding_attention`` layers see
inside the block; default bidirectional; a drafter config's own ``is_causal``
/ ``dflash_config.causal`` decides when present, see ``attention.py``).

``--cache`` may also be a SpecForge offline cache or a speculators data
directory, read as they are (``foreign.py``); they carry no target head
(``--target DIR``: a target model directory, of which only ``embed_tokens``
and ``lm_head`` are read) and record no layer ids (``--cache-layer-ids``, in
the writing tool's own convention).

Besides the means over every anchor, it walks the path greedy speculative
decoding takes on each sample (``greedy.py``): ``tau_greedy`` and
``tau_greedy_ddtree_b{b}``, exact where the cache holds the target's own greedy
continuation (``"greedy": {"labels": "target_greedy"}``, a cache from ``cache
build``), else on the cache's labels. ``--max-anchors`` subsamples the means
only: a path cannot be subsampled (each block starts where the last one
ended), so the walks score the anchors their paths visit beyond the subset.

Stdout carries one JSON object per line (``start``, ``progress``, ``retry``,
``note``, ``error``, ``done`` events); human messages go to stderr. Exit codes: 0 ok,
1 runtime failure (CUDA out of memory at batch 1, non-finite logits), 2 bad
input or a drafter that does not fit the cache.

Needs Python >= 3.10, torch >= 2.1 and safetensors >= 0.4 on the host.

This ``__init__`` deliberately imports nothing (not even torch), so the console
can locate the directory without loading the eval stack.
"""

SCHEMA = "dflash-eval/1"
CACHE_FORMAT = "dflash-cache/1"

__all__ = ["CACHE_FORMAT", "SCHEMA"]
