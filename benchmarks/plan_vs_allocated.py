"""The memory planner's GPU-path estimate against torch's own count of allocated memory, measured on a CPU.

A plain-TRL GRPO run in 16-bit (what benchmarks/gpu_compare.py's trl_16bit row trains on a GPU: bf16 weights, TRL's
GRPOTrainer with a PEFT LoRA config of rank 16, beta 0.04, gradient checkpointing, 8 completions of exactly
``--completion-tokens`` tokens) runs on the CPU under bf16 autocast, on a random model with a real shape's widths
and vocabulary and only a few layers. Torch's profiler reports every allocation and free of the CPU allocator; their
running sum is what ``torch.cuda.max_memory_allocated`` counts on a GPU. The peak above the weights is measured for
two depths; the difference gives what one more layer costs, and both extrapolate to the shape's full depth.

Two things differ from the GPU and are made as the GPU has them:
- TRL 1.15 computes log-probabilities with a Triton kernel (trl/kernels/chunked_logprob.py) that holds one
  4096 x 32768 tile of logits at a time; Triton needs a GPU, so :class:`TiledLogProb` does the same on the CPU, tile
  for tile, with fp32 per-token sums.
- At prefill, generate projects the last position of each sequence (a non-contiguous slice); the CPU's bmm then
  copies the LM head once per sequence (8 x hidden x vocab), which CUDA's does not: the LM head is given a contiguous
  input.

A vision-language shape (``--shape qwen2.5-vl-3b``) runs the same on a random Qwen2.5-VL, its language model and vision
tower of the real widths, each prompt with one ``--image-size`` image whose tokens the processor writes into it. Its
vision tower's depth is moved as the language model's is, from the shallowest of both, and extrapolated the same way.
Its attention runs as transformers runs it without flash attention, on a GPU too: one window (one image, in the
full-attention blocks) at a time; with flash attention, which takes them all in one call, its workspace is not counted.

    python benchmarks/plan_vs_allocated.py [--shape qwen2.5-1.5b] [--layers 2,4] [--write-docs]
    python benchmarks/plan_vs_allocated.py --shape qwen2.5-vl-3b [--vision-layers 2,4] [--image-size 448] [--write-docs]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs import machine, replace_section  # noqa: E402

TILE_TOKENS, TILE_VOCAB, ROWS = 4096, 32768, 128  # TRL 1.15: TOKEN_CHUNK_SIZE x _CHUNKED_LOGPROB_CHUNK_SIZE; rows per CPU block
LORA_RANK = 16
SEQUENCES = 8
PHASES = {"_generate_single_turn": "generate", "_get_per_token_logps_and_entropies": "log-probs (forward)"}
# The first GPU run (shared/gpu/first-run-2026-11-26.md): trl_16bit on the Qwen2.5-1.5B shape, 8 x 128 tokens,
# torch.cuda.max_memory_allocated read after the benchmark's own 2 x 1 GiB copy-bandwidth buffers were allocated.
FIRST_GPU_RUN = {"shape": "qwen2.5-1.5b", "tokens": 128, "peak_gb": 5.01, "planned_gb": 4.37, "probe_gb": 2.0}
QWEN_VL_TEMPLATE = Path(__file__).resolve().parents[1] / "tests" / "data" / "chat_templates" / "qwen2.5-vl.jinja"
# Qwen2.5-VL's vision tower as Qwen/Qwen2.5-VL-3B-Instruct's config.json gives it (vision_config; its out_hidden_size is
# the language model's width): attention within 112-pixel windows, over the whole image in every eighth block
QWEN2_5_VL_VISION = {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "hidden_act": "silu",
                     "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 112,
                     "fullatt_block_indexes": [7, 15, 23, 31]}
# Vision-language shapes: the language model's (grpo_lite.machine.planner.KNOWN_MODELS) and the vision tower's config
VISION_SHAPES = {"qwen2.5-vl-3b": ("qwen2.5-3b", QWEN2_5_VL_VISION)}


def tiled_log_prob():
    """:class:`TiledLogProb`, built where torch is imported."""
    import torch

    class TiledLogProb(torch.autograd.Function):
        """TRL's chunked log-probabilities with its memory: one [4096, 32768] tile in the compute dtype at a time,
        fp32 per-token sums, the hidden states' gradient in fp32 (trl/kernels/chunked_logprob.py)."""

        @staticmethod
        def forward(ctx, hidden, weight, bias, targets, temperature, chunk_size, softcap=None, logit_scale=1.0, outputs=("log_probs",)):
            dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else hidden.dtype
            n, vocab = hidden.shape[0], weight.shape[0]
            top, total, weighted, target = torch.full((n,), float("-inf")), torch.zeros(n), torch.zeros(n), torch.zeros(n)
            tile_buffer = torch.empty((min(n, TILE_TOKENS), TILE_VOCAB), dtype=dtype)
            for t0 in range(0, n, TILE_TOKENS):
                t1 = min(t0 + TILE_TOKENS, n)
                for v0 in range(0, vocab, TILE_VOCAB):
                    v1 = min(v0 + TILE_VOCAB, vocab)
                    tile = tile_buffer[: t1 - t0, : v1 - v0]
                    torch.mm(hidden[t0:t1].to(dtype), weight[v0:v1].to(dtype).t(), out=tile)
                    for r0 in range(0, t1 - t0, ROWS):
                        rows = slice(t0 + r0, min(t0 + r0 + ROWS, t1))
                        z = tile[r0 : r0 + ROWS].float() / temperature
                        new_top = torch.maximum(top[rows], z.max(-1).values)
                        scale, e = torch.exp(top[rows] - new_top), torch.exp(z - new_top[:, None])
                        total[rows] = total[rows] * scale + e.sum(-1)
                        weighted[rows] = weighted[rows] * scale + (e * z).sum(-1)
                        top[rows] = new_top
                        local = targets[rows] - v0
                        here = (local >= 0) & (local < v1 - v0)
                        picked = z.gather(-1, local.clamp(0, v1 - v0 - 1)[:, None]).squeeze(-1)
                        target[rows] = torch.where(here, picked, target[rows])
            log_z = top + torch.log(total)
            entropy = log_z - weighted / total
            ctx.save_for_backward(hidden, weight, targets, log_z, entropy)
            ctx.dtype, ctx.temperature = dtype, temperature
            return target - log_z, entropy, None, None, None

        @staticmethod
        def backward(ctx, grad_log_probs, grad_entropy, *_):
            hidden, weight, targets, log_z, entropy = ctx.saved_tensors
            n, vocab = hidden.shape[0], weight.shape[0]
            grad_hidden = torch.zeros(hidden.shape, dtype=torch.float32)
            tile_buffer = torch.empty((min(n, TILE_TOKENS), TILE_VOCAB), dtype=ctx.dtype)
            g_lp = torch.zeros(n) if grad_log_probs is None else grad_log_probs.float()
            g_h = torch.zeros(n) if grad_entropy is None else grad_entropy.float()
            for t0 in range(0, n, TILE_TOKENS):
                t1 = min(t0 + TILE_TOKENS, n)
                for v0 in range(0, vocab, TILE_VOCAB):
                    v1 = min(v0 + TILE_VOCAB, vocab)
                    w = weight[v0:v1].to(ctx.dtype)
                    tile = tile_buffer[: t1 - t0, : v1 - v0]
                    torch.mm(hidden[t0:t1].to(ctx.dtype), w.t(), out=tile)
                    for r0 in range(0, t1 - t0, ROWS):
                        rows = slice(t0 + r0, min(t0 + r0 + ROWS, t1))
                        z = tile[r0 : r0 + ROWS].float() / ctx.temperature
                        p = torch.exp(z - log_z[rows, None])
                        # d log p(target) / dz = onehot - p; d entropy / dz = -p (z - log_z + entropy)
                        grad = -p * g_lp[rows, None] - g_h[rows, None] * p * (z - log_z[rows, None] + entropy[rows, None])
                        local = targets[rows] - v0
                        here = ((local >= 0) & (local < v1 - v0)).nonzero().squeeze(-1)
                        grad[here, local[here]] += g_lp[rows][here]
                        tile[r0 : r0 + ROWS] = (grad / ctx.temperature).to(ctx.dtype)
                        grad_hidden[rows] += (tile[r0 : r0 + ROWS] @ w).float()
            return grad_hidden.to(hidden.dtype), None, None, None, None, None, None, None, None

    return TiledLogProb


