"""liranringel/ddtree `benchmark.py --save-path runs/X.pt`: a `torch.save` of one dict.

The dict (`run_data` in that script)::

    {"responses": [ {"baseline": ns, "dflash": ns, "ddtree_tb16": ns, ...}, ... ],
     "block_size": 16,
     "draft_attn_implementation": "flash_attention_2",
     "target_attn_implementation": "sdpa",
     "args": vars(args)}   # dataset, temperature, tree_budget "16,32,...", max_new_tokens, ...

one response per prompt turn, each mapping a method to the `types.SimpleNamespace`
that `dflash_generate` / `ddtree_generate` return: `output_ids` (a tensor),
`num_input_tokens`, `num_output_tokens`, `time_to_first_token`,
`time_per_output_token`, `acceptance_lengths` (tokens committed per round, bonus
included), `decode_rounds`, `stage_times`, `round_timestamps` (and `round_trees`,
None unless traced). "baseline" is block size 1 (plain autoregressive decoding);
`ddtree_tbN` is DDTree with tree budget N (absent when run with `--flash-attn`).

Numbers follow the repository's `make_latex_table.py`: tau is the mean over
responses of each response's mean acceptance length, speedup the baseline's mean
time per output token over the method's.

Loading: `torch.load(weights_only=True)` with `types.SimpleNamespace` as the only
global allowed beyond torch's own tensor types; a file that needs any other global
is refused, never loaded with `weights_only=False`.
"""

from __future__ import annotations

import io
import math
import re
import types
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dflash_tui.evals.results.served.record import ServedEntry, ServedFormatError, ServedReport

FORMAT = "ddtree"
WRITER = "liranringel/ddtree benchmark.py (--save-path, torch.save)"
ALLOWED_GLOBALS = (types.SimpleNamespace,)  # everything else a pickle names is refused
_METHOD = re.compile(r"^ddtree_tb(?P<budget>\d+)$")
_UNSUPPORTED = re.compile(r"unsupported (?:global: )?GLOBAL (?P<name>[\w.]+)", re.IGNORECASE)


def detect(data: bytes) -> bool:
    """A torch.save zip archive (`<name>/data.pkl` inside)."""
    if data[:4] != b"PK\x03\x04":
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return any(n.endswith("/data.pkl") or n == "data.pkl" for n in archive.namelist())
    except zipfile.BadZipFile:
        return False


