"""A real CUDA out-of-memory: a batch the planner puts at 1.5x this card ends in OutOfMemory, and the config it
suggests then trains. In a fresh interpreter, so that no other test's model holds memory on the card."""

from on_gpu import run_in_fresh_interpreter

OVERSIZE_THEN_FIT = """
import gc, torch
from on_gpu import characters_reward
from grpo_lite import load_builtin, load_model, plan, prepare_dataset, read_metrics, train
from grpo_lite.guards.out_of_memory import OutOfMemory
from grpo_lite.data.prepare import prompt_lengths
model, tokenizer = load_model(model_dir, backend="unsloth", lora_rank=16)
dataset = prepare_dataset(load_builtin("arithmetic")[:64])
card_gb = torch.cuda.get_device_properties(0).total_memory / 2**30
completion = 256
def planned_gb(batch):
    return plan(model_dir, gpu=card_gb, num_generations=batch, max_prompt_tokens=max(prompt_lengths(dataset, tokenizer)),
                max_completion_length=completion, lora_rank=16).total_gb
batch = next(2**k for k in range(4, 16) if planned_gb(2**k) > 1.5 * card_gb)
oversized = dict(num_generations=batch, per_device_train_batch_size=batch, max_completion_length=completion)
common = dict(preset="auto", dashboard=False, max_steps=2, learning_rate=5e-4)
ran_out = None
try:
    train(model, tokenizer, dataset, [characters_reward], output_dir="oversized", **common, **oversized)
except OutOfMemory as error:
    ran_out = {"phase": error.phase, "message": str(error), "nearest": error.nearest,
               "cause": type(error.__cause__).__name__}
gc.collect()
torch.cuda.empty_cache()
fitted = {}
if ran_out and ran_out["nearest"]:
    torch.cuda.reset_peak_memory_stats()
    settings = {**oversized, **ran_out["nearest"]}
    train(model, tokenizer, dataset, [characters_reward], output_dir="fitted", **common, **settings)
    fitted = {"settings": settings, "steps": [r["step"] for r in read_metrics("fitted")],
              "peak_gb": torch.cuda.max_memory_allocated() / 2**30, "planned_gb": planned_gb(settings["per_device_train_batch_size"])}
result({"card_gb": card_gb, "batch": batch, "planned_gb": planned_gb(batch), "ran_out": ran_out, "fitted": fitted})
"""


def test_an_oversized_batch_ends_in_out_of_memory_whose_suggestion_then_trains(model_dir, tmp_path):
    done = run_in_fresh_interpreter(OVERSIZE_THEN_FIT, model_dir, tmp_path)
    print(f"card {done['card_gb']:.2f} GiB; oversized batch {done['batch']} planned at {done['planned_gb']:.1f} GiB; "
          f"fitted: {done['fitted']}")  # the planner's estimate against the CUDA peak, for docs/benchmarks.md
    ran_out = done["ran_out"]
    assert ran_out is not None, f"a batch planned at {done['planned_gb']:.0f} GiB trained on a {done['card_gb']:.0f} GiB card"
    assert ran_out["cause"] == "OutOfMemoryError"
    assert "Nearest config that fits" in ran_out["message"] and ran_out["nearest"], ran_out["message"]
    assert done["fitted"]["steps"] == [1, 2], "the suggested config trains"
    assert done["fitted"]["peak_gb"] <= done["card_gb"]
