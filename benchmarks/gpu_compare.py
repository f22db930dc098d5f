"""What Unsloth, 4-bit weights and each generation engine buy on a GPU, measured in one run that reports each row as
it ends.

Training rows: ``--steps`` GRPO steps of 8 completions of exactly ``--completion-tokens`` tokens (min_new_tokens), on
a random-weight model with a real architecture's shape (no model hub is needed), LoRA rank 16:

    trl_16bit            plain TRL GRPOTrainer + PEFT LoRA, 16-bit weights (bf16; fp16 on a T4): the baseline
    grpo_lite_unsloth    grpo_lite.load_model(backend="unsloth"): 4-bit, Unsloth's gradient checkpointing
    grpo_lite_bnb4       grpo_lite.load_model(backend="transformers"): bitsandbytes 4-bit

Each reports the peak memory of its training (``torch.cuda.max_memory_allocated``, and what the card held at its
peak: reserved by torch's allocator plus the CUDA context) beside the memory planner's estimate for the same run,
seconds per step (median over the steps after the first, with their range) and training tokens/s.

Generation rows: the engines a user without vLLM can generate with, on the same 16-bit weights without LoRA, 8
sequences of exactly ``--completion-tokens`` new tokens, timed on a second call (the first one warms up, and
compiles where the engine compiles):

    gen_dynamic          transformers' generate with its dynamic cache: TRL's generation without vLLM
    gen_unsloth          Unsloth's fast generation: FastLanguageModel.for_inference, then generate
    gen_paged            transformers' continuous batching (paged cache) as TRL calls it with use_transformers_paged
                         (use_transformers_continuous_batching since TRL 1.14: trl/trainer/grpo_trainer.py,
                         ``generate_batch`` with max_memory_percent 0.5)
    gen_static_compile   transformers' generate with a static cache, which it compiles with torch.compile

Each reports generated tokens/s against the bandwidth limit: a decoding step reads every weight once, so 8 sequences
cannot go faster than 8 x (copy bandwidth measured on this device / bytes of weights) tokens/s.

Every row runs in its own process (its own CUDA memory; Unsloth patches libraries as it is imported, so the other
rows run without it, as on a machine without Unsloth) under its own time limit, killed with what it printed kept.
As each row ends, one line of JSON is printed: its measurements, or its whole error (the traceback) and the last
lines it printed, or that it ran out of time. Rows run in the order above (the baseline first); with ``--budget-s``,
a row that no longer fits is reported as not run. The tables follow at the end; ratios are to the first row of each
table, measured in the same run.

    python benchmarks/gpu_compare.py --shape qwen2.5-0.5b --steps 2 --completion-tokens 64 --write-docs
    python benchmarks/gpu_compare.py --dry-run      # CPU, tiny shape: every CPU row, end to end
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from datetime import UTC
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ("tiny", "qwen2.5-0.5b", "qwen2.5-1.5b")  # "tiny": grpo_lite's CPU model; the others: the planner's shapes
LORA_RANK = 16
SEQUENCES = 8  # completions per step, and sequences per generation call
TRAINING_ROWS = ("trl_16bit", "grpo_lite_unsloth", "grpo_lite_bnb4", "grpo_lite_cpu")
UNSLOTH_ROWS = ("grpo_lite_unsloth", "gen_unsloth")
# Time limit per row on a GPU, in priority order. From the first GPU run (H200, shared/gpu/first-run-2026-11-26.md):
# plain TRL at 6.7 s/step on the 1.5B shape with 128 tokens; Unsloth's first compile about 100 s (on disk once
# tests/gpu ran in the same call: tests/gpu/run.sh runs this last); the bitsandbytes row over 110 s for 3 steps of the
# 1.5B shape. The 0.5B shape with 2 steps of 64 tokens takes a fraction of those; generation rows load 16-bit weights
# in seconds, and the static cache's first call compiles.
# In priority order: the training rows first, the compiled static cache last (its compile did not finish in 34 s on
# the H200 of 2026-11-27)
GPU_ROWS = {"trl_16bit": 60, "grpo_lite_unsloth": 120, "grpo_lite_bnb4": 120, "gen_dynamic": 45, "gen_unsloth": 60,
            "gen_paged": 60, "gen_static_compile": 120}
DRY_RUN_ROWS = {"trl_16bit": 300, "grpo_lite_cpu": 300, "gen_dynamic": 300, "gen_paged": 300, "gen_static_compile": 300}
MIN_ROW_S = 20  # a row is not started with less time than this left in the budget
HEADING = "## GPU: plain TRL vs grpo-lite backends, and generation engines"
OUTPUT_KEPT = 60  # lines of a failed row's output kept in its JSON line


def build_random_model(shape: str, folder: Path) -> Path:
    """A random-weight Qwen2 with the named shape (vocabulary included), saved in bf16 with a tokenizer."""
    from grpo_lite.model.tiny import build_tiny_model

    if shape == "tiny":
        return build_tiny_model(folder)
    return build_tiny_model(folder, like=shape, dtype="bfloat16")


class PlantedFailure(RuntimeError):
    """Raised where ``--fail-in`` asks for it, to show how a failing row is reported."""


# ---- in the row's own process ----------------------------------------------------------------------------------


def run_row(row: str, model_dir: Path, out_dir: Path, steps: int, tokens: int, gpu: bool, fail: bool) -> dict:
    """Measure one row (in its own process)."""
    if row in TRAINING_ROWS:
        return _training_row(row, model_dir, out_dir, steps, tokens, gpu, fail)
    return _generation_row(row, model_dir, tokens, gpu, fail)


def _training_row(row: str, model_dir: Path, out_dir: Path, steps: int, tokens: int, gpu: bool, fail: bool) -> dict:
    import torch

    from grpo_lite import load_builtin, load_model, prepare_dataset, read_metrics, train

    options = dict(
        max_steps=steps, num_generations=SEQUENCES, per_device_train_batch_size=SEQUENCES, max_completion_length=tokens,
        generation_kwargs={"min_new_tokens": tokens}, learning_rate=1e-6, logging_steps=1, save_strategy="no",
    )
    dataset = prepare_dataset(load_builtin("arithmetic")[:64])

    def length_reward(completions, **kwargs):
        if fail:
            raise PlantedFailure(f"--fail-in {row}: the reward function raised")
        return [len(c[0]["content"]) / 100 for c in completions]

    if gpu:
        torch.cuda.reset_peak_memory_stats()
    if row == "trl_16bit":
        tokenizer = _train_plain_trl(model_dir, dataset, out_dir, options, length_reward, gpu)
    else:
        backend = {"grpo_lite_bnb4": "transformers", "grpo_lite_unsloth": "unsloth", "grpo_lite_cpu": "cpu"}[row]
        model, tokenizer = load_model(str(model_dir), backend=backend, load_in_4bit=gpu, lora_rank=LORA_RANK)
        preset = "auto" if gpu else "cpu-smoke"  # auto: bf16 or fp16 by the card's compute capability
        if gpu:
            options.update(optim="adamw_torch")  # the baseline's optimizer, whatever the preset picks
        train(model, tokenizer, dataset, [length_reward], preset=preset, output_dir=out_dir, dashboard=False, **options)
    result = {"kind": "train"}
    if gpu:  # read before anything else runs: the peak of the training itself
        free, total = torch.cuda.mem_get_info()
        context = (total - free) - torch.cuda.memory_reserved()  # what this process holds outside torch's allocator
        result.update(peak_allocated_gb=torch.cuda.max_memory_allocated() / 2**30, context_gb=context / 2**30,
                      peak_on_card_gb=(torch.cuda.max_memory_reserved() + context) / 2**30)
    else:
        import resource

        result["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    records = read_metrics(out_dir)
    timed = records[1:] or records  # the first step includes warm-up
    step_times = [r["step_time"] for r in timed]
    step_time = statistics.median(step_times)
    tokens_per_step = (statistics.median(b["num_tokens"] - a["num_tokens"] for a, b in zip(records, records[1:]))
                       if len(records) > 1 else records[0]["num_tokens"])
    result.update(seconds_per_step=step_time, step_time_range=[min(step_times), max(step_times)],
                  train_tokens_per_s=tokens_per_step / step_time, planned_gb=_planned_gb(row, model_dir, dataset, tokenizer, options, gpu))
    return result


def _planned_gb(row: str, model_dir: Path, dataset, tokenizer, options: dict, gpu: bool) -> float:
    """The memory planner's estimate for this row's run (on a CPU: fp32 weights, full logits, no CUDA overhead)."""
    from grpo_lite import plan
    from grpo_lite.data.prepare import prompt_lengths
    from grpo_lite.machine.planner import CUDA_OVERHEAD_GB

    estimate = plan(str(model_dir), gpu=float("inf"), num_generations=options["per_device_train_batch_size"],
                    max_prompt_tokens=max(prompt_lengths(dataset, tokenizer)), max_completion_length=options["max_completion_length"],
                    lora_rank=LORA_RANK, load_in_4bit=gpu and row != "trl_16bit",
                    backend="unsloth" if row == "grpo_lite_unsloth" else "transformers", weight_bytes=2 if gpu else 4,
                    logits="chunked" if gpu else "full", overhead_gb=CUDA_OVERHEAD_GB if gpu else 0.0)
    return estimate.total_gb


def baseline_dtype(gpu: bool):
    """The plain-TRL baseline's weights: the card's 16-bit dtype (fp16 on a T4, which has no bf16), fp32 on CPU."""
    import torch

    from grpo_lite.machine.device import half_dtype

    return half_dtype() if gpu else torch.float32


def _train_plain_trl(model_dir, dataset, out_dir, options, reward, gpu):
    """The recipe's standard setup: a transformers model in 16-bit (bf16 where the card has it), TRL's GRPOTrainer with
    a PEFT LoRA config, beta 0.04 (the reference is the model with its adapter off)."""
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_lite.monitor.metrics import MetricsLog
    from grpo_lite.training.trl_compat import enable_cpu_logprobs

    enable_cpu_logprobs()
    dtype = baseline_dtype(gpu)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, device_map={"": 0} if gpu else None)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    lora = LoraConfig(r=LORA_RANK, lora_alpha=2 * LORA_RANK, task_type="CAUSAL_LM",
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    config = GRPOConfig(output_dir=str(out_dir), bf16=dtype == torch.bfloat16, fp16=dtype == torch.float16, use_cpu=not gpu,
                        beta=0.04, report_to="none", gradient_checkpointing=gpu, **options)
    GRPOTrainer(model=model, reward_funcs=[reward], args=config, train_dataset=dataset, processing_class=tokenizer,
                peft_config=lora, callbacks=[MetricsLog(out_dir)]).train()
    return tokenizer


def _generation_row(row: str, model_dir: Path, tokens: int, gpu: bool, fail: bool) -> dict:
    import torch

    device = "cuda" if gpu else "cpu"
    bandwidth = _copy_bandwidth(device)  # before the model loads: the probe's buffers are freed again
    if row == "gen_unsloth":
        from unsloth import FastLanguageModel

        model, tokenizer = FastLanguageModel.from_pretrained(str(model_dir), max_seq_length=1024, load_in_4bit=False)
        FastLanguageModel.for_inference(model)
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=baseline_dtype(gpu), device_map={"": 0} if gpu else None).eval()
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    if fail:
        raise PlantedFailure(f"--fail-in {row}: raised after loading the model")
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is 12 + 30?"}], add_generation_prompt=True, tokenize=False)
    generate = _engine(row, model, tokenizer, prompt, tokens, gpu)
    with torch.no_grad():
        start = time.perf_counter()
        generate()
        _sync(gpu)
        first = time.perf_counter() - start
        start = time.perf_counter()
        generated = generate()
        _sync(gpu)
        seconds = time.perf_counter() - start
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())  # read once per decoding step
    limit = SEQUENCES * bandwidth / weight_bytes
    return {"kind": "generate", "first_call_s": first, "gen_seconds": seconds, "gen_tokens": generated,
            "gen_tokens_per_s": generated / seconds, "weights_gb": weight_bytes / 2**30, "bandwidth_gb_s": bandwidth / 1e9,
            "limit_tokens_per_s": limit, "gen_vs_bandwidth_limit": generated / seconds / limit}


def _engine(row: str, model, tokenizer, prompt: str, tokens: int, gpu: bool):
    """A call that generates SEQUENCES completions of ``tokens`` new tokens with ``row``'s engine; it returns how
    many tokens it generated."""
    from transformers import GenerationConfig

    sampling = dict(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=True, pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id)
    if row == "gen_paged":
        from transformers.generation import ContinuousBatchingConfig

        prompts = [tokenizer(prompt)["input_ids"]] * SEQUENCES
        # TRL's share of the free memory for the paged cache; on a CPU it would be sized from the machine's RAM (tens of
        # seconds to allocate): there, blocks enough for the dry run's sequences
        paged = ContinuousBatchingConfig(max_memory_percent=0.5) if gpu else ContinuousBatchingConfig(num_blocks=4 * SEQUENCES, max_batch_tokens=1024)
        # continuous batching has no min_new_tokens: a request ends at EOS or its limit (transformers
        # generation/continuous_batching/requests.py); -1 disables EOS there, so each sequence makes ``tokens`` tokens
        config = GenerationConfig(**{**sampling, "eos_token_id": -1})

        def generate_paged() -> int:
            done = model.generate_batch(prompts, generation_config=config, continuous_batching_config=paged, progress_bar=False)
            return sum(len(output.generated_tokens) for output in done.values())

        return generate_paged
    inputs = tokenizer([prompt] * SEQUENCES, return_tensors="pt").to(model.device)
    if row == "gen_static_compile":
        from transformers.generation import CompileConfig

        compile_config = CompileConfig()
        if not gpu:  # generate compiles on CUDA only; on a CPU the dry run traces it with dynamo, without code generation
            compile_config = CompileConfig(backend="eager")
            compile_config._compile_all_devices = True
        sampling.update(cache_implementation="static", compile_config=compile_config)
    elif row == "gen_dynamic":
        sampling.update(disable_compile=True)  # as TRL's GenerationConfig has it

    def generate_batch() -> int:
        output = model.generate(**inputs, **sampling)
        return (output.shape[1] - inputs["input_ids"].shape[1]) * output.shape[0]

    return generate_batch


def _sync(gpu: bool) -> None:
    if gpu:
        import torch

        torch.cuda.synchronize()


def _copy_bandwidth(device: str) -> float:
    """Memory bandwidth in bytes/s on ``device``, from timing copies of 1 GiB (256 MiB on a CPU): read + write."""
    import torch

    source = torch.empty(2**28 if device == "cuda" else 2**26, dtype=torch.float32, device=device)
    target = torch.empty_like(source)
    target.copy_(source)
    _sync(device == "cuda")
    start = time.perf_counter()
    for _ in range(10):
        target.copy_(source)
    _sync(device == "cuda")
    return 2 * source.numel() * 4 * 10 / (time.perf_counter() - start)


def child_main(row: str, model_dir: Path, out_json: Path, args) -> int:
    """The row's process: its result, or its traceback, as JSON in ``out_json``."""
    try:
        result = run_row(row, model_dir, out_json.parent / row, args.steps, args.completion_tokens, not args.dry_run, args.fail_in == row)
        out_json.write_text(json.dumps({"status": "ok", **result}))
        return 0
    except BaseException:
        out_json.write_text(json.dumps({"status": "failed", "error": traceback.format_exc()}))
        raise