def load(data: bytes, path: Path) -> Any:
    """The saved object, unpickled with weights_only=True and only ALLOWED_GLOBALS added."""
    if not detect(data):
        raise ServedFormatError(
            path, "not a torch.save file (a zip archive holding data.pkl, as benchmark.py writes)"
        )
    try:
        import torch
    except ImportError:
        raise ServedFormatError(
            path, "reading a torch.save file needs torch (install the eval extra: dflash-tui[eval])"
        ) from None
    import pickle

    try:
        with torch.serialization.safe_globals(list(ALLOWED_GLOBALS)):
            return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as exc:
        m = _UNSUPPORTED.search(str(exc))
        if m is None:
            raise ServedFormatError(
                path, f"not a readable torch.save file: {_short(exc)}"
            ) from None
        raise ServedFormatError(
            path,
            f"refused: it needs the global {m.group('name')}, which is not allowed (loaded with "
            "weights_only=True; allowed beyond tensors: types.SimpleNamespace). A DDTree "
            "benchmark.py result holds only SimpleNamespaces, tensors, lists, dicts and numbers",
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ServedFormatError(path, f"not a readable torch.save file: {_short(exc)}") from None


def _short(exc: BaseException) -> str:
    """The line of torch's long message that says what went wrong."""
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    useful = [x for x in lines if not x.startswith(("Weights only load failed", "Check the doc"))]
    return (useful or lines or [type(exc).__name__])[0][:200]


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return sum(values) / len(values) if values else None


def _field(ns: Any, name: str, where: str, path: Path) -> Any:
    if not isinstance(ns, types.SimpleNamespace):
        raise ServedFormatError(path, f"{where}: a {type(ns).__name__}, not a SimpleNamespace")
    if not hasattr(ns, name):
        raise ServedFormatError(path, f"{where}: no {name!r} (has {', '.join(vars(ns))})")
    return getattr(ns, name)


def _method_stats(
    responses: list[Mapping[str, Any]], method: str, path: Path
) -> tuple[float | None, float | None, dict[str, Any]]:
    """(tau, mean time per output token, details) of one method over all responses."""
    taus, tpots, rounds, tokens = [], [], 0, 0
    for i, response in enumerate(responses):
        if method not in response:
            raise ServedFormatError(
                path, f"responses[{i}] has no {method!r} (it has {list(response)})"
            )
        where = f"responses[{i}][{method!r}]"
        ns = response[method]
        lengths = _field(ns, "acceptance_lengths", where, path)
        tpot = _field(ns, "time_per_output_token", where, path)
        if not isinstance(lengths, list) or not isinstance(tpot, (int, float)):
            raise ServedFormatError(
                path,
                f"{where}: acceptance_lengths must be a list and time_per_output_token a number",
            )
        if lengths:
            taus.append(sum(lengths) / len(lengths))
        tpots.append(float(tpot))
        rounds += len(lengths)
        tokens += int(getattr(ns, "num_output_tokens", 0) or 0)
    return _mean(taus), _mean(tpots), {"decode_rounds": rounds, "output_tokens": tokens}


def read(data: bytes, path: Path, *, task: str | None = None) -> ServedReport:
    """One entry per method (dflash, each tree budget); the baseline gives the speedups."""
    doc = load(data, path)
    if not isinstance(doc, dict) or "responses" not in doc:
        got = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise ServedFormatError(
            path, f"expected DDTree's run_data dict with 'responses', got {got}"
        )
    responses = doc["responses"]
    if not isinstance(responses, list) or not responses:
        raise ServedFormatError(path, "'responses' is empty: the benchmark saved no prompts")
    if not all(isinstance(r, dict) for r in responses):
        raise ServedFormatError(path, "'responses' must be a list of dicts (method -> result)")
    found_args = doc.get("args")
    args: dict[str, Any] = found_args if isinstance(found_args, dict) else {}
    block_size = doc.get("block_size")
    dataset = args.get("dataset") if isinstance(args.get("dataset"), str) else None
    name = dataset or task or path.stem
    notes = [] if dataset or task else [f"no args.dataset: task {name!r} from the file name"]
    base_tpot = None
    if "baseline" in responses[0]:
        base_tpot = _method_stats(responses, "baseline", path)[1]
    entries = []
    for method in responses[0]:
        if method == "baseline":
            continue
        tau, tpot, details = _method_stats(responses, method, path)
        budget = _METHOD.match(method)
        details["responses"] = len(responses)
        for key in ("max_samples", "max_new_tokens"):
            if args.get(key) is not None:
                details[key] = args[key]
        entries.append(
            ServedEntry(
                task=name,
                method="dflash" if method == "dflash" else method.replace("_", " "),
                tau=tau,
                throughput_tok_s=1 / tpot if tpot else None,
                speedup=base_tpot / tpot if base_tpot and tpot else None,
                baseline_tok_s=1 / base_tpot if base_tpot else None,
                settings={
                    "temperature": args.get("temperature"),
                    "block_size": block_size if isinstance(block_size, int) else None,
                    "tree_budget": int(budget.group("budget")) if budget else None,
                    "target_attn": doc.get("target_attn_implementation"),
                },
                details=details,
            )
        )
    if not entries:
        raise ServedFormatError(path, "only the baseline was measured: no drafter to import")
    model = args.get("model_name_or_path")
    draft = args.get("draft_name_or_path")
    return ServedReport(
        FORMAT,
        WRITER,
        tuple(entries),
        model=model if isinstance(model, str) else None,
        draft=draft if isinstance(draft, str) else None,
        notes=tuple(notes),
    )
