"""Tiny offline models: a real causal LM small enough to GRPO-train on a laptop CPU.

Tests, notebooks in smoke mode and the demo cannot download weights, so they build one here: a model with
random weights, a byte-level tokenizer and a chat template, saved to a folder that
``transformers.AutoModelForCausalLM.from_pretrained`` and ``grpo_lite.load_model`` both load. The same seed
gives the same files. By default a Qwen2 with a ChatML template; ``family=`` builds the families users load
(:data:`FAMILIES`: Llama 3.2, Qwen3, Gemma 2, 3 and 3n, Mistral, Phi-3, SmolLM2 and 3, gpt-oss, and the mixtures of
experts Qwen3-MoE, DeepSeek-V3, Llama 4, Mixtral and Granite 4) with transformers' own classes, their layer layout (Phi-3's
fused projections, Gemma's soft-capping and norms, Gemma 3n's layers held in lists, gpt-oss's experts kept as parameters,
DeepSeek-V3's shared expert, Granite 4's Mamba layers) and the special tokens their chat templates write, to carry the
family's real ``chat_template``.

Vision-language families (:data:`FAMILIES` entries with a :class:`Vision`: Qwen2.5-VL, Qwen2-VL, Gemma 3 with its
vision tower, Llama 3.2 Vision) are built the same way, as the image-text-to-text model transformers loads with
``AutoModelForImageTextToText``, plus the files ``AutoProcessor`` reads: the image processor's settings, the processor's
own and the tokenizer with the family's image tokens. Reading the processor back needs torchvision (docs/stacks.md).

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
class Vision:
    """What a vision-language family adds to its text model: the vision tower's config, the config's own settings, the
    ids of its image tokens (config key -> token), the tokenizer's named tokens (its processor reads them:
    ``tokenizer.image_token``), and the processor's files (``preprocessor_config.json``, ``processor_config.json``)."""

    vision_config: dict[str, Any]
    token_ids: dict[str, str]
    image_processor: dict[str, Any]
    processor: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    named_tokens: dict[str, str] = field(default_factory=dict)
    tokenizer_class: str | None = None  # where the family's processor accepts only its own tokenizer class
    text_width: str | None = None  # the vision config's key for the width it hands the text model, where it has one
    image_marker: str = "<|vision_start|><|image_pad|><|vision_end|>"  # what a chat template writes for one image


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
    vision: Vision | None = None