# ---- the parent: one process per row, each under its time limit -------------------------------------------------


def run_in_own_process(row: str, command: list[str], limit_s: float, out_json: Path) -> dict:
    """Run a row's process; its output goes to stderr as it comes, prefixed with the row's name, and the last lines
    are kept. At ``limit_s`` its whole process group is killed."""
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                               start_new_session=True)
    tail: collections.deque[str] = collections.deque(maxlen=OUTPUT_KEPT)

    def relay():
        for line in process.stdout:
            tail.append(line.rstrip("\n"))
            print(f"[{row}] {line}", end="", file=sys.stderr, flush=True)

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    try:
        process.wait(timeout=limit_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    except BaseException:  # this run is stopped (Ctrl-C, or SIGTERM from a time limit around it): so is the row
        os.killpg(process.pid, signal.SIGKILL)
        raise
    if timed_out:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    reader.join(timeout=10)
    seconds = time.monotonic() - start
    base = {"variant": row, "seconds": round(seconds, 1), "limit_s": round(limit_s)}
    if timed_out:
        return {**base, "status": "timed_out", "error": f"no result within its limit of {limit_s:.0f} s: killed",
                "output_tail": "\n".join(tail)}
    reported = json.loads(out_json.read_text()) if out_json.exists() else {}
    if process.returncode == 0 and reported.get("status") == "ok":
        return {**base, **reported}
    error = reported.get("error") or f"exit {process.returncode} without a result"
    return {**base, "status": "failed", "exit": process.returncode, "error": error, "output_tail": "\n".join(tail)}


def run_rows(rows: dict[str, float], model_dir: Path, scratch: Path, args, budget_s: float | None) -> list[dict]:
    """Each row in its own process, in order, each printed as one JSON line when it ends."""
    results = []
    start = time.monotonic()
    for row, limit_s in rows.items():
        left = None if budget_s is None else budget_s - (time.monotonic() - start)
        if left is not None and left < MIN_ROW_S:
            result = {"variant": row, "status": "not_run", "error": f"{max(left, 0):.0f} s of the {budget_s:.0f} s budget left"}
        else:
            out_json = scratch / f"{row}.json"
            command = [sys.executable, __file__, "--child", row, str(model_dir), str(out_json), "--steps", str(args.steps),
                       "--completion-tokens", str(args.completion_tokens)]
            command += ["--dry-run"] * args.dry_run + (["--fail-in", args.fail_in] if args.fail_in else [])
            command += [] if row in UNSLOTH_ROWS else ["--without-unsloth"]
            result = run_in_own_process(row, command, limit_s if left is None else min(limit_s, left), out_json)
        result.update(shape=args.shape, steps=args.steps, completion_tokens=args.completion_tokens)
        print(json.dumps(result), flush=True)
        results.append(result)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))  # after every row: a killed run keeps what it measured
    return results


