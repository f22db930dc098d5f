"""The memory planner's estimate against the measured peak of real GRPO steps (CPU RSS here).

Each case builds a random Qwen2 model of a given shape, then in a fresh process runs ``grpo_lite.train`` for
a few steps and records the peak resident memory above the process's memory after its imports (so the
Python and torch libraries themselves are not counted). ``grpo_lite.plan`` is asked about the same model
folder and run shape with fp32 weights (the CPU backend) and no CUDA overhead. The ratio is measured / estimated.

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
CASES = [(256, 4, 1024, 4, 32), (512, 8, 2048, 4, 64), (512, 8, 2048, 8, 128)]
PROMPT_TOKENS = 40  # the arithmetic prompts with the chat template, rounded up
LORA_RANK = 8

MEASURE = """
import json, resource, sys
from grpo_lite import load_model, prepare_dataset, train
base_kb = int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])
model_dir, generations, completion, steps, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
model, tokenizer = load_model(model_dir, lora_rank=%d)
dataset = prepare_dataset([{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(32)], system_prompt=None)
train(model, tokenizer, dataset, ["soft_xml_format_reward"], preset="cpu-smoke", output_dir=out, dashboard=False,
      max_steps=steps, num_generations=generations, per_device_train_batch_size=generations,
      max_completion_length=completion, save_strategy="no")
peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"measured_gb": (peak_kb - base_kb) / 1024**2}))
""" % LORA_RANK


def measure(model_dir: Path, generations: int, completion: int, steps: int, out: Path) -> float:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(model_dir), str(generations), str(completion), str(steps), str(out)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["measured_gb"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()

    from grpo_lite.planner import plan
    from grpo_lite.tiny import build_tiny_model

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for hidden, layers, width, generations, completion in CASES:
            model_dir = build_tiny_model(Path(tmp) / f"model-{hidden}-{layers}", hidden_size=hidden, num_layers=layers,
                                         num_heads=8, num_kv_heads=2, intermediate_size=width)
            estimate = plan(str(model_dir), gpu=1024, num_generations=generations, max_prompt_tokens=PROMPT_TOKENS,
                            max_completion_tokens=completion, lora_rank=LORA_RANK, load_in_4bit=False,
                            weight_bytes=4, overhead_gb=0.0)
            measured = measure(model_dir, generations, completion, args.steps, Path(tmp) / "run")
            rows.append((hidden, layers, width, generations, completion, estimate.total_gb * 1024, measured * 1024))
            print(f"hidden={hidden} layers={layers} G={generations} C={completion}: estimated {rows[-1][5]:.0f} MB, "
                  f"measured {rows[-1][6]:.0f} MB, ratio {measured / estimate.total_gb:.2f}")

    if args.write_docs:
        table = "\n".join(f"| {h} | {l} | {w} | {g} | {c} | {e:.0f} | {m:.0f} | {m / e:.2f} |" for h, l, w, g, c, e, m in rows)
        replace_section("## Memory planner", f"""## Memory planner

`python benchmarks/plan_vs_measured.py --write-docs` on {machine()}.
`grpo_lite.plan` (fp32 weights, no CUDA overhead) against the peak resident memory of {args.steps} real GRPO steps
on random Qwen2 models (LoRA rank {LORA_RANK}), above the memory of the process after its imports.
CPU RSS includes allocator caching and the Python objects of the run, so it is an upper reference;
on a GPU the same estimate is meant against `torch.cuda.max_memory_allocated`.

| hidden | layers | MLP width | generations | completion tokens | estimated MB | measured MB | measured / estimated |
|---|---|---|---|---|---|---|---|
{table}
""")


if __name__ == "__main__":
    main()
