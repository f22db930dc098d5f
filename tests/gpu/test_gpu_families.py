"""The model families users load (tests/families.py) through Unsloth's loader on a CUDA GPU: each loads 4-bit with LoRA
on its own linear layers, keeps or folds the system prompt, trains two steps asking TRL what grpo-lite renders, and
generates. Unsloth's loader differs by family: Llama, Mistral, Qwen3 and Gemma 2 load through its own model classes,
Phi-3, Gemma 3 and 3n and gpt-oss through FastModel (unsloth/models/loader.py, the dispatch on model_type; a gpt-oss
checkpoint with fused experts, as a tiny one is, keeps its experts as parameters there, and LoRA reaches them through
get_peft_model's target_parameters, unsloth/models/vision.py), and Gemma 3 asked for in fp16, as a T4 loads it, trains
in float32 (loader.py FORCE_FLOAT32: "gemma3"; the trainer keeps it, unsloth/models/rl.py)."""

import pytest
from families import FAMILIES
from on_gpu import TILED_SIZE, characters_reward, run_in_fresh_interpreter
from stacks import prompts_trl_generates_from

from grpo_lite import generate, load_model, prepare_dataset, train
from grpo_lite.data.prepare import REASONING_SYSTEM_PROMPT
from grpo_lite.data.prompts import prompt_token_ids, render_prompt
from grpo_lite.model.load import loaded_as

SIZE = dict(TILED_SIZE, dtype="bfloat16")  # in bf16 as checkpoints ship
ROWS = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)]
TWO_STEPS = dict(max_steps=2, num_generations=4, per_device_train_batch_size=4, max_completion_length=16, learning_rate=5e-4,
                 save_steps=100, dashboard=False)


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {family.name: family.build(root, **SIZE) for family in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES, ids=[family.name for family in FAMILIES])
def test_each_family_loads_trains_and_generates_through_unsloth(family, family_dirs, tmp_path):
    model, tokenizer = load_model(str(family_dirs[family.name]), backend="unsloth", lora_rank=8)
    assert loaded_as(model).backend.name == "unsloth" and loaded_as(model).backend.load_in_4bit
    assert set(loaded_as(model).lora_modules) == set(family.lora_modules)  # Phi-3's fused projections too
    dataset = prepare_dataset(ROWS, tokenizer=tokenizer)
    prompt = render_prompt(tokenizer, dataset[0]["prompt"])
    assert REASONING_SYSTEM_PROMPT in prompt
    if tokenizer.chat_template == family.chat_template():  # Unsloth repairs a template without a generation prompt
        assert prompt.endswith(family.generation_prompt)
    with prompts_trl_generates_from(model) as asked:
        result = train(model, tokenizer, dataset, [characters_reward], output_dir=tmp_path, **TWO_STEPS)
    assert result.trainer.state.global_step == 2
    if any(name.startswith("experts.") for name in family.lora_modules):  # gpt-oss: LoRA on the experts trained
        assert any(".experts." in name and "lora_B" in name and p.abs().sum() > 0 for name, p in result.model.named_parameters())
    # Unsloth's trainer is generated from TRL's source: it renders the prompts as grpo-lite does
    assert asked and all(ids in [prompt_token_ids(tokenizer, p) for p in dataset["prompt"]] for ids in asked)
    texts = generate(model, tokenizer, [dataset[0]["prompt"]], max_completion_length=8)
    assert len(texts) == 1 and isinstance(texts[0], str)


GEMMA3_IN_FP16 = """
import math
import torch
from on_gpu import characters_reward
from grpo_lite import load_model, prepare_dataset, train
model, tokenizer = load_model(model_dir, backend="unsloth", lora_rank=8, dtype=torch.float16)
dataset = prepare_dataset([{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)], tokenizer=tokenizer)
run = train(model, tokenizer, dataset, [characters_reward], preset="t4-16gb", output_dir="run", max_steps=2, num_generations=4,
            per_device_train_batch_size=4, max_completion_length=16, save_steps=100, dashboard=False)
result({"steps": run.trainer.state.global_step, "fp16": run.trainer.args.fp16, "bf16": run.trainer.args.bf16,
        "forced_float32": bool(getattr(model, "_unsloth_forced_float32", False)),
        "finite": all(math.isfinite(r["loss"]) and math.isfinite(r["grad_norm"]) for r in run.metrics)})
"""


def test_gemma3_asked_for_in_fp16_trains_in_float32_as_unsloth_keeps_it(family_dirs, tmp_path):
    """A T4 has no bf16 and loads in fp16: Unsloth then loads Gemma 3 for float32 training (fp16 overflows its
    activations; loader.py forces it for dtype=float16 on any card), and the t4-16gb preset's fp16 gives way to it
    (unsloth/models/rl.py: force_float32 turns fp16 and bf16 off). Which card loads fp16 is decided on a CPU
    (tests/test_t4_path.py); a T4's capability cannot be shown to one process on a newer card (tests/gpu/test_gpu_t4_fp16.py).
    A fresh interpreter: Unsloth's loader says float32 through the process's environment (UNSLOTH_FORCE_FLOAT32)."""
    done = run_in_fresh_interpreter(GEMMA3_IN_FP16, family_dirs["gemma-3"], tmp_path)
    assert done["steps"] == 2 and done["forced_float32"] and done["finite"]
    assert not done["bf16"] and not done["fp16"]