def _why(r: dict) -> str:
    status = {"failed": "failed", "timed_out": "timed out", "not_run": "not run"}[r["status"]]
    last = [line for line in r["error"].strip().splitlines() if line.strip()][-1]
    return f"{status}: {last[:100]}".replace("|", "/")


def _table(header: list[str], rows: list[dict], cells) -> str:
    """A Markdown table of ``rows``: each measured row's cells from ``cells(row, the first measured row)``, the others
    with why they have none."""
    base = next((r for r in rows if r["status"] == "ok"), None)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        shown = cells(r, base) if r["status"] == "ok" else [_why(r), *[""] * (len(header) - 2)]
        lines.append("| " + " | ".join([r["variant"], *shown]) + " |")
    return "\n".join(lines)


def _training_cells(r: dict, base: dict) -> list[str]:
    def on_card(row):  # on a CPU (the dry run) the peak resident memory stands for both peaks
        return row.get("peak_on_card_gb", row.get("peak_rss_gb"))

    low, high = r["step_time_range"]
    return [f"{r.get('peak_allocated_gb', r.get('peak_rss_gb')):.2f}", f"{on_card(r):.2f}", f"{r['planned_gb']:.2f}",
            f"{on_card(r) / r['planned_gb']:.2f}", f"{r['seconds_per_step']:.2f} ({low:.2f}-{high:.2f})", f"{r['train_tokens_per_s']:.0f}",
            f"{on_card(r) / on_card(base):.2f}", f"{base['seconds_per_step'] / r['seconds_per_step']:.2f}x"]


