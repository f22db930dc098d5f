"""Tiny offline models: a real Qwen2 causal LM small enough to GRPO-train on a laptop CPU.

Tests, notebooks in smoke mode and the demo cannot download weights, so they build one here: a
Qwen2-architecture model with random weights, a byte-level tokenizer and a ChatML chat template,
saved to a folder that ``transformers.AutoModelForCausalLM.from_pretrained`` and
``grpo_lite.load_model`` both load. The same seed gives the same files.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tokenizer():
    """A byte-level BPE tokenizer with no merges: every UTF-8 byte is one token.

    It has the shape of Qwen2's tokenizer (byte-level pre-tokenizer and decoder), so ``AutoTokenizer``,
    which picks ``Qwen2Tokenizer`` for a Qwen2 folder, reads it back unchanged, and any text round-trips.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_symbols = sorted(pre_tokenizers.ByteLevel.alphabet(), key=ord)
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + byte_symbols)}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
        model_max_length=4096,
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def build_tiny_model(
    path: str | Path,
    *,
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
    max_position_embeddings: int = 2048,
) -> Path:
    """Write a random-weight Qwen2 model plus tokenizer to ``path`` and return the folder.

    >>> import tempfile
    >>> from transformers import AutoModelForCausalLM
    >>> folder = build_tiny_model(tempfile.mkdtemp())
    >>> AutoModelForCausalLM.from_pretrained(folder).config.model_type
    'qwen2'
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    # Seed a private generator state so building a model never disturbs the caller's RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    # Files are written aside, then moved in one by one with os.replace: another process reading the folder
    # (a second rank of a multi-process run) sees each file either complete or not yet there, never half written.
    scratch = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}-"))
    try:
        model.save_pretrained(scratch)
        tokenizer.save_pretrained(scratch)
        (scratch / "grpo_lite_tiny.json").write_text(json.dumps({"seed": seed, "kind": "random"}) + "\n")
        for file in sorted(scratch.iterdir(), key=lambda f: f.name == "config.json"):  # config.json last
            os.replace(file, path / file.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return path
