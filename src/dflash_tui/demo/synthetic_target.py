"""A tiny random-weight target model (``Qwen3ForCausalLM``) with a tokenizer, for tests
and benches of the cache builder; nothing is downloaded.

The model is built from a config by transformers and saved with
``save_pretrained``, so the builder loads it exactly as it loads a real target
directory. The tokenizer is a word-level one (``w0``, ``w1``, ... plus the
chat markers) with a ChatML template, enough for text prompts to go through
``apply_chat_template``. Needs the ``cache`` extra (transformers).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # transformers is imported where it is used: it is slow to load
    from transformers import Qwen3Config

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> "
    "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)
SPECIAL = ["<unk>", "<|im_start|>", "<|im_end|>", "user", "assistant", "system"]


def target_config(
    *,
    vocab_size: int = 64,
    hidden_size: int = 64,
    num_layers: int = 4,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 16,
    intermediate_size: int = 128,
    init_std: float = 0.02,
) -> Qwen3Config:
    """A small Qwen3 config; no end-of-sequence token, so generation runs its full length."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_dim,
        max_position_embeddings=4096,
        # transformers 4.x takes rope_theta; 5.x folds it into rope_parameters at run
        # time but no longer lists it in the signature
        rope_theta=10000.0,  # type: ignore[call-arg]
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        initializer_range=init_std,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )


def write_tokenizer(out_dir: Path, vocab_size: int) -> None:
    """A word-level tokenizer of exactly ``vocab_size`` entries with a ChatML template."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = SPECIAL + [f"w{i}" for i in range(vocab_size - len(SPECIAL))]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out_dir))


def write_target(
    out_dir: Path,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    tokenizer: bool = True,
    **config_knobs: Any,
) -> Path:
    """Write a random ``Qwen3ForCausalLM`` (and its tokenizer) to ``out_dir``; returns it."""
    from transformers import Qwen3ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = target_config(**config_knobs)
    torch.manual_seed(seed)
    # transformers wraps PreTrainedModel.to in a decorator whose typing loses `self`
    model = Qwen3ForCausalLM(config).to(dtype).eval()  # type: ignore[arg-type]
    model.generation_config.do_sample = False
    model.save_pretrained(str(out))
    if tokenizer:
        write_tokenizer(out, config.vocab_size)
    return out
