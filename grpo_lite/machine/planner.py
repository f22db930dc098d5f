"""Will this GRPO run fit in GPU memory? An estimate of the peak, and the nearest config that fits.

The peak of one GRPO step on one GPU is the sum of:
  weights      the base model, 16-bit, or 4-bit linear layers; embeddings, lm_head and norms stay 16-bit
               through Unsloth, and become fp32 through transformers + bitsandbytes (PEFT's
               prepare_model_for_kbit_training upcasts every parameter that is not quantized); a vision-language
               model's vision tower and projector counted 16-bit (its image tokens are in the prompt's length)
  lora         LoRA weights, their gradients and two AdamW moments, all fp32 (16 bytes per parameter)
  activations  with gradient checkpointing: each layer's input kept, plus one layer recomputed in full and its
               backward (the step's peak); through PEFT, each LoRA layer also keeps its input cast to the adapters'
               fp32 and back to 16-bit (peft/tuners/lora/layer.py, ``_cast_input_dtype``, then autocast); a
               vision-language model's vision tower is checkpointed too, over every completion's copy of its images
               (``image_tokens`` of the prompt, each of ``patches_per_image_token`` patches)
  kv_cache     generation's key/value cache for num_generations sequences (or the vLLM pool when set)
  logits       per-token log-probs: on a GPU, TRL 1.15 projects through the LM head in tiles of
               4096 tokens x 32768 vocabulary entries and never holds the full logits
               (trl/kernels/chunked_logprob.py); ``logits="full"`` counts the full fp32 logits instead,
               as grpo_lite's CPU stand-in for that kernel (grpo_lite.training.trl_compat) materialises them
  overhead     CUDA context and allocator slack
Each is a first-order estimate: ``benchmarks/plan_vs_measured.py`` checks it against measured peaks, and
``benchmarks/plan_vs_allocated.py`` the GPU path against torch's allocation count (docs/benchmarks.md).
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table

from rewards.display import RichReport

from ..errors import UserError
from ..shapes import AnyOf, Declared, Exactly, Flag, Number, Text, Whole, check, optional
from .device import GB, this_gpu

# Memory per card in GiB as torch reports it (torch.cuda.get_device_properties(0).total_memory), which is
# what Unsloth prints as "Max memory": 14.74 on a Colab T4, 22.16 on an L4. The others are the cards'
# nominal sizes less the same ~2% the T4 and L4 lose.
GPUS = {"T4": 14.74, "RTX3060": 11.76, "L4": 22.16, "A10G": 22.05, "RTX3090": 23.55, "RTX4090": 23.55,
        "A100-40GB": 39.4, "A100": 79.15, "H100": 79.15}
CUDA_OVERHEAD_GB = 0.6
FOUR_BIT_BYTES = 0.5 * 1.07  # 4-bit weights plus blockwise quantization constants
LOGPROB_TILE = (4096, 32768)  # TRL 1.15: TOKEN_CHUNK_SIZE (trl/kernels/chunked_logprob.py) x _CHUNKED_LOGPROB_CHUNK_SIZE
PLANNED_BACKENDS = ("unsloth", "transformers")
LOGITS = ("chunked", "full")
# One layer recomputed under gradient checkpointing, at the peak of its backward, in activation-sized elements per
# token: (per hidden unit, per MLP unit). Through PEFT (transformers' backend, and plain TRL) measured on a CPU with
# torch's allocation count (benchmarks/plan_vs_allocated.py): 13 hidden-sized 16-bit tensors and 2 fp32 ones, 5
# MLP-sized 16-bit tensors and the fp32 copy of down_proj's input. Unsloth's fused LoRA kernels keep fewer
# (unsloth/kernels/fast_lora.py); its figure waits for a GPU measurement.
RECOMPUTED_LAYER = {"transformers": (17, 7), "unsloth": (8, 3)}

# Shapes of common models, since there is no hub access to read their configs.
# (hidden, layers, attention heads, key/value heads, head dim, MLP width, vocab, tied embeddings)
KNOWN_MODELS = {
    "qwen2.5-0.5b": (896, 24, 14, 2, 64, 4864, 151936, True),
    "qwen2.5-1.5b": (1536, 28, 12, 2, 128, 8960, 151936, True),
    "qwen2.5-3b": (2048, 36, 16, 2, 128, 11008, 151936, True),
    "qwen2.5-7b": (3584, 28, 28, 4, 128, 18944, 152064, False),
    "llama-3.2-1b": (2048, 16, 32, 8, 64, 8192, 128256, True),
    "llama-3.2-3b": (3072, 28, 24, 8, 128, 8192, 128256, True),
    "gemma-3-1b": (1152, 26, 4, 1, 256, 6912, 262144, True),
}


class PlanError(UserError, ValueError):
    """The model or GPU cannot be read; the message says what is accepted."""


# What each argument of plan() may be: a refused one is named with its fix, before anything is estimated.
PLAN_ARGUMENTS = {
    "gpu": Declared(AnyOf((Text(), Number(low=0, low_open=True), Exactly(math.inf))),
                    f"give a GPU's name ({', '.join(GPUS)}) or its memory in GB (inf: the estimate alone, with no card)"),
    "num_generations": Declared(Whole(low=2), "GRPO compares completions within a group, so use 2 or more"),
    "max_prompt_tokens": Declared(Whole(low=1), "give the longest prompt in tokens, 1 or more"),
    "max_completion_length": Declared(Whole(low=1), "give the tokens per completion, 1 or more"),
    "lora_rank": Declared(Whole(low=1), "give a LoRA rank of 1 or more"),
    "load_in_4bit": Flag(),
    "gpu_memory_utilization": Declared(optional(Number(low=0, high=1, low_open=True, high_open=True)),
                                       "give vLLM's share of the GPU between 0 and 1, or None"),
    "weight_bytes": Declared(Number(low=0, low_open=True), "give the bytes per weight (2 for 16-bit, 4 for fp32)"),
    "overhead_gb": Declared(Number(low=0), "give the GB CUDA itself takes, 0 or more"),
    "backend": Text(among=PLANNED_BACKENDS),
    "logits": Text(among=LOGITS),
    "image_tokens": Declared(Whole(low=0), "give the tokens a prompt's images make, 0 for none"),
}


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a decoder-only transformer that memory depends on."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    vision_params: int = 0  # a vision-language model's vision tower and projector
    vision_width: int = 0  # the vision tower's hidden size
    vision_intermediate: int = 0  # its MLP's width
    vision_layers: int = 0
    patches_per_image_token: float = 0.0  # Qwen-VL merges 2x2 patches into one token; Gemma 3 pools 16

    @property
    def linear_params_per_layer(self) -> int:
        attention = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return attention + 3 * self.hidden * self.intermediate

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied else 2)

    def lora_params(self, rank: int) -> int:
        """LoRA on q, k, v, o, gate, up, down: rank * (in + out) each."""
        q_out, kv_out = self.heads * self.head_dim, self.kv_heads * self.head_dim
        pairs = [(self.hidden, q_out), (self.hidden, kv_out), (self.hidden, kv_out), (q_out, self.hidden),
                 (self.hidden, self.intermediate), (self.hidden, self.intermediate), (self.intermediate, self.hidden)]
        return self.layers * rank * sum(i + o for i, o in pairs)


def _normalize(name: str) -> str:
    name = name.rsplit("/", 1)[-1].lower()
    for suffix in ("-bnb-4bit", "-unsloth", "-instruct", "-it"):
        name = name.removesuffix(suffix)
    return name


def model_shape(model_name_or_config: Any) -> ModelShape:
    """A shape from a built-in name, a local model folder, or a transformers config."""
    config = model_name_or_config
    if isinstance(config, (str, Path)):
        if _normalize(str(config)) in KNOWN_MODELS:
            return ModelShape(*KNOWN_MODELS[_normalize(str(config))])
        if not Path(config).is_dir():
            raise PlanError(
                f"plan: unknown model {str(config)!r}; pass a local model folder, a transformers config, or one of "
                f"{', '.join(KNOWN_MODELS)}"
            )
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(config)
    vision = _vision_tower(config)
    config = getattr(config, "get_text_config", lambda: config)()
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return ModelShape(
        hidden=config.hidden_size,
        layers=config.num_hidden_layers,
        heads=heads,
        kv_heads=getattr(config, "num_key_value_heads", None) or heads,
        head_dim=head_dim,
        intermediate=config.intermediate_size,
        vocab=config.vocab_size,
        tied=bool(getattr(config, "tie_word_embeddings", False)),
        **vision,
    )


_VISION_TOWER = re.compile(r"(^|\.)(visual|vision_tower|vision_model|multi_modal_projector)\.")  # Qwen-VL, Gemma 3, ...


def _vision_tower(config) -> dict[str, Any]:
    """The :class:`ModelShape` fields of the vision tower that ``config`` (a vision-language model's: it has a
    ``vision_config``) describes, none for a text model. Its parameters, with its projector's, are counted on a model
    built on the meta device (no memory); its width and depth are read where Qwen-VL (``embed_dim``: Qwen2-VL's
    ``hidden_size`` is the text model's width, ``depth``) and SigLIP (Gemma 3) keep them."""
    vision = getattr(config, "vision_config", None)
    if vision is None:
        return {}
    import torch
    from transformers import AutoModelForImageTextToText

    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config)
    # Qwen-VL merges patches into a token, Gemma 3 pools an image's into mm_tokens_per_image; Mllama's one image token
    # stands for every patch of its tiles, which its cross-attention layers read
    merge = getattr(vision, "spatial_merge_size", None)
    per_token = merge**2 if merge else (vision.image_size // vision.patch_size) ** 2 / getattr(
        config, "mm_tokens_per_image", 1 / getattr(vision, "max_num_tiles", 1))
    return {"vision_params": sum(p.numel() for name, p in model.named_parameters() if _VISION_TOWER.search(name)),
            "vision_width": getattr(vision, "embed_dim", None) or vision.hidden_size,
            "vision_intermediate": getattr(vision, "intermediate_size", None) or int(vision.embed_dim * vision.mlp_ratio),
            "vision_layers": getattr(vision, "depth", None) or vision.num_hidden_layers,
            "patches_per_image_token": per_token}