MEASURE = """
import json, sys
sys.path.insert(0, {here!r})
from plan_vs_allocated import measure
print(json.dumps(measure(**json.loads(sys.argv[1]))))
"""


def measure(hidden: int, layers: int, heads: int, kv_heads: int, head_dim: int, intermediate: int, vocab: int,
            tokens: int, steps: int, vision: dict | None = None, image_size: int = 0, sequences: int = SEQUENCES) -> dict:
    """Torch's allocation peak of ``steps`` plain-TRL GRPO steps of ``sequences`` completions on a random Qwen2 of this shape, above its weights,
    overall and per phase (in GiB), and the longest prompt's tokens. With ``vision`` (a Qwen2.5-VL vision config), a
    Qwen2.5-VL of this language shape and that vision tower, each prompt with one ``image_size``-pixel square image (its
    tokens, as the processor makes them, counted too), LoRA on the language layers."""
    import trl.trainer.utils as trl_utils

    from grpo_lite import prepare_dataset
    from grpo_lite.data.prepare import prompt_lengths
    from grpo_lite.machine import stack

    trl_utils._ChunkedLogProbFunction = tiled_log_prob()
    if stack.newer("cpu_logprobs"):
        # TRL 1.16 scores only the completions' positions on Triton's devices (a GPU), and every position elsewhere
        # (trl/trainer/utils.py, add_fused_lm_head: compact = _use_triton(device)): the GPU path is what is measured
        trl_utils._use_triton = lambda device: True
    with tempfile.TemporaryDirectory() as folder:
        if vision is None:
            model, processor = _text_model(hidden, layers, heads, kv_heads, head_dim, intermediate, vocab)
        else:
            model, processor = _vision_model(hidden, layers, heads, kv_heads, head_dim, intermediate, vocab, vision, Path(folder))
        dataset = prepare_dataset(image_rows(image_size if vision else 0))
        counted = {"prompt_tokens": max(prompt_lengths(dataset, processor)), "image_tokens": 0}
        if vision:
            grid = processor.image_processor(images=[dataset[0]["image"]])["image_grid_thw"][0]
            counted["image_tokens"] = int(grid.prod()) // vision["spatial_merge_size"] ** 2
        return {**_measure_training(model, processor, dataset, tokens, steps, sequences, vision=vision is not None), **counted}


