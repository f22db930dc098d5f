"""The T4 path on this GPU: with a T4's compute capability (7.5), Unsloth loads the model in fp16, the auto preset
is t4-16gb (fp16, 8-bit AdamW), and ten steps train under the dashboard with finite losses and a moving policy.

It runs in a fresh interpreter: Unsloth decides bf16 once, when it is imported (see on_gpu.T4_PRELUDE)."""

from on_gpu import T4_PRELUDE, run_in_fresh_interpreter

TRAIN_AS_A_T4 = """
import math, torch
from on_gpu import SHORT_RUN, characters_reward
from grpo_lite import load_builtin, load_model, prepare_dataset, read_metrics, train
model, tokenizer = load_model(model_dir, backend="unsloth", lora_rank=16)
weights_dtype = str(model.get_input_embeddings().weight.dtype)
run = train(model, tokenizer, prepare_dataset(load_builtin("arithmetic")[:64]), [characters_reward], preset="auto",
            dashboard=True, output_dir="run", **SHORT_RUN)
records = read_metrics("run")
result({
    "weights_dtype": weights_dtype,
    "fp16": run.trainer.args.fp16, "bf16": run.trainer.args.bf16, "optim": getattr(run.trainer.args.optim, "value", run.trainer.args.optim),
    "steps": [r["step"] for r in records],
    "finite": all(math.isfinite(r["loss"]) and math.isfinite(r["grad_norm"]) for r in records),
    "reward_std": min(r["reward_std"] for r in records),
    "kl": records[-1]["kl"],
    "dashboard": (run.output_dir / "dashboard.png").exists(),
})
"""


def test_a_t4_trains_in_fp16_through_unsloth(model_dir, tmp_path):
    done = run_in_fresh_interpreter(TRAIN_AS_A_T4, model_dir, tmp_path, prelude=T4_PRELUDE)
    assert done["weights_dtype"] == "torch.float16"  # unsloth/models/loader.py: fp16 where SUPPORTS_BFLOAT16 is False
    assert (done["fp16"], done["bf16"], done["optim"]) == (True, False, "adamw_8bit")
    assert done["steps"] == list(range(1, 11)) and done["finite"]
    assert done["reward_std"] > 0 and done["kl"] > 0
    assert done["dashboard"]