def _generation_cells(r: dict, base: dict) -> list[str]:
    return [f"{r['gen_tokens_per_s']:.0f}", f"{r['limit_tokens_per_s']:.0f}", f"{r['gen_vs_bandwidth_limit']:.2%}",
            f"{r['first_call_s']:.1f}", f"{r['weights_gb']:.2f}", f"{r['bandwidth_gb_s']:.0f}",
            f"{r['gen_tokens_per_s'] / base['gen_tokens_per_s']:.2f}x"]


def tables(results: list[dict]) -> str:
    """The training table and the generation table, in Markdown; ratios are to each table's first measured row."""
    training = [r for r in results if r["variant"] in TRAINING_ROWS]
    generation = [r for r in results if r["variant"] not in TRAINING_ROWS]
    blocks = []
    if training:
        blocks.append(_table(["row", "peak allocated GB", "peak on the card GB", "planner GB", "card / planner", "s/step (range)",
                              "train tok/s", "memory vs first", "speed vs first"], training, _training_cells))
    if generation:
        blocks.append(_table(["engine", "gen tok/s", "bandwidth limit tok/s", "of the limit", "first call s", "weights GB",
                              "copy GB/s", "speed vs first"], generation, _generation_cells))
    return "\n\n".join(blocks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=SHAPES, default="qwen2.5-0.5b")
    parser.add_argument("--model-dir", type=Path, help="a model built already (its shape is read from it)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--completion-tokens", type=int, default=64)
    parser.add_argument("--variants", default=None, help="comma-separated rows, in the order to run them")
    parser.add_argument("--limit-s", type=float, help="one time limit for every row, in place of each row's own")
    parser.add_argument("--budget-s", type=float, help="the whole comparison's time: rows that no longer fit are not run")
    parser.add_argument("--fail-in", metavar="ROW", help="make ROW raise, to see how a failure is reported")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny shape, 2 steps, 8 tokens, the rows a CPU can run")
    parser.add_argument("--write-docs", action="store_true", help="put the tables in docs/benchmarks.md, with this machine's versions")
    parser.add_argument("--publish", type=Path, nargs="+", metavar="OUT",
                        help="put the tables of a tests/gpu/run.sh run (its $OUT folder, or the folders of its calls on "
                             "one machine, in order) in docs/benchmarks.md, and stop")
    parser.add_argument("--versions", action="store_true", help="print the device and the versions that matter, and stop")
    parser.add_argument("--json", type=Path, help="also write the rows here (after each row)")
    parser.add_argument("--table", type=Path, help="also write the tables here")
    parser.add_argument("--child", nargs=3, metavar=("ROW", "MODEL_DIR", "OUT_JSON"), help=argparse.SUPPRESS)
    parser.add_argument("--without-unsloth", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.versions:
        print("\n".join(versions()))
        return
    if args.publish:
        publish(*gathered(args.publish))
        return
    if args.without_unsloth:
        sys.modules["unsloth"] = None  # importing grpo_lite would import it first on a GPU machine
    if args.dry_run:
        args.shape, args.steps, args.completion_tokens = "tiny", 2, 8
    if args.child:
        row, model_dir, out_json = args.child
        sys.exit(child_main(row, Path(model_dir), Path(out_json), args))
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # unwinds, killing the running row

    known = DRY_RUN_ROWS if args.dry_run else GPU_ROWS
    chosen = args.variants.split(",") if args.variants else list(known)
    unknown = [row for row in chosen if row not in known]
    if unknown:
        parser.error(f"unknown rows {unknown}; {'a dry run has' if args.dry_run else 'choose from'} {list(known)}")
    rows = {row: args.limit_s or known[row] for row in chosen}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model_dir or build_random_model(args.shape, Path(tmp) / "model")
        results = run_rows(rows, model_dir, Path(tmp), args, args.budget_s)
    table = tables(results)
    print(table)
    if args.table:
        args.table.write_text(table + "\n")
    if args.write_docs:
        publish(results, versions(), f"`python benchmarks/gpu_compare.py {' '.join(sys.argv[1:])}`")


def versions() -> list[str]:
    """The date, the commit, the device and the versions that matter, one ``name: value`` a line."""
    import platform
    from datetime import datetime
    from importlib.metadata import PackageNotFoundError, version

    import torch

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    device = (f"{torch.cuda.get_device_name()} ({torch.cuda.get_device_properties(0).total_memory / 2**30:.1f} GiB)"
              if torch.cuda.is_available() else "no CUDA GPU (CPU)")
    lines = [f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC", f"commit: {commit or 'unknown'}", f"device: {device}",
             f"python: {platform.python_version()}", f"torch: {torch.__version__} (CUDA {torch.version.cuda})"]
    return lines + [f"{name}: {installed(name)}" for name in ("transformers", "trl", "peft", "unsloth", "unsloth_zoo",
                                                              "bitsandbytes", "datasets", "accelerate", "triton", "vllm")]


def gathered(folders: list[Path]) -> tuple[list[dict], list[str], str, str, str]:
    """What ``publish`` takes from the $OUT folders of one session's calls of tests/gpu/run.sh, in order: each row as
    last measured (a row a call did not reach keeps its reason only where no call measured it), the first call's
    versions, the calls' commands and timelines, and the GPU tests' table."""
    rows: dict[str, dict] = {}
    timelines = []
    for folder in folders:
        compare = folder / "gpu_compare.json"
        for row in json.loads(compare.read_text()) if compare.exists() else []:
            if row["status"] != "not_run" or row["variant"] not in rows:
                rows[row["variant"]] = row
        timeline = folder / "timeline.txt"
        if timeline.exists():
            timelines.append(timeline.read_text().strip())
    versions = (folders[0] / "versions.txt").read_text().splitlines()
    how = "`bash tests/gpu/run.sh all`" + (f", then the parts it left out, in {len(folders)} calls on one machine (their "
                                           "timelines below)" if len(folders) > 1 else "")
    return list(rows.values()), versions, how, "\n\n".join(timelines), tests_table([f / "gpu-tests.xml" for f in folders])


def tests_table(junit_files: list[Path]) -> str:
    """Each GPU test's result and seconds, from the JUnit files of tests/gpu/run.sh's calls (a test run twice: the
    last)."""
    import xml.etree.ElementTree as ET

    results: dict[str, tuple[str, float]] = {}
    for path in junit_files:
        if not path.exists():
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            if not case.get("name"):  # pytest's entry for a collection stopped before any test (the time limit)
                continue
            outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
            results[f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"] = (outcome, float(case.get("time", 0)))
    if not results:
        return ""
    lines = ["| GPU test | result | s |", "|---|---|---:|"]
    lines += [f"| {name} | {outcome} | {seconds:.1f} |" for name, (outcome, seconds) in results.items()]
    return "\n".join(lines)


def section(results: list[dict], machine_lines: list[str], how: str, timeline: str = "", tests: str = "") -> str:
    """docs/benchmarks.md's section for a comparison's rows, measured as ``how`` says on the machine described."""
    facts = dict(line.split(": ", 1) for line in machine_lines if ": " in line)
    run = results[0]
    text = [HEADING, "", f"{how} on {facts['device']}, {facts['date']}, commit {facts['commit']}: "
            + ", ".join(f"{name} {facts[name]}" for name in ("torch", "transformers", "trl", "peft", "unsloth", "bitsandbytes") if name in facts)
            + f". Shape {run['shape']} (random weights), {run['steps']} steps, {SEQUENCES} generations x {run['completion_tokens']} "
            f"forced tokens, LoRA rank {LORA_RANK}.", "", tables(results)]
    if tests:
        text += ["", "The GPU tests (tests/gpu) in the same session:", "", tests]
    if timeline:
        text += ["", "What each part of the run took:", "", "```", timeline.strip(), "```"]
    return "\n".join(text) + "\n"


def publish(results: list[dict], machine_lines: list[str], how: str, timeline: str = "", tests: str = "") -> None:
    from benchmarks.docs import replace_section

    replace_section(HEADING, section(results, machine_lines, how, timeline, tests))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