def _text_model(hidden, layers, heads, kv_heads, head_dim, intermediate, vocab):
    """A random bf16 Qwen2 of this shape and its tokenizer."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from grpo_lite.model.tiny import build_tokenizer

    tokenizer = build_tokenizer(vocab)
    tokenizer.padding_side = "left"
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim, tie_word_embeddings=True,
                         bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return _random(Qwen2ForCausalLM, config, tokenizer), tokenizer


def _vision_model(hidden, layers, heads, kv_heads, head_dim, intermediate, vocab, vision, folder):
    """A random bf16 Qwen2.5-VL of this language shape and vision tower, and its processor."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    from grpo_lite.model.tiny import FAMILIES

    processor = vision_processor(vocab, folder)
    tokenizer = processor.tokenizer
    # M-RoPE splits a head's rotary half over time, height and width as Qwen2.5-VL does (16, 24, 24 of 64)
    rope = {"type": "mrope", "mrope_section": [head_dim // 8, 3 * head_dim // 16, 3 * head_dim // 16]}
    text = dict(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim, tie_word_embeddings=True,
                bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, rope_scaling=rope)
    ids = {key: tokenizer.convert_tokens_to_ids(token) for key, token in FAMILIES["qwen2.5-vl"].vision.token_ids.items()}
    config = Qwen2_5_VLConfig(text_config=text, vision_config={**vision, "out_hidden_size": hidden}, tie_word_embeddings=True, **ids)
    model = _random(Qwen2_5_VLForConditionalGeneration, config, tokenizer)
    # random weights sample any token: an image token in a completion would have no image to match
    model.generation_config.suppress_tokens = list(ids.values())
    return model, processor


def vision_processor(vocab: int, folder: Path):
    """Qwen2.5-VL's processor over a byte-level tokenizer of ``vocab`` tokens, saved to ``folder`` and read back as a
    checkpoint's is, with the family's own chat template (tests/data/chat_templates)."""
    from transformers import AutoProcessor

    from grpo_lite.model.tiny import FAMILIES, build_tokenizer, save_processor, save_tokenizer

    tokenizer = build_tokenizer(vocab, family="qwen2.5-vl")
    tokenizer.chat_template = QWEN_VL_TEMPLATE.read_text()
    save_tokenizer(tokenizer, folder)
    save_processor(FAMILIES["qwen2.5-vl"].vision, tokenizer.chat_template, folder)
    processor = AutoProcessor.from_pretrained(folder)
    processor.tokenizer.padding_side = "left"
    return processor


def image_rows(image_size: int) -> list[dict]:
    """The measured rows: the arithmetic word problems, each with one ``image_size``-pixel square of noise where an image
    is measured (what its pixels hold does not change the memory)."""
    import numpy as np
    from PIL import Image

    from grpo_lite import load_builtin

    rows = load_builtin("arithmetic")[:64]
    if not image_size:
        return rows
    noise = np.random.default_rng(0)
    return [{**row, "image": Image.fromarray(noise.integers(0, 256, (image_size, image_size, 3), dtype=np.uint8))} for row in rows]


def _random(model_class, config, tokenizer):
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = model_class(config).to(torch.bfloat16)
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    head_forward = model.lm_head.forward
    model.lm_head.forward = lambda x: head_forward(x.contiguous())  # as CUDA's bmm reads the sliced prefill (module docstring)
    return model


def _measure_training(model, processor, dataset, tokens: int, steps: int, sequences: int, *, vision: bool) -> dict:
    from peft import LoraConfig
    from torch.profiler import ProfilerActivity, profile, record_function
    from trl import GRPOConfig, GRPOTrainer

    def length_reward(completions, **kwargs):
        return [len(c[0]["content"]) / 100 for c in completions]

    projections = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    # on a vision-language model the language layers only, as load_model's default (the vision MLP has the same names)
    targets = rf".*language_model.*\.({'|'.join(projections)})" if vision else projections
    lora = LoraConfig(r=LORA_RANK, lora_alpha=2 * LORA_RANK, task_type="CAUSAL_LM", target_modules=targets)
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(output_dir=out, bf16=True, use_cpu=True, beta=0.04, report_to="none", gradient_checkpointing=True,
                          max_steps=steps, num_generations=sequences, per_device_train_batch_size=sequences,
                          max_completion_length=tokens, generation_kwargs={"min_new_tokens": tokens}, learning_rate=1e-6,
                          logging_steps=1, save_strategy="no", disable_tqdm=True)
        trainer = GRPOTrainer(model=model, reward_funcs=[length_reward], args=args, processing_class=processor, peft_config=lora,
                              train_dataset=dataset)
        labelled = dict(PHASES)
        for method, label in PHASES.items():
            setattr(trainer, method, _labelled(getattr(trainer, method), label, record_function))
        trainer.accelerator.backward = _labelled(trainer.accelerator.backward, "backward", record_function)
        labelled["backward"] = "backward"
        weights = sum(t.untyped_storage().nbytes() for t in {t.untyped_storage().data_ptr(): t for t in
                      [*trainer.model.parameters(), *trainer.model.buffers()]}.values())
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
            trainer.train()
    events = profiler.profiler.kineto_results.events()
    allocations = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    spans = [(e.name(), e.start_ns(), e.end_ns()) for e in events if e.name() in labelled.values()]
    live, peak, by_phase = 0, 0, dict.fromkeys(labelled.values(), 0)
    for at, nbytes in allocations:
        live += nbytes
        peak = max(peak, live)
        for name, start, end in spans:
            if start <= at <= end:
                by_phase[name] = max(by_phase[name], live)
    gib = 2**30
    return {"weights_gb": weights / gib, "peak_above_weights_gb": peak / gib, "phases_gb": {k: v / gib for k, v in by_phase.items()}}


def _labelled(method, label, record_function):
    def run(*args, **kwargs):
        with record_function(label):
            return method(*args, **kwargs)

    return run


def measure_in_own_process(**shape) -> dict:
    done = subprocess.run([sys.executable, "-c", MEASURE.format(here=str(Path(__file__).resolve().parent)), json.dumps(shape)],
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"measuring {shape} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def planned(shape, layers: int, prompt_tokens: int, tokens: int, vision_layers: int = 0, image_tokens: int = 0,
            sequences: int = SEQUENCES) -> dict[str, float]:
    """The planner's parts (GiB) for the measured run of ``sequences`` completions at ``layers`` layers (and
    ``vision_layers`` vision blocks, each prompt with ``image_tokens`` of an image), as on a GPU less the CUDA overhead."""
    from dataclasses import replace

    from grpo_lite.machine.planner import RunShape, estimate

    run = RunShape(sequences, prompt_tokens, tokens, LORA_RANK, load_in_4bit=False, image_tokens=image_tokens)
    return estimate(replace(shape, layers=layers, vision_layers=vision_layers), run, weight_bytes=2, overhead_gb=0.0,
                    backend="transformers", logits="chunked")


def vision_language_config(name: str):
    """The transformers config of a :data:`VISION_SHAPES` model, at its full depth."""
    from transformers import Qwen2_5_VLConfig

    from grpo_lite.machine.planner import model_shape

    text, vision = VISION_SHAPES[name]
    shape = model_shape(text)
    return Qwen2_5_VLConfig(
        text_config=dict(hidden_size=shape.hidden, num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                         num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim, intermediate_size=shape.intermediate,
                         vocab_size=shape.vocab, tie_word_embeddings=shape.tied),
        vision_config={**vision, "out_hidden_size": shape.hidden}, tie_word_embeddings=shape.tied)


def _tower(vision: dict, depth: int) -> dict:
    """``vision`` at ``depth`` blocks, its last one attending over the whole image (as every eighth of Qwen2.5-VL's)."""
    return {**vision, "depth": depth, "fullatt_block_indexes": [depth - 1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default=FIRST_GPU_RUN["shape"], help=f"a planner shape, or a vision-language one: {', '.join(VISION_SHAPES)}")
    parser.add_argument("--layers", default="2,4", help="two depths to measure")
    parser.add_argument("--vision-layers", default="2,4", help="two vision tower depths to measure (vision-language shapes)")
    parser.add_argument("--image-size", type=int, default=448, help="pixels a side of each prompt's image (vision-language shapes)")
    parser.add_argument("--steps", type=int, default=2, help="the second step's backward holds AdamW's moments too")
    parser.add_argument("--completion-tokens", type=int, default=FIRST_GPU_RUN["tokens"])
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()

    from grpo_lite.machine.planner import CUDA_OVERHEAD_GB, RECOMPUTED_LAYER, model_shape

    vision = VISION_SHAPES[args.shape][1] if args.shape in VISION_SHAPES else None
    shape = model_shape(vision_language_config(args.shape) if vision else args.shape)
    depths = [int(n) for n in args.layers.split(",")]
    points = [(layers, 0) for layers in depths]
    if vision:
        vision_depths = [int(n) for n in args.vision_layers.split(",")]
        # each depth moved alone, from the shallowest model: what one more layer and one more vision block cost
        points = [(depths[0], vision_depths[0]), (depths[1], vision_depths[0]), (depths[0], vision_depths[1])]
    rows = []
    for layers, vision_layers in points:
        measured = measure_in_own_process(hidden=shape.hidden, layers=layers, heads=shape.heads, kv_heads=shape.kv_heads,
                                          head_dim=shape.head_dim, intermediate=shape.intermediate, vocab=shape.vocab,
                                          tokens=args.completion_tokens, steps=args.steps,
                                          **({"vision": _tower(vision, vision_layers), "image_size": args.image_size} if vision else {}))
        prompt_tokens, image_tokens = measured["prompt_tokens"], measured["image_tokens"]
        parts = planned(shape, layers, prompt_tokens, args.completion_tokens, vision_layers, image_tokens)
        rows.append((layers, vision_layers, measured, parts))
        print(f"{layers} layers{f', {vision_layers} vision blocks' if vision else ''}: measured {measured['peak_above_weights_gb']:.3f} "
              f"GiB above the weights (phases {', '.join(f'{k} {v:.3f}' for k, v in measured['phases_gb'].items())}), planned "
              f"{sum(parts.values()) - parts['weights']:.3f}", flush=True)
    base = rows[0][2]["peak_above_weights_gb"]
    per_layer = (rows[1][2]["peak_above_weights_gb"] - base) / (rows[1][0] - rows[0][0])
    per_block = (rows[2][2]["peak_above_weights_gb"] - base) / (rows[2][1] - rows[0][1]) if vision else 0.0
    fixed = base - rows[0][0] * per_layer - rows[0][1] * per_block
    full = planned(shape, shape.layers, prompt_tokens, args.completion_tokens, shape.vision_layers, image_tokens)
    extrapolated = full["weights"] + fixed + shape.layers * per_layer + shape.vision_layers * per_block
    planner_total = sum(full.values()) + CUDA_OVERHEAD_GB
    per_hidden, per_mlp = RECOMPUTED_LAYER["transformers"]
    command = (f"`python benchmarks/plan_vs_allocated.py --shape {args.shape} --layers {args.layers} "
               + (f"--vision-layers {args.vision_layers} --image-size {args.image_size} " if vision else "")
               + f"--steps {args.steps} --completion-tokens {args.completion_tokens} --write-docs` on {machine()}.")
    run = (f"{SEQUENCES} completions of {args.completion_tokens} tokens, prompts up to {prompt_tokens} tokens, LoRA rank {LORA_RANK}, "
           f"beta 0.04, gradient checkpointing, {args.steps} steps")
    if vision:
        lines = [
            "## Memory planner: a vision-language model's GPU path, against torch's allocation count (CPU)", "", command,
            f"The run of the section above on a random {args.shape} (Qwen2.5-3B's widths and vocabulary, Qwen2.5-VL's vision "
            f"tower), each prompt with one {args.image_size}x{args.image_size} image: {image_tokens} image tokens of "
            f"{image_tokens * vision['spatial_merge_size'] ** 2} patches, in the prompt's length ({run}; LoRA on the language "
            f"layers). Measured at {depths[0]} and {depths[1]} layers with {vision_depths[0]} vision blocks, and at {depths[0]} "
            f"layers with {vision_depths[1]}, the last block of each tower attending over the whole image.", "",
            "| layers | vision blocks | measured GiB | planned GiB | planned / measured | generate | log-probs (forward) | backward |",
            "|---|---|---|---|---|---|---|---|",
        ]
    else:
        lines = [
            "## Memory planner: the GPU path, against torch's allocation count (CPU)", "", command,
            f"Plain TRL in 16-bit as benchmarks/gpu_compare.py's trl_16bit row trains it on a GPU ({run}), on a random "
            f"{args.shape}-wide model (its vocabulary included) with {' and '.join(map(str, depths))} layers, under bf16 autocast "
            "on the CPU with TRL's log-prob tiles (see the script). Measured: the peak of torch's allocations above the weights, "
            "the count `torch.cuda.max_memory_allocated` keeps on a GPU. Planned: the planner's parts other than the weights, "
            "without the CUDA overhead.", "",
            "| layers | measured GiB | planned GiB | planned / measured | generate | log-probs (forward) | backward |",
            "|---|---|---|---|---|---|---|",
        ]
    for layers, vision_layers, measured, parts in rows:
        above = sum(parts.values()) - parts["weights"]
        phases = measured["phases_gb"]
        lines.append(f"| {layers} | {f'{vision_layers} | ' if vision else ''}{measured['peak_above_weights_gb']:.3f} | {above:.3f} | "
                     f"{above / measured['peak_above_weights_gb']:.2f} | {phases['generate']:.3f} | {phases['log-probs (forward)']:.3f} | "
                     f"{phases['backward']:.3f} |")
    costs = f"Each layer more costs {per_layer * 1024:.1f} MiB" + (f", each vision block more {per_block * 1024:.1f} MiB" if vision else "")
    depth = f"{shape.layers} layers" + (f" and {shape.vision_layers} vision blocks" if vision else "")
    lines += [
        "", f"{costs}; the rest, {fixed:.3f} GiB, is one layer{' or vision block' if vision else ''} recomputed and its "
        f"backward (the peak is in the backward), which the planner counts as {per_hidden} hidden-sized and {per_mlp} MLP-sized "
        f"16-bit values per {'token or patch' if vision else 'token'} through PEFT (grpo_lite/machine/planner.py, RECOMPUTED_LAYER). "
        f"At the full {depth}: {extrapolated:.2f} GiB allocated at the peak, weights included; "
        f"the planner says {sum(full.values()):.2f} GiB ({sum(full.values()) / extrapolated:.2f}x), "
        f"and {planner_total:.2f} GiB with its {CUDA_OVERHEAD_GB} GiB for the CUDA context and allocator slack, which "
        f"`max_memory_allocated` does not count: {planner_total / extrapolated:.2f}x the allocation peak in all.",
    ]
    if (args.shape, args.completion_tokens) == (FIRST_GPU_RUN["shape"], FIRST_GPU_RUN["tokens"]):
        lora_weights = 4 * model_shape(args.shape).lora_params(LORA_RANK) / 2**30
        held = full["weights"] + lora_weights + FIRST_GPU_RUN["probe_gb"]
        lines += [
            "", f"The first GPU run measured {FIRST_GPU_RUN['peak_gb']} GiB for this run against {FIRST_GPU_RUN['planned_gb']} GiB "
            "planned (shared/gpu/first-run-2026-11-26.md). benchmarks/gpu_compare.py read that peak after its copy-bandwidth "
            f"probe had allocated {FIRST_GPU_RUN['probe_gb']:.0f} GiB beside the trained model: {full['weights']:.2f} GiB of "
            f"weights, {lora_weights:.2f} GiB of LoRA weights and the probe make {held:.2f} GiB, so the peak it reported was "
            "the probe's. It now reads the training's peak before anything else runs, and what the card held (reserved "
            "memory and the CUDA context) beside it.",
        ]
    text = "\n".join(lines)
    print(text)
    if args.write_docs:
        replace_section(lines[0], text)


if __name__ == "__main__":
    main()