def _memory_gb(gpu: str | float) -> float:
    if isinstance(gpu, (int, float)):
        return float(gpu)
    if gpu.upper() not in {name.upper() for name in GPUS}:
        raise PlanError(f"plan: unknown gpu {gpu!r}; pass its memory in GB (gpu=24) or one of {', '.join(GPUS)}")
    return next(size for name, size in GPUS.items() if name.upper() == gpu.upper())


@dataclass(frozen=True)
class RunShape:
    """The settings of a run that memory depends on (the ones a suggestion may change)."""

    num_generations: int
    max_prompt_tokens: int
    max_completion_length: int
    lora_rank: int
    load_in_4bit: bool
    image_tokens: int = 0  # of max_prompt_tokens, the tokens a prompt's images make


def estimate(shape: ModelShape, run: RunShape, *, weight_bytes: float = 2.0, gpu_memory_utilization: float | None = None,
             memory_gb: float | None = None, overhead_gb: float = CUDA_OVERHEAD_GB, backend: str = "unsloth",
             logits: str = "chunked") -> dict[str, float]:
    """Peak memory parts in GiB for one GRPO step (see the module docstring for what each part is)."""
    if backend not in PLANNED_BACKENDS or logits not in LOGITS:
        raise PlanError(f"plan: backend={backend!r}, logits={logits!r}; use backend in {PLANNED_BACKENDS}, logits in {LOGITS}")
    linear = shape.layers * shape.linear_params_per_layer
    upcast = run.load_in_4bit and backend == "transformers"  # prepare_model_for_kbit_training: the rest in fp32
    other_bytes = 4.0 if upcast else weight_bytes
    weights = (linear * (FOUR_BIT_BYTES if run.load_in_4bit else weight_bytes) + shape.embedding_params * other_bytes
               + shape.vision_params * weight_bytes)
    sequences, length = run.num_generations, run.max_prompt_tokens + run.max_completion_length
    tokens = sequences * length
    act_bytes = weight_bytes  # activations are in the compute dtype (16-bit for 4-bit weights too)
    kept_inputs = shape.layers * tokens * shape.hidden * act_bytes
    per_hidden, per_mlp = RECOMPUTED_LAYER[backend]
    one_layer = tokens * (per_hidden * shape.hidden + per_mlp * shape.intermediate + 2 * shape.heads * length) * act_bytes
    # A vision tower runs over each completion's copy of its prompt's images. TRL has transformers make every input
    # embedding's output require grad (enable_input_require_grads, for PEFT under gradient checkpointing): the vision
    # tower's patch embedding is one, so its blocks are checkpointed as the language layers are, each block's input kept
    # for the backward and one block recomputed in it, counted as a language layer (its frozen weights keep no LoRA copies).
    patches = sequences * run.image_tokens * shape.patches_per_image_token
    kept_inputs += shape.vision_layers * patches * shape.vision_width * act_bytes
    one_block = patches * (per_hidden * shape.vision_width + per_mlp * shape.vision_intermediate) * act_bytes
    kv_cache = 2 * shape.layers * shape.kv_heads * shape.head_dim * tokens * act_bytes
    if gpu_memory_utilization is not None and memory_gb is not None:
        kv_cache = max(kv_cache, gpu_memory_utilization * memory_gb * GB - weights)
    scored = sequences * run.max_completion_length
    if logits == "full":  # logits and their log-softmax, fp32
        logits_bytes = 2 * scored * shape.vocab * 4
    else:  # one projection tile at a time, plus the fp32 gradient of the hidden states it reads
        tile = min(scored, LOGPROB_TILE[0]) * min(shape.vocab, LOGPROB_TILE[1]) * act_bytes
        logits_bytes = tile + scored * shape.hidden * 4
    return {
        "weights": weights / GB,
        "lora": 16 * shape.lora_params(run.lora_rank) / GB,
        "activations": (kept_inputs + max(one_layer, one_block)) / GB,
        "kv_cache": kv_cache / GB,
        "logits": logits_bytes / GB,
        "overhead": overhead_gb,
    }