QWEN_VL_TOKENS = (*SPECIAL_TOKENS, "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
QWEN_VL_IDS = {"image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>",
               "vision_start_token_id": "<|vision_start|>", "vision_end_token_id": "<|vision_end|>"}
# Qwen2-VL's image processor at transformers' defaults for the class (Qwen2VLImageProcessor: 14-pixel patches, merged
# 2x2 into one image token, 2 frames per temporal patch): the settings Qwen2-VL's and Qwen2.5-VL's checkpoints ship
QWEN_VL_IMAGES = {"image_processor_type": "Qwen2VLImageProcessor", "patch_size": 14, "merge_size": 2,
                  "temporal_patch_size": 2, "image_mean": [0.48145466, 0.4578275, 0.40821073],
                  "image_std": [0.26862954, 0.26130258, 0.27577711]}
# The text model's rotary embedding split over time, height and width (M-RoPE): halves of a 16-wide head
QWEN_VL_ROPE = {"rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}}
GEMMA_3_IMAGE_TOKENS = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
LLAMA_3_TOKENS = ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                  "<|finetune_right_pad_id|>")
MISTRAL_TOKENS = ("<unk>", "<s>", "</s>")
# The experts' sizes of the mixture-of-experts families: 4 experts, 2 to a token, each of width 32; the number of experts
# is none of the other layers' widths, so a router is known by its output
EXPERTS = {"num_experts_per_tok": 2, "moe_intermediate_size": 32}
# Granite 4's hybrid stack (ibm-granite/granite-4.0-h-*): a Mamba-2 layer, then an attention layer, each with the shared
# MLP beside the experts
GRANITE_4_LAYERS = {"layer_types": ["mamba", "attention"], "num_local_experts": 4, "num_experts_per_tok": 2,
                    "shared_intermediate_size": 128, "mamba_n_heads": 4, "mamba_d_head": 32, "mamba_n_groups": 1,
                    "mamba_d_state": 16, "mamba_expand": 2, "mamba_chunk_size": 16, "position_embedding_type": "rope"}

FAMILIES = {
    "qwen2": Family("Qwen2Config", "Qwen2ForCausalLM", tuple(SPECIAL_TOKENS), eos="<|im_end|>", pad="<|endoftext|>"),
    "qwen3": Family("Qwen3Config", "Qwen3ForCausalLM", (*SPECIAL_TOKENS, "<think>", "</think>"), eos="<|im_end|>",
                    pad="<|endoftext|>"),
    "llama-3.2": Family("LlamaConfig", "LlamaForCausalLM", LLAMA_3_TOKENS, eos="<|eot_id|>", pad="<|finetune_right_pad_id|>",
                        bos="<|begin_of_text|>"),
    "smollm2": Family("LlamaConfig", "LlamaForCausalLM", tuple(SPECIAL_TOKENS), eos="<|im_end|>", pad="<|im_end|>"),
    "gemma-2": Family("Gemma2Config", "Gemma2ForCausalLM", GEMMA_TOKENS, eos="<end_of_turn>", pad="<pad>", bos="<bos>",
                      options={"query_pre_attn_scalar": 16, "sliding_window": 64}),
    "gemma-3": Family("Gemma3TextConfig", "Gemma3ForCausalLM", GEMMA_TOKENS, eos="<end_of_turn>", pad="<pad>", bos="<bos>",
                      options={"query_pre_attn_scalar": 16, "sliding_window": 64}),
    "mistral": Family("MistralConfig", "MistralForCausalLM", MISTRAL_TOKENS, eos="</s>", bos="<s>", tied=False),
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
    # Mixtures of experts, each in its family's layout: Qwen3-MoE's experts in every layer; DeepSeek-V3's dense first
    # layer, then routed experts beside a shared one, attention through low-rank projections (MLA); Llama 4's experts
    # in every second layer beside a shared expert; Mixtral's in every layer; Granite 4's hybrid (above)
    "qwen3-moe": Family("Qwen3MoeConfig", "Qwen3MoeForCausalLM", (*SPECIAL_TOKENS, "<think>", "</think>"), eos="<|im_end|>",
                        pad="<|endoftext|>", options={**EXPERTS, "num_experts": 4}),
    "deepseek-v3": Family("DeepseekV3Config", "DeepseekV3ForCausalLM",
                          ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
                           "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"),
                          eos="<｜end▁of▁sentence｜>", bos="<｜begin▁of▁sentence｜>", tied=False,
                          options={**EXPERTS, "n_routed_experts": 4, "n_shared_experts": 1, "first_k_dense_replace": 1,
                                   "n_group": 2, "topk_group": 1, "kv_lora_rank": 16, "q_lora_rank": 32,
                                   "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "head_dim": 8, "v_head_dim": 16}),
    "llama-4": Family("Llama4TextConfig", "Llama4ForCausalLM",
                      ("<|begin_of_text|>", "<|end_of_text|>", "<|header_start|>", "<|header_end|>", "<|eot|>",
                       "<|finetune_right_pad|>"), eos="<|eot|>", pad="<|finetune_right_pad|>", bos="<|begin_of_text|>",
                      tied=False, options={"num_local_experts": 4, "num_experts_per_tok": 1, "intermediate_size_mlp": 128,
                                           "interleave_moe_layer_step": 2, "no_rope_layers": [1, 1],
                                           "attention_chunk_size": 64}),
    "mixtral": Family("MixtralConfig", "MixtralForCausalLM", MISTRAL_TOKENS, eos="</s>", bos="<s>", tied=False,
                      options={"num_local_experts": 4, "num_experts_per_tok": 2}),
    "granite-4": Family("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM",
                        ("<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>", "<|pad|>", "<tool_call>", "</tool_call>"),
                        eos="<|end_of_text|>", pad="<|pad|>", options=GRANITE_4_LAYERS),
    # Vision-language models: a tiny vision tower (2 blocks, width 32) in the family's layout, images of 56 pixels a side
    "qwen2.5-vl": Family("Qwen2_5_VLConfig", "Qwen2_5_VLForConditionalGeneration", QWEN_VL_TOKENS, eos="<|im_end|>",
                         pad="<|endoftext|>", options=QWEN_VL_ROPE, vision=Vision(
                             {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "patch_size": 14,
                              "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 56,
                              "fullatt_block_indexes": [1]},
                             QWEN_VL_IDS, QWEN_VL_IMAGES, {"processor_class": "Qwen2_5_VLProcessor"},
                             tokenizer_class="Qwen2TokenizerFast", text_width="out_hidden_size")),
    "qwen2-vl": Family("Qwen2VLConfig", "Qwen2VLForConditionalGeneration", QWEN_VL_TOKENS, eos="<|im_end|>",
                       pad="<|endoftext|>", options=QWEN_VL_ROPE, vision=Vision(
                           {"depth": 2, "embed_dim": 32, "mlp_ratio": 2, "num_heads": 2,
                            "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2},
                           QWEN_VL_IDS, QWEN_VL_IMAGES, {"processor_class": "Qwen2VLProcessor"},
                           tokenizer_class="Qwen2TokenizerFast", text_width="hidden_size")),
    # Gemma 3 4B and up: a SigLIP tower whose patches are pooled to mm_tokens_per_image soft tokens (here 4, from a
    # 4x4 grid of 14-pixel patches; 256 from 896 pixels in google/gemma-3-4b-it), between <start_of_image> and
    # <end_of_image>
    "gemma-3-vision": Family("Gemma3Config", "Gemma3ForConditionalGeneration", (*GEMMA_TOKENS, *GEMMA_3_IMAGE_TOKENS.values()),
                             eos="<end_of_turn>", pad="<pad>", bos="<bos>",
                             options={"query_pre_attn_scalar": 16, "sliding_window": 64}, vision=Vision(
                                 {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                                  "num_attention_heads": 2, "image_size": 56, "patch_size": 14, "vision_use_head": False},
                                 {"boi_token_index": "<start_of_image>", "eoi_token_index": "<end_of_image>",
                                  "image_token_index": "<image_soft_token>"},
                                 {"image_processor_type": "Gemma3ImageProcessor", "size": {"height": 56, "width": 56},
                                  "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "do_pan_and_scan": False},
                                 {"processor_class": "Gemma3Processor", "image_seq_length": 4},
                                 options={"mm_tokens_per_image": 4}, named_tokens=GEMMA_3_IMAGE_TOKENS,
                                 image_marker="<start_of_image>")),
    # Llama 3.2 Vision (Mllama): a tiled vision encoder (one 56-pixel tile here; four of 560 in
    # meta-llama/Llama-3.2-11B-Vision-Instruct) whose output the text model reads through cross-attention layers (here its
    # second); the prompt holds one <|image|> token per image, and the processor's cross_attention_mask says which text
    # tokens see which image's tiles
    "mllama": Family("MllamaConfig", "MllamaForConditionalGeneration", (*LLAMA_3_TOKENS, "<|image|>"), eos="<|eot_id|>",
                     pad="<|finetune_right_pad_id|>", bos="<|begin_of_text|>", tied=False,
                     options={"cross_attention_layers": [1], "rope_scaling": {"rope_type": "default"}}, vision=Vision(
                         {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_global_layers": 1,
                          "num_attention_heads": 2, "image_size": 56, "patch_size": 14, "max_num_tiles": 1,
                          "intermediate_layers_indices": [0], "vision_output_dim": 64, "supported_aspect_ratios": [[1, 1]]},
                         {"image_token_index": "<|image|>"},
                         {"image_processor_type": "MllamaImageProcessor", "size": {"height": 56, "width": 56},
                          "max_image_tiles": 1, "image_mean": [0.48145466, 0.4578275, 0.40821073],
                          "image_std": [0.26862954, 0.26130258, 0.27577711]},
                         {"processor_class": "MllamaProcessor"}, image_marker="<|image|>")),
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
    _rewrite(Path(folder) / "tokenizer_config.json", stack.portable_tokenizer_config)


def save_model(model, folder: str | Path) -> None:
    """``model.save_pretrained(folder)``, its ``config.json`` in the form transformers 4 and 5 both read
    (:func:`grpo_lite.machine.stack.portable_model_config`)."""
    from ..machine import stack

    model.save_pretrained(folder)
    _rewrite(Path(folder) / "config.json", stack.portable_model_config)


def _rewrite(config_file: Path, portable) -> None:
    config_file.write_text(json.dumps(portable(json.loads(config_file.read_text())), indent=2, ensure_ascii=False) + "\n")


def _words():
    """"aa", "ab", ..., "zz", "aaa", ...: lowercase words of two letters and more, shortest first."""
    for length in itertools.count(2):
        for letters in itertools.product(string.ascii_lowercase, repeat=length):
            yield "".join(letters)


def chatml_with_images(image_marker: str) -> str:
    """ChatML that also reads a message's content as a list of parts, writing ``image_marker`` for each image part
    (the text a vision family's processor expands into the image's tokens), as vision-language templates do."""
    return (
        "{% for message in messages %}"
        "{{ '<|im_start|>' + message['role'] + '\n' }}"
        "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'image' %}{{ '" + image_marker + "' }}"
        "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}"
        "{{ '<|im_end|>' + '\n' }}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    )


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
    return the folder. ``chat_template`` is the tokenizer's (default: ChatML, writing a vision family's image tokens for
    each image part of a message): give a family its own.

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
    if like is not None and kind.vision is not None:
        raise ConfigError(f"build_tiny_model: like={like!r} gives a text model's shape, and {family} is a vision-language "
                          "family: leave like out")
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
    elif kind.vision is not None:
        tokenizer.chat_template = chatml_with_images(kind.vision.image_marker)
    text = dict(
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
    )
    text.update(kind.options)  # the family's own settings win: DeepSeek-V3's rotary head width is not hidden / heads
    if kind.vision is None:
        config = getattr(transformers, kind.config)(**text)
    else:
        vision = dict(kind.vision.vision_config)
        if kind.vision.text_width:
            vision[kind.vision.text_width] = hidden_size
        ids = {key: tokenizer.convert_tokens_to_ids(token) for key, token in kind.vision.token_ids.items()}
        config = getattr(transformers, kind.config)(text_config=text, vision_config=vision, tie_word_embeddings=tied,
                                                    **ids, **kind.vision.options)
    if hasattr(config, "vocab_size_per_layer_input"):  # Gemma 3n's per-layer embeddings: one for every token
        config.vocab_size_per_layer_input = config.vocab_size
    # Seed a private generator state so building a model never disturbs the caller's RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = getattr(transformers, kind.model)(config).to(getattr(torch, dtype))
    stops = [tokenizer.convert_tokens_to_ids(token) for token in kind.stops]
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, *stops] if stops else tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    if kind.vision is not None:  # random weights sample any token: an image token in a completion has no image to match
        model.generation_config.suppress_tokens = [tokenizer.convert_tokens_to_ids(token)
                                                   for token in kind.vision.token_ids.values()]
    # Files are written aside, then moved in one by one with os.replace: another process reading the folder
    # (a second rank of a multi-process run) sees each file either complete or not yet there, never half written.
    scratch = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}-"))
    try:
        save_model(model, scratch)
        save_tokenizer(tokenizer, scratch)
        if kind.vision is not None:
            save_processor(kind.vision, tokenizer.chat_template, scratch)
        (scratch / "grpo_lite_tiny.json").write_text(json.dumps({"seed": seed, "kind": "random", "family": family}) + "\n")
        for file in sorted(scratch.iterdir(), key=lambda f: f.name == "config.json"):  # config.json last
            os.replace(file, path / file.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return path


def save_processor(vision: Vision, chat_template: str, folder: Path) -> None:
    """Write the files ``AutoProcessor`` reads beside the tokenizer's, as a family's checkpoint ships them: the image
    processor's settings, the processor's own, its chat template (``chat_template.json``, which transformers 4 and 5 both
    read), and the tokenizer's class and named image tokens where the family's processor reads them."""
    processor_class = vision.processor["processor_class"]
    files = {"preprocessor_config.json": {**vision.image_processor, "processor_class": processor_class},
             "processor_config.json": vision.processor, "chat_template.json": {"chat_template": chat_template}}
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    if vision.tokenizer_class:
        config["tokenizer_class"] = vision.tokenizer_class
    config.update(vision.named_tokens)  # Gemma 3's tokenizer_config.json names its image tokens: tokenizer.boi_token
    if vision.named_tokens:
        config["extra_special_tokens"] = dict(vision.named_tokens)
    files["tokenizer_config.json"] = config
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n")
