"""The memory planner's estimate against the measured peak of real GRPO steps (CPU RSS here).

Each case builds a random Qwen2 model of a given shape, then in a fresh process runs ``grpo_lite.train`` for
a few steps, with gradient checkpointing as the planner assumes, and records the peak anonymous resident
memory (RssAnon, sampled every 5 ms) above the process's after its imports. A first run on a model with almost no weights measures what any run
costs on a CPU whatever the model (trainer, optimizer, allocator and Python objects); that baseline is
subtracted, as the planner's CUDA overhead term stands for it on a GPU. ``grpo_lite.plan`` is asked about the
same model folder and run shape with fp32 weights (the CPU backend) and no CUDA overhead. The ratio is
measured / estimated.

    python benchmarks/plan_vs_measured.py [--steps 2] [--write-docs]
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

# (hidden, layers, MLP width, num_generations, completion tokens)
CASES = [(256, 4, 1024, 4, 32), (512, 8, 2048, 4, 64), (512, 8, 2048, 8, 128), (768, 12, 3072, 8, 128)]
BASELINE = (32, 1, 64, 4, 32)  # almost no weights: the fixed cost of a run
PROMPT_TOKENS = 40  # the arithmetic prompts with the chat template, rounded up
LORA_RANK = 8

# Anonymous resident memory (RssAnon), sampled every 5 ms: the kernel's peak RSS would also count the pages of
# the mmapped safetensors file, which the weights' own tensors then hold a second time.
MEASURE = """
import json, sys, threading, time
from grpo_lite import load_model, prepare_dataset, train
def anon_kb():
    return int(open('/proc/self/status').read().split('RssAnon:')[1].split()[0])
peak = {"kb": 0}
def sample():
    while True:
        peak["kb"] = max(peak["kb"], anon_kb())
        time.sleep(0.005)
base_kb = anon_kb()
threading.Thread(target=sample, daemon=True).start()
model_dir, generations, completion, steps, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
model, tokenizer = load_model(model_dir, lora_rank={lora_rank})
dataset = prepare_dataset([{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(32)], system_prompt=None)
train(model, tokenizer, dataset, ["soft_xml_format_reward"], preset="cpu-smoke", output_dir=out, dashboard=False,
      max_steps=steps, num_generations=generations, per_device_train_batch_size=generations,
      max_completion_length=completion, save_strategy="no", gradient_checkpointing=True)
time.sleep(0.05)
print(json.dumps({"measured_gb": (peak["kb"] - base_kb) / 1024**2}))
""".replace("{lora_rank}", str(LORA_RANK))


def measure(model_dir: Path, generations: int, completion: int, steps: int, out: Path) -> float:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(model_dir), str(generations), str(completion), str(steps), str(out)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["measured_gb"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()

    from grpo_lite.machine.planner import plan
    from grpo_lite.model.tiny import build_tiny_model

    rows = []
    with tempfile.TemporaryDirectory() as tmp:

        def run(hidden, layers, width, generations, completion):
            model_dir = build_tiny_model(Path(tmp) / f"model-{hidden}-{layers}", hidden_size=hidden, num_layers=layers,
                                         num_heads=8, num_kv_heads=2, intermediate_size=width)
            estimate = plan(str(model_dir), gpu=1024, num_generations=generations, max_prompt_tokens=PROMPT_TOKENS,
                            max_completion_length=completion, lora_rank=LORA_RANK, load_in_4bit=False,
                            weight_bytes=4, overhead_gb=0.0, logits="full")  # the CPU stand-in holds full logits
            return estimate.total_gb, measure(model_dir, generations, completion, args.steps, Path(tmp) / "run")

        _, baseline = run(*BASELINE)
        print(f"baseline (a run with almost no weights): {baseline * 1024:.0f} MB")
        for case in CASES:
            estimate, measured = run(*case)
            rows.append((*case, estimate * 1024, (measured - baseline) * 1024))
            hidden, layers, width, generations, completion = case
            print(f"hidden={hidden} layers={layers} G={generations} C={completion}: estimated {rows[-1][5]:.0f} MB, "
                  f"measured {rows[-1][6]:.0f} MB, ratio {rows[-1][6] / rows[-1][5]:.2f}")

    if args.write_docs:
        table = "\n".join(f"| {h} | {n} | {w} | {g} | {c} | {e:.0f} | {m:.0f} | {m / e:.2f} |" for h, n, w, g, c, e, m in rows)
        replace_section("## Memory planner", f"""## Memory planner

`python benchmarks/plan_vs_measured.py --write-docs` on {machine()}.
`grpo_lite.plan` (fp32 weights, no CUDA overhead, `logits="full"`: on a CPU grpo_lite's stand-in for TRL's
log-prob kernel holds the full logits) against the peak resident memory of {args.steps} real GRPO steps
on random Qwen2 models (LoRA rank {LORA_RANK}, gradient checkpointing): the peak anonymous resident memory
(RssAnon sampled every 5 ms; the file pages of the mmapped weights are not counted twice) above the process's
after its imports, less {baseline * 1024:.0f} MB: the peak of the same run on a model with almost no weights (trainer,
optimizer, allocator and Python objects; the planner's CUDA overhead term stands for it on a GPU). CPU RSS
includes allocator caching, so it is an upper reference; on a GPU the estimate is meant against
`torch.cuda.max_memory_allocated` (no GPU was available for this table).

What only a GPU can confirm: the chunked log-prob term (TRL's Triton kernel, one 4096 x 32768 tile at a time;
on a CPU the full logits are held instead), 4-bit weights and the fp32 upcasts of the bitsandbytes path
(bitsandbytes runs on this CPU, but its CPU layout and allocator differ from CUDA's), the KV cache and
vLLM's pool, activations in 16-bit under autocast with CUDA's caching allocator (glibc keeps freed
buffers, so the CPU activation peak is an upper reference), and the CUDA context overhead term.

| hidden | layers | MLP width | generations | completion tokens | estimated MB | measured MB | measured / estimated |
|---|---|---|---|---|---|---|---|
{table}
""")


if __name__ == "__main__":
    main()
