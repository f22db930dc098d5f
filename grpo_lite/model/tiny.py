"""Tiny offline models: a real causal LM small enough to GRPO-train on a laptop CPU.

Tests, notebooks in smoke mode and the demo cannot download weights, so they build one here: a model with
random weights, a byte-level tokenizer and a chat template, saved to a folder that
``transformers.AutoModelForCausalLM.from_pretrained`` and ``grpo_lite.load_model`` both load. The same seed
gives the same files. By default a Qwen2 with a ChatML template; ``family=`` builds the families users load
(:data:`FAMILIES`: Llama 3.2, Qwen3, Gemma 2, 3 and 3n, Mistral, Phi-3, SmolLM2 and 3, gpt-oss) with transformers'
own classes, their layer layout (Phi-3's fused projections, Gemma's soft-capping and norms, Gemma 3n's layers held in
lists, gpt-oss's experts kept as parameters) and the special tokens their chat templates write, to carry the
family's real ``chat_template``.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..run.settings import ConfigError

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
GEMMA_TOKENS = ("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>")
# The harmony format's tokens, which gpt-oss's template writes
HARMONY_TOKENS = ("<|endoftext|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>",
                  "<|call|>")


@dataclass(frozen=True)
class Family:
    """A model family as a tiny model of it is built: its transformers classes, the special tokens its chat template
    writes (the first ids of the vocabulary), which of them end a turn, pad and begin a text (``bos``: the tokenizer
    adds it, as the family's does), which others end generation too (``stops``: the ids the family's
    generation_config.json gives beside ``eos``), and its config's own settings."""

    config: str
    model: str
    specials: tuple[str, ...]
    eos: str
    pad: str | None = None
    bos: str | None = None
    tied: bool = True
    options: dict[str, Any] = field(default_factory=dict)
    stops: tuple[str, ...] = ()


FAMILIES = {
    "qwen2": Family("Qwen2Config", "Qwen2ForCausalLM", tuple(SPECIAL_TOKENS), eos="<|im_end|>", pad="<|endoftext|>"),
    "qwen3": Family("Qwen3Config", "Qwen3ForCausalLM", (*SPECIAL_TOKENS, "<think>", "</think>"), eos="<|im_end|>",
                    pad="<|endoftext|>"),
    "llama-3.2": Family("LlamaConfig", "LlamaForCausalLM", ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                        "<|end_header_id|>", "<|eot_id|>", "<|finetune_right_pad_id|>"), eos="<|eot_id|>",
                        pad="<|finetune_right_pad_id|>", bos="<|begin_of_text|>"),
    "smollm2": Family("LlamaConfig", "LlamaForCausalLM", tuple(SPECIAL_TOKENS), eos="<|im_end|>", pad="<|im_end|>"),
    "gemma-2": Family("Gemma2Config", "Gemma2ForCausalLM", GEMMA_TOKENS, eos="<end_of_turn>", pad="<pad>", bos="<bos>",
                      options={"query_pre_attn_scalar": 16, "sliding_window": 64}),
    "gemma-3": Family("Gemma3TextConfig", "Gemma3ForCausalLM", GEMMA_TOKENS, eos="<end_of_turn>", pad="<pad>", bos="<bos>",
                      options={"query_pre_attn_scalar": 16, "sliding_window": 64}),
    "mistral": Family("MistralConfig", "MistralForCausalLM", ("<unk>", "<s>", "</s>"), eos="</s>", bos="<s>", tied=False),
    "gemma-3n": Family("Gemma3nTextConfig", "Gemma3nForCausalLM", GEMMA_TOKENS, eos="<end_of_turn>", pad="<pad>", bos="<bos>",
                       options={"sliding_window": 64, "hidden_size_per_layer_input": 8, "laurel_rank": 4,
                                "altup_num_inputs": 2, "num_kv_shared_layers": 0}),
    # openai/gpt-oss-20b: <|return|> ends the answer; its generation_config.json stops on <|endoftext|> and <|call|> too
    "gpt-oss": Family("GptOssConfig", "GptOssForCausalLM", HARMONY_TOKENS, eos="<|return|>", pad="<|endoftext|>", tied=False,
                      options={"num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 64},
                      stops=("<|endoftext|>", "<|call|>")),
    "phi-3": Family("Phi3Config", "Phi3ForCausalLM", ("<unk>", "<s>", "</s>", "<|endoftext|>", "<|assistant|>", "<|system|>",
                    "<|end|>", "<|user|>"), eos="<|end|>", pad="<|endoftext|>", bos="<s>", tied=False),
    "smollm3": Family("SmolLM3Config", "SmolLM3ForCausalLM", (*SPECIAL_TOKENS, "<think>", "</think>"), eos="<|im_end|>",
                      pad="<|im_end|>"),
}