@dataclass
class MemoryPlan(RichReport):
    """An estimate for one config on one GPU; ``suggestion`` is the nearest config that fits when this does not."""

    text_width = 100

    run: RunShape
    memory_gb: float
    parts: dict[str, float]
    suggestion: MemoryPlan | None = None
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def total_gb(self) -> float:
        return sum(self.parts.values())

    @property
    def fits(self) -> bool:
        return self.total_gb <= self.memory_gb

    def verdict(self) -> str:
        """One line: fits, or what to change so that it does."""
        if self.fits:
            return f"fits: {self.total_gb:.1f} of {self.memory_gb:.1f} GB"
        if self.suggestion is None:
            return f"does not fit ({self.total_gb:.1f} of {self.memory_gb:.1f} GB); use a smaller model or a bigger GPU"
        change = ", ".join(f"{k} {old} -> {new}" for k, (old, new) in self.changes.items())
        return (f"does not fit ({self.total_gb:.1f} of {self.memory_gb:.1f} GB); nearest config that fits "
                f"({self.suggestion.total_gb:.1f} GB): {change}")

    def __rich__(self) -> Group:
        run = self.run
        title = (f"peak memory: {run.num_generations} generations of {run.max_prompt_tokens}+"
                 f"{run.max_completion_length} tokens, LoRA rank {run.lora_rank}, "
                 f"{'4-bit' if run.load_in_4bit else '16-bit'} weights")
        table = Table()
        table.add_column("part")
        table.add_column("GB", justify="right")
        for name, value in self.parts.items():
            table.add_row(name, f"{value:.2f}")
        table.add_row("total", f"{self.total_gb:.2f}", style="bold")
        return Group(title, table, self.verdict())


