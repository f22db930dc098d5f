"""What Unsloth and 4-bit buy on a GPU: plain TRL + PEFT in 16-bit against grpo-lite's backends.

Each variant runs in its own process (fresh CUDA memory; Unsloth patches libraries on import) on a
random-weight model with a real architecture (no hub access is needed), num_generations 8 and a forced
completion length, for a few steps:

    trl_16bit            plain TRL GRPOTrainer + PEFT LoRA, 16-bit weights (bf16, fp16 on a T4): the baseline
    grpo_lite_bnb4      grpo_lite.load_model(backend="transformers"), bitsandbytes 4-bit
    grpo_lite_unsloth   grpo_lite.load_model(backend="unsloth"), 4-bit, Unsloth gradient checkpointing

Reported per variant: peak GPU memory (``torch.cuda.max_memory_allocated``) beside the memory planner's estimate for
the same run, seconds per step (median, and the range over the steps after the first), training tokens/s, generation
tokens/s, and generation against the memory-bandwidth limit (bytes of weights read per decoding step vs the card's
measured copy bandwidth). Ratios are to the baseline measured in the same run. The plain-TRL and bitsandbytes
variants run without Unsloth imported (it patches transformers, TRL and PEFT as it is imported), as a machine
without it would.

    python benchmarks/gpu_compare.py --shape qwen2.5-1.5b --steps 4 --completion-tokens 256 --write-docs
    python benchmarks/gpu_compare.py --dry-run      # CPU, tiny shape: checks the script end to end
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ("tiny", "qwen2.5-0.5b", "qwen2.5-1.5b")  # "tiny": grpo_lite's CPU model; the others: the planner's shapes
GPU_VARIANTS = ["trl_16bit", "grpo_lite_bnb4", "grpo_lite_unsloth"]
DRY_RUN_VARIANTS = ["trl_16bit", "grpo_lite_cpu"]
LORA_RANK = 16


def build_random_model(shape: str, folder: Path) -> Path:
    """A random-weight Qwen2 with the named shape (vocabulary included), saved in bf16 with a tokenizer."""
    from grpo_lite.model.tiny import build_tiny_model

    if shape == "tiny":
        return build_tiny_model(folder)
    return build_tiny_model(folder, like=shape, dtype="bfloat16")


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) / 100 for c in completions]


def run_variant(variant: str, model_dir: Path, out_dir: Path, steps: int, tokens: int, gpu: bool) -> dict:
    """Train ``steps`` GRPO steps with ``variant`` and measure it (runs inside the child process)."""
    import torch

    from grpo_lite import load_builtin, load_model, prepare_dataset, read_metrics, train

    if gpu:
        torch.cuda.reset_peak_memory_stats()
    options = dict(
        max_steps=steps, num_generations=8, per_device_train_batch_size=8, max_completion_length=tokens,
        generation_kwargs={"min_new_tokens": tokens}, learning_rate=1e-6, logging_steps=1, save_strategy="no",
    )
    dataset = prepare_dataset(load_builtin("arithmetic")[:64])
    if variant == "trl_16bit":
        model, tokenizer = _plain_trl(model_dir, dataset, out_dir, options, gpu)
    else:
        backend = {"grpo_lite_bnb4": "transformers", "grpo_lite_unsloth": "unsloth", "grpo_lite_cpu": "cpu"}[variant]
        model, tokenizer = load_model(str(model_dir), backend=backend, load_in_4bit=gpu, lora_rank=LORA_RANK)
        preset = "auto" if gpu else "cpu-smoke"  # auto: bf16 or fp16 by the card's compute capability
        if gpu:
            options.update(optim="adamw_torch")  # the baseline's optimizer, whatever the preset picks
        train(model, tokenizer, dataset, [length_reward], preset=preset, output_dir=out_dir, dashboard=False, **options)
    records = read_metrics(out_dir)[1:] or read_metrics(out_dir)  # the first step includes warm-up
    step_times = [r["step_time"] for r in records]
    step_time = statistics.median(step_times)
    train_tokens = statistics.median(b["num_tokens"] - a["num_tokens"] for a, b in zip(records, records[1:])) if len(records) > 1 else records[0]["num_tokens"]
    result = {"variant": variant, "seconds_per_step": step_time, "step_time_range": [min(step_times), max(step_times)],
              "train_tokens_per_s": train_tokens / step_time, "planned_gb": _planned_gb(variant, model_dir, dataset, tokenizer, options, gpu)}
    result.update(_generation_speed(model, tokenizer, tokens, gpu))
    if gpu:
        result["peak_gpu_gb"] = torch.cuda.max_memory_allocated() / 2**30
    else:
        import resource

        result["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return result


def _planned_gb(variant: str, model_dir: Path, dataset, tokenizer, options: dict, gpu: bool) -> float:
    """The memory planner's estimate for this variant's run (on a CPU: fp32 weights, full logits, no CUDA overhead)."""
    from grpo_lite import plan
    from grpo_lite.data.prepare import prompt_lengths
    from grpo_lite.machine.planner import CUDA_OVERHEAD_GB

    estimate = plan(str(model_dir), gpu=float("inf"), num_generations=options["per_device_train_batch_size"],
                    max_prompt_tokens=max(prompt_lengths(dataset, tokenizer)), max_completion_length=options["max_completion_length"],
                    lora_rank=LORA_RANK, load_in_4bit=gpu and variant != "trl_16bit",
                    backend="unsloth" if variant == "grpo_lite_unsloth" else "transformers", weight_bytes=2 if gpu else 4,
                    logits="chunked" if gpu else "full", overhead_gb=CUDA_OVERHEAD_GB if gpu else 0.0)
    return estimate.total_gb


def baseline_dtype(gpu: bool):
    """The plain-TRL baseline's weights: the card's 16-bit dtype (fp16 on a T4, which has no bf16), fp32 on CPU."""
    import torch

    from grpo_lite.machine.device import half_dtype

    return half_dtype() if gpu else torch.float32


def _plain_trl(model_dir, dataset, out_dir, options, gpu):
    """The recipe's standard setup: transformers model in 16-bit (bf16 where the card has it), TRL GRPOTrainer with
    a PEFT LoRA config."""
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_lite.training.trl_compat import enable_cpu_logprobs

    enable_cpu_logprobs()
    dtype = baseline_dtype(gpu)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, device_map={"": 0} if gpu else None)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    lora = LoraConfig(r=16, lora_alpha=32, task_type="CAUSAL_LM",
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    from grpo_lite.monitor.metrics import MetricsLog

    config = GRPOConfig(output_dir=str(out_dir), bf16=dtype == torch.bfloat16, fp16=dtype == torch.float16, use_cpu=not gpu, beta=0.04, report_to="none",
                        gradient_checkpointing=gpu, **options)
    trainer = GRPOTrainer(model=model, reward_funcs=[length_reward], args=config, train_dataset=dataset,
                          processing_class=tokenizer, peft_config=lora, callbacks=[MetricsLog(out_dir)])
    trainer.train()
    return trainer.model, tokenizer


def _generation_speed(model, tokenizer, tokens: int, gpu: bool) -> dict:
    """Decode 8 sequences of exactly ``tokens`` new tokens; compare with the bandwidth bound."""
    import torch

    device = "cuda" if gpu else "cpu"
    prompt = tokenizer(["What is 12 + 30?"] * 8, return_tensors="pt").to(device)
    generate = dict(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=True, pad_token_id=tokenizer.pad_token_id)
    model.eval()
    with torch.no_grad():
        model.generate(**prompt, **{**generate, "max_new_tokens": 4, "min_new_tokens": 4})
        _sync(gpu)
        start = time.perf_counter()
        model.generate(**prompt, **generate)
        _sync(gpu)
    seconds = time.perf_counter() - start
    result = {"gen_tokens_per_s": 8 * tokens / seconds}
    if gpu:
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        bandwidth = _copy_bandwidth()
        result["bandwidth_gb_s"] = bandwidth / 1e9
        result["gen_vs_bandwidth_limit"] = (tokens / seconds) / (bandwidth / weight_bytes)
    return result


def _sync(gpu: bool) -> None:
    if gpu:
        import torch

        torch.cuda.synchronize()


def _copy_bandwidth() -> float:
    """Device memory bandwidth in bytes/s, from timing a 1 GiB device-to-device copy (read + write)."""
    import torch

    source = torch.empty(2**28, dtype=torch.float32, device="cuda")
    target = torch.empty_like(source)
    target.copy_(source)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        target.copy_(source)
    torch.cuda.synchronize()
    return 2 * source.numel() * 4 * 10 / (time.perf_counter() - start)


def _table(results: list[dict]) -> str:
    base = results[0]
    memory_key = "peak_gpu_gb" if "peak_gpu_gb" in base else "peak_rss_gb"
    lines = [
        f"| variant | {memory_key} | planner GB | measured / planned | s/step (range) | train tok/s | gen tok/s | "
        "memory vs base | speed vs base | gen vs bandwidth limit |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['variant']} | failed: {r['error']} | | | | | | | | |")
            continue
        limit = f"{r['gen_vs_bandwidth_limit']:.1%}" if "gen_vs_bandwidth_limit" in r else "n/a"
        low, high = r["step_time_range"]
        lines.append(
            f"| {r['variant']} | {r[memory_key]:.2f} | {r['planned_gb']:.2f} | {r[memory_key] / r['planned_gb']:.2f} | "
            f"{r['seconds_per_step']:.3f} ({low:.3f}-{high:.3f}) | {r['train_tokens_per_s']:.0f} | "
            f"{r['gen_tokens_per_s']:.0f} | {r[memory_key] / base[memory_key]:.2f} | "
            f"{base['seconds_per_step'] / r['seconds_per_step']:.2f}x | {limit} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=SHAPES, default="qwen2.5-0.5b")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--completion-tokens", type=int, default=256)
    parser.add_argument("--variants", default=None, help="comma-separated subset")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny shape, 2 steps, 8 tokens")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    parser.add_argument("--child", nargs=3, metavar=("VARIANT", "MODEL_DIR", "OUT_JSON"), help=argparse.SUPPRESS)
    parser.add_argument("--without-unsloth", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.without_unsloth:
        sys.modules["unsloth"] = None  # importing grpo_lite would import it first on a GPU machine
    gpu = not args.dry_run
    if args.dry_run:
        args.shape, args.steps, args.completion_tokens = "tiny", 2, 8
    if args.child:
        variant, model_dir, out_json = args.child
        result = run_variant(variant, Path(model_dir), Path(out_json).parent / variant, args.steps, args.completion_tokens, gpu)
        Path(out_json).write_text(json.dumps(result))
        return

    variants = args.variants.split(",") if args.variants else (DRY_RUN_VARIANTS if args.dry_run else GPU_VARIANTS)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_random_model(args.shape, Path(tmp) / "model")
        for variant in variants:
            out_json = Path(tmp) / f"{variant}.json"
            command = [sys.executable, __file__, "--child", variant, str(model_dir), str(out_json),
                       "--shape", args.shape, "--steps", str(args.steps), "--completion-tokens", str(args.completion_tokens)]
            if args.dry_run:
                command.append("--dry-run")
            if variant != "grpo_lite_unsloth":
                command.append("--without-unsloth")
            proc = subprocess.run(command, capture_output=True, text=True)
            if proc.returncode == 0:
                results.append(json.loads(out_json.read_text()))
            else:
                results.append({"variant": variant, "error": proc.stderr.strip().splitlines()[-1][:120] if proc.stderr.strip() else f"exit {proc.returncode}"})
    table = _table(results)
    print(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.write_docs:
        _write_docs(table, args)


def _write_docs(table: str, args) -> None:
    from importlib.metadata import PackageNotFoundError, version

    import torch

    from benchmarks.docs import machine, replace_section

    def installed(name: str) -> str:
        try:
            return f"{name} {version(name)}"
        except PackageNotFoundError:
            return f"no {name}"

    device = f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})" if torch.cuda.is_available() else "no GPU"
    versions = ", ".join(installed(name) for name in ("unsloth", "bitsandbytes", "peft"))
    command = " ".join(["python", "benchmarks/gpu_compare.py", *sys.argv[1:]])
    section = (
        f"## GPU: plain TRL vs grpo-lite backends\n\n{device}; {machine()}, {versions}. Shape {args.shape} (random "
        f"weights), {args.steps} steps, 8 generations x {args.completion_tokens} forced tokens, LoRA rank {LORA_RANK}. "
        f"Command: `{command}`\n\n{table}\n"
    )
    replace_section("## GPU: plain TRL vs grpo-lite backends", section)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
