"""Build a ``dflash-cache/1`` directory from a target model and prompts (docs/evals.md "Building a cache").

The program shipped to GPU hosts next to the eval harness: it loads a Hugging
Face transformers causal LM, reads prompts from JSONL, generates the target's
own greedy continuation of each, runs one forward over prompt plus
continuation and writes, per sample, ``input_ids`` [T], ``hidden_states``
[T, len(ids) * H] (``hidden_states[id + 1]`` of that forward for each layer id,
concatenated in id order; index 0 is the embedding output) and ``loss_mask``
[T] (1 on the continuation), then ``target_head.safetensors`` and, last,
``manifest.json``.

Two ways to start it:

* inside the installed package::

    python -m dflash_tui.shipped.cachebuild --target DIR --prompts FILE --out DIR \\
        --target-layer-ids 1,16,31 --max-new-tokens N [--device cuda:0|cpu]

  or, for one of the field's datasets as z-lab's benchmark formats and picks it
  (``datasets.py``; docs/evals.md "The protocol")::

    python -m dflash_tui.shipped.cachebuild --target DIR --dataset gsm8k [--data PATH] \\
        [--max-samples N | --num-prompts N] [--thinking] --out DIR --target-layer-ids 1,16,31

* as the bundle the console uploads to ``~/.cache/dflash-tui/cachebuild/<sha256>/``
  (this folder, ``common/`` and one bootstrap ``__main__.py``), run its directory::

    python ~/.cache/dflash-tui/cachebuild/<sha256> --target DIR ...

Resumable per sample: every file is written as ``NAME.part`` and renamed, a
finished sample file is kept and skipped when the same build runs again
(``build.json`` in the output records what the build is; a different build
into the same directory is refused), and ``manifest.json`` appears only once
every sample is there, so a half-built cache is never read as a cache. SIGTERM
(how ``dflash-tui cancel`` stops a job) ends it like Ctrl-C: no ``.part`` file
is left behind.

Stdout carries one JSON object per line (``start``, ``sample``, ``progress``,
``error``, ``done``); human messages go to stderr. Exit codes: 0 ok, 1 runtime
failure, 2 bad input.

Imports only the standard library, torch, safetensors and transformers (the
``cache`` extra; pyarrow or ``datasets`` only when ``--dataset`` reads rows), and only relative imports inside itself and the shared ``../common``. This ``__init__``
imports nothing, so the console can locate the directory cheaply.
"""

CACHE_FORMAT = "dflash-cache/1"
BUILD_FORMAT = "dflash-cachebuild/1"

__all__ = ["BUILD_FORMAT", "CACHE_FORMAT"]