def _halvings(value: int, floor: int) -> list[int]:
    """value, value/2, ... down to floor (value itself even when below floor)."""
    values = [value]
    while values[-1] // 2 >= floor:
        values.append(values[-1] // 2)
    return values


def _cost(run: RunShape, candidate: RunShape) -> float:
    """How far a candidate is from what was asked: halvings made, plus one for switching to 4-bit."""
    steps = sum(math.log2(getattr(run, f) / getattr(candidate, f)) for f in ("num_generations", "max_completion_length", "lora_rank"))
    return steps + (candidate.load_in_4bit and not run.load_in_4bit)


def plan(
    model_name_or_config: Any,
    gpu: str | float = "T4",
    num_generations: int = 8,
    max_prompt_tokens: int = 256,
    max_completion_length: int = 512,
    lora_rank: int = 16,
    load_in_4bit: bool = True,
    *,
    gpu_memory_utilization: float | None = None,
    weight_bytes: float = 2.0,
    overhead_gb: float = CUDA_OVERHEAD_GB,
    backend: str = "unsloth",
    logits: str = "chunked",
    image_tokens: int = 0,
) -> MemoryPlan:
    """Estimate the peak memory of a GRPO run and, when it does not fit, the nearest config that does.

    >>> result = plan("Qwen2.5-3B", gpu="T4", num_generations=16, max_completion_length=2048)
    >>> result.fits, result.changes
    (False, {'num_generations': (16, 8)})

    gpu: a name from ``GPUS`` or memory in GB. ``gpu_memory_utilization``: the share vLLM reserves
    (Unsloth ``fast_inference``). ``weight_bytes``: 2 for 16-bit, 4 for the CPU backend's fp32.
    ``backend``: ``"unsloth"`` or ``"transformers"`` (bitsandbytes 4-bit upcasts the unquantized weights).
    ``logits``: ``"chunked"`` (TRL's GPU kernel) or ``"full"`` (the CPU stand-in).
    ``image_tokens``: of ``max_prompt_tokens``, those a vision-language model's prompt gives its images (the processor's
    count: 256 for a 448-pixel square through Qwen2.5-VL); its vision tower's activations grow with them.
    The suggestion lowers num_generations (not below 2), max_completion_length (not below 128), lora_rank
    (not below 4) or turns on 4-bit, making as few halvings as it can.
    """
    check(dict(gpu=gpu, num_generations=num_generations, max_prompt_tokens=max_prompt_tokens,
               max_completion_length=max_completion_length, lora_rank=lora_rank, load_in_4bit=load_in_4bit,
               gpu_memory_utilization=gpu_memory_utilization, weight_bytes=weight_bytes, overhead_gb=overhead_gb,
               backend=backend, logits=logits, image_tokens=image_tokens), PLAN_ARGUMENTS, PlanError, "plan")
    shape = model_shape(model_name_or_config)
    memory_gb = _memory_gb(gpu)
    run = RunShape(num_generations, max_prompt_tokens, max_completion_length, lora_rank, load_in_4bit, image_tokens)
    options = dict(weight_bytes=weight_bytes, gpu_memory_utilization=gpu_memory_utilization, memory_gb=memory_gb,
                   overhead_gb=overhead_gb, backend=backend, logits=logits)
    result = MemoryPlan(run, memory_gb, estimate(shape, run, **options))
    if result.fits:
        return result
    candidates = [
        RunShape(g, max_prompt_tokens, c, r, q, image_tokens)
        for g, c, r, q in itertools.product(
            _halvings(num_generations, 2), _halvings(max_completion_length, 128), _halvings(lora_rank, 4),
            sorted({load_in_4bit, True}),
        )
    ]
    fitting = [MemoryPlan(c, memory_gb, estimate(shape, c, **options)) for c in candidates]
    fitting = [p for p in fitting if p.fits]
    if fitting:
        best = min(fitting, key=lambda p: (_cost(run, p.run), -p.total_gb))
        result.suggestion = best
        result.changes = {f: (getattr(run, f), getattr(best.run, f)) for f in run.__dataclass_fields__
                          if getattr(run, f) != getattr(best.run, f)}
    return result


def card_memory_gb() -> float:
    """This machine's GPU memory in GiB, as torch reports it."""
    gpu = this_gpu()
    if gpu is None:
        raise PlanError("plan: no CUDA GPU here; pass the card's memory (gpu=15) or name (gpu='T4')")
    return gpu.memory_gb


def training_memory_gb(model_name_or_config: Any, memory_gb: float | None = None, *, num_generations: int = 8,
                       max_prompt_tokens: int = 256, max_completion_length: int = 512, lora_rank: int = 16) -> tuple[float, float]:
    """What Unsloth 4-bit training takes beside a colocated vLLM engine (whose pool holds the weights and the
    KV cache), and the card's memory, both in GiB. ``memory_gb`` defaults to this machine's GPU."""
    card_gb = card_memory_gb() if memory_gb is None else memory_gb
    run = RunShape(num_generations, max_prompt_tokens, max_completion_length, lora_rank, True)
    parts = estimate(model_shape(model_name_or_config), run)
    return sum(parts.values()) - parts["weights"] - parts["kv_cache"], card_gb
