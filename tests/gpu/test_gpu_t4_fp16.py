"""fp16 training through Unsloth on this card, as on a T4 (which has no bf16): the model loaded in fp16 and the
t4-16gb preset (fp16 autocast, 8-bit AdamW), both asked for by name, train under the dashboard with finite losses and
a moving policy.

Which card trains this way is decided on a CPU (tests/test_t4_path.py: compute capability below 8.0 gives fp16
weights, the t4-16gb preset, 8-bit AdamW and no vLLM). A T4's capability cannot be shown to one process on a newer
card: Triton builds its kernels for the capability it read when its driver was made (triton/backends/nvidia/driver.py),
and kernels built for sm_75 do not load on another card."""

import math

import torch
from on_gpu import SHORT_RUN, characters_reward

from grpo_lite import load_model, read_metrics, train

FP16_RUN = {**SHORT_RUN, "max_steps": 3, "save_steps": 3}


def test_fp16_weights_train_through_unsloth_with_the_t4_preset(model_dir, dataset, tmp_path):
    model, tokenizer = load_model(str(model_dir), backend="unsloth", lora_rank=16, dtype=torch.float16)
    assert model.get_input_embeddings().weight.dtype == torch.float16  # unsloth/models/llama.py keeps the dtype asked for
    run = train(model, tokenizer, dataset, [characters_reward], preset="t4-16gb", dashboard=True, output_dir=tmp_path, **FP16_RUN)
    args = run.trainer.args
    assert (args.fp16, args.bf16, getattr(args.optim, "value", args.optim)) == (True, False, "adamw_8bit")
    records = read_metrics(tmp_path)
    assert [r["step"] for r in records] == list(range(1, FP16_RUN["max_steps"] + 1))
    assert all(math.isfinite(r["loss"]) and math.isfinite(r["grad_norm"]) for r in records)
    assert min(r["reward_std"] for r in records) > 0 and records[-1]["kl"] > 0
    assert (tmp_path / "dashboard.png").exists()