def build_tokenizer(vocab_size: int | None = None, *, family: str = "qwen2"):
    """A byte-level BPE tokenizer with no merges: every UTF-8 byte is one token, after ``family``'s special tokens.

    It has the shape of Qwen2's tokenizer (byte-level pre-tokenizer and decoder), so ``AutoTokenizer`` reads it back
    unchanged, and any text round-trips. A family whose tokenizer begins each text with a token (Llama's
    ``<|begin_of_text|>``, Gemma's ``<bos>``) adds it here too: a prompt whose chat template writes it already must be
    tokenized without special tokens, as TRL tokenizes one. ``vocab_size`` pads the vocabulary with lowercase words ("aa",
    "ab", ...): encoding never produces them (there are no merges), but every id a model of that vocabulary samples
    decodes to text.

    >>> tokenizer = build_tokenizer(vocab_size=1000)
    >>> len(tokenizer), tokenizer.decode([999]), tokenizer.decode(tokenizer("2 + 2")["input_ids"])
    (1000, 'acm', '2 + 2')
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    kind = FAMILIES[family]
    byte_symbols = sorted(pre_tokenizers.ByteLevel.alphabet(), key=ord)
    tokens = list(kind.specials) + byte_symbols
    if vocab_size is not None:
        if vocab_size < len(tokens):
            raise ConfigError(f"vocab_size={vocab_size}: the byte-level tokenizer needs at least {len(tokens)} tokens")
        tokens += list(itertools.islice(_words(), vocab_size - len(tokens)))
    vocab = {token: i for i, token in enumerate(tokens)}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    if kind.bos is not None:
        core.post_processor = processors.TemplateProcessing(single=f"{kind.bos} $A", pair=f"{kind.bos} $A {kind.bos} $B",
                                                            special_tokens=[(kind.bos, vocab[kind.bos])])
    named = {"eos_token": kind.eos, "pad_token": kind.pad, "bos_token": kind.bos}
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        **{key: token for key, token in named.items() if token is not None},
        additional_special_tokens=[token for token in kind.specials if token not in (kind.pad, kind.bos)],
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
    family: str = "qwen2",
    chat_template: str | None = None,
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
    """Write a random-weight model of ``family`` (:data:`FAMILIES`; a Qwen2 by default) plus tokenizer to ``path`` and
    return the folder. ``chat_template`` is the tokenizer's (default: ChatML): give a family its own.

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
    import transformers

    if family not in FAMILIES:
        raise ConfigError(f"build_tiny_model: family={family!r}; use one of {', '.join(FAMILIES)}")
    kind = FAMILIES[family]
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab_size, head_dim, tied = None, hidden_size // num_heads, kind.tied
    if like is not None:
        from ..machine.planner import model_shape

        shape = model_shape(like)
        hidden_size, num_layers, num_heads, num_kv_heads = shape.hidden, shape.layers, shape.heads, shape.kv_heads
        intermediate_size, vocab_size, head_dim, tied = shape.intermediate, shape.vocab, shape.head_dim, shape.tied
    tokenizer = build_tokenizer(vocab_size, family=family)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    config = getattr(transformers, kind.config)(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_dim,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tied,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **kind.options,
    )
    if hasattr(config, "vocab_size_per_layer_input"):  # Gemma 3n's per-layer embeddings: one for every token
        config.vocab_size_per_layer_input = config.vocab_size
    # Seed a private generator state so building a model never disturbs the caller's RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = getattr(transformers, kind.model)(config).to(getattr(torch, dtype))
    stops = [tokenizer.convert_tokens_to_ids(token) for token in kind.stops]
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, *stops] if stops else tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    # Files are written aside, then moved in one by one with os.replace: another process reading the folder
    # (a second rank of a multi-process run) sees each file either complete or not yet there, never half written.
    scratch = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}-"))
    try:
        model.save_pretrained(scratch)
        save_tokenizer(tokenizer, scratch)
        (scratch / "grpo_lite_tiny.json").write_text(json.dumps({"seed": seed, "kind": "random", "family": family}) + "\n")
        for file in sorted(scratch.iterdir(), key=lambda f: f.name == "config.json"):  # config.json last
            os.replace(file, path / file.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return path
