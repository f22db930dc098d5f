"""Tiny offline models: a real Qwen2 causal LM small enough to GRPO-train on a laptop CPU.

Tests, notebooks in smoke mode and the demo cannot download weights, so they build one here: a
Qwen2-architecture model with random weights, a byte-level tokenizer and a ChatML chat template,
saved to a folder that ``transformers.AutoModelForCausalLM.from_pretrained`` and
``grpo_lite.load_model`` both load. The same seed gives the same files.

``like="qwen2.5-0.5b"`` builds the same with a real model's shape, vocabulary size included, for
measuring speed and memory where there is no model hub (they do not depend on the weights' values).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import string
import tempfile
from pathlib import Path

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tokenizer(vocab_size: int | None = None):
    """A byte-level BPE tokenizer with no merges: every UTF-8 byte is one token.

    It has the shape of Qwen2's tokenizer (byte-level pre-tokenizer and decoder), so ``AutoTokenizer``,
    which picks ``Qwen2Tokenizer`` for a Qwen2 folder, reads it back unchanged, and any text round-trips.
    ``vocab_size`` pads the vocabulary with lowercase words ("aa", "ab", ...): encoding never produces them
    (there are no merges), but every id a model of that vocabulary samples decodes to text.

    >>> tokenizer = build_tokenizer(vocab_size=1000)
    >>> len(tokenizer), tokenizer.decode([999]), tokenizer.decode(tokenizer("2 + 2")["input_ids"])
    (1000, 'acm', '2 + 2')
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_symbols = sorted(pre_tokenizers.ByteLevel.alphabet(), key=ord)
    tokens = SPECIAL_TOKENS + byte_symbols
    if vocab_size is not None:
        if vocab_size < len(tokens):
            raise ValueError(f"vocab_size={vocab_size}: the byte-level tokenizer needs at least {len(tokens)} tokens")
        tokens += list(itertools.islice(_words(), vocab_size - len(tokens)))
    vocab = {token: i for i, token in enumerate(tokens)}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
        model_max_length=4096,
        model_input_names=["input_ids", "attention_mask"],  # a causal LM's inputs (transformers 4 adds token_type_ids)
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def save_tokenizer(tokenizer, folder: str | Path) -> None:
    """``tokenizer.save_pretrained(folder)``, its ``tokenizer_config.json`` in the form transformers 4 and 5 both read
    (:func:`grpo_lite.machine.stack.portable_tokenizer_config`)."""
    from ..machine import stack

    tokenizer.save_pretrained(folder)
    config_file = Path(folder) / "tokenizer_config.json"
    config = stack.portable_tokenizer_config(json.loads(config_file.read_text()))
    config_file.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")


def _words():
    """"aa", "ab", ..., "zz", "aaa", ...: lowercase words of two letters and more, shortest first."""
    for length in itertools.count(2):
        for letters in itertools.product(string.ascii_lowercase, repeat=length):
            yield "".join(letters)


def build_tiny_model(
    path: str | Path,
    *,
    like: str | None = None,
    dtype: str = "float32",
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
    max_position_embeddings: int = 2048,
) -> Path:
    """Write a random-weight Qwen2 model plus tokenizer to ``path`` and return the folder.

    ``like`` names a model the memory planner knows (``"qwen2.5-0.5b"``, ``"qwen2.5-1.5b"``, ...; see
    :data:`grpo_lite.machine.planner.KNOWN_MODELS`): its shape and vocabulary size replace the size arguments.
    ``dtype`` is the weights' dtype on disk (``"bfloat16"``, as real checkpoints ship, halves the files).

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
    vocab_size, head_dim, tied = None, hidden_size // num_heads, True
    if like is not None:
        from ..machine.planner import model_shape

        shape = model_shape(like)
        hidden_size, num_layers, num_heads, num_kv_heads = shape.hidden, shape.layers, shape.heads, shape.kv_heads
        intermediate_size, vocab_size, head_dim, tied = shape.intermediate, shape.vocab, shape.head_dim, shape.tied
    tokenizer = build_tokenizer(vocab_size)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_dim,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tied,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    # Seed a private generator state so building a model never disturbs the caller's RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    # Files are written aside, then moved in one by one with os.replace: another process reading the folder
    # (a second rank of a multi-process run) sees each file either complete or not yet there, never half written.
    scratch = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}-"))
    try:
        model.save_pretrained(scratch)
        save_tokenizer(tokenizer, scratch)
        (scratch / "grpo_lite_tiny.json").write_text(json.dumps({"seed": seed, "kind": "random"}) + "\n")
        for file in sorted(scratch.iterdir(), key=lambda f: f.name == "config.json"):  # config.json last
            os.replace(file, path / file.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return path
