"""A run through Unsloth on a CUDA GPU, as a user makes it: preview, train under the dashboard, evaluate, generate,
export, resume. The model is loaded once and trained once (module fixtures); each test checks one part."""

import json

import pytest
import torch
from merges import assert_merged_in_16bit
from on_gpu import SHORT_RUN, characters_reward
from real_unsloth import NO_UNSLOTH, run_script

from grpo_lite import evaluate, export, generate, load_model, preview, read_metrics, train
from grpo_lite.monitor.samples import read_samples


@pytest.fixture(scope="module")
def unsloth_model(model_dir):
    return load_model(str(model_dir), backend="unsloth", lora_rank=16)


@pytest.fixture(scope="module")
def run(unsloth_model, dataset, tmp_path_factory):
    model, tokenizer = unsloth_model
    return train(model, tokenizer, dataset, [characters_reward], preset="auto", dashboard=True,
                 output_dir=tmp_path_factory.mktemp("run"), **SHORT_RUN)


def test_preview_samples_and_scores_groups_before_training(unsloth_model, dataset):
    model, tokenizer = unsloth_model
    report = preview(model, tokenizer, dataset, [characters_reward], n_prompts=4, num_generations=8, max_completion_length=64)
    assert len(report.completions) == 4 * 8 and len(report.groups) == 4
    scores = report.lab.scores("characters_reward")
    assert len(scores) == 32 and len(set(scores)) > 1, "a random model's completions differ in length"


def test_six_steps_of_the_auto_preset_log_reward_kl_and_grad_norm_under_the_dashboard(run):
    assert run.stopped is None
    records = read_metrics(run.output_dir)
    assert [r["step"] for r in records] == list(range(1, SHORT_RUN["max_steps"] + 1))
    for record in records:
        assert {"reward", "reward_std", "kl", "grad_norm", "rewards/characters_reward/mean"} <= set(record)
    assert all(r["reward_std"] > 0 for r in records), "rewards vary within groups"
    assert records[-1]["kl"] > 0, "the policy moved away from the reference"
    assert all(torch.isfinite(torch.tensor(r["grad_norm"])) for r in records)
    assert (run.output_dir / "dashboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(read_samples(run.output_dir)) == SHORT_RUN["max_steps"] * 8
    state = json.loads((run.output_dir / f"checkpoint-{SHORT_RUN['max_steps']}" / "trainer_state.json").read_text())
    assert state["global_step"] == SHORT_RUN["max_steps"]
    assert run.trainer.args.bf16 and not run.trainer.args.fp16  # the a100-80gb preset on a card with bf16


def test_evaluate_and_generate_after_training(run, unsloth_model, dataset):
    model, tokenizer = unsloth_model
    report = evaluate(model, tokenizer, dataset, [characters_reward], heldout_n=8, heldout_samples=2, max_completion_length=32)
    assert report.n == 8 and 2 in report.pass_at_k
    assert report.mean_rewards["characters_reward"] > 0
    prompts = ["What is 2 + 2?", "Name a colour."]
    texts = generate(model, tokenizer, prompts, max_completion_length=16)
    assert len(texts) == 2 and all(isinstance(text, str) and text for text in texts)
    assert texts == generate(model, tokenizer, prompts, max_completion_length=16), "greedy: the same text twice"


# Reloaded in a fresh interpreter without Unsloth (NO_UNSLOTH): plain transformers and PEFT, as a user's server has.
# base_dir, adapter_dir, merged_dir and weights_file are set in front of it.
RELOAD = """
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer
base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.bfloat16)
base_q = base.model.layers[0].self_attn.q_proj.weight.detach().clone()
with_adapter = PeftModel.from_pretrained(base, adapter_dir)
lora_b = with_adapter.base_model.model.model.layers[0].self_attn.q_proj.lora_B["default"].weight.float()
merged = AutoModelForCausalLM.from_pretrained(merged_dir)
torch.save({"base_q": base_q, "merged_q": merged.model.layers[0].self_attn.q_proj.weight.detach()}, weights_file)
ids = AutoTokenizer.from_pretrained(merged_dir)("What is 2 + 2?", return_tensors="pt")
result({
    "lora_b_abs_sum": lora_b.abs().sum().item(),
    "merged_dtype": str(merged.dtype),
    "merged_quantized": getattr(merged.config, "quantization_config", None) is not None,
    "merged_has_lora": any("lora_" in name for name, _ in merged.named_parameters()),
    "generated": merged.generate(**ids, max_new_tokens=4, do_sample=False).shape[1] - ids["input_ids"].shape[1],
})
"""


def test_export_adapter_and_merged_16bit_reload_with_plain_transformers(run, unsloth_model, model_dir, tmp_path):
    import bitsandbytes.functional as bnb_functional

    model, tokenizer = unsloth_model
    adapter = export(model, tokenizer, tmp_path / "adapter", how="adapter")
    merged = export(model, tokenizer, tmp_path / "merged", how="merged_16bit")
    q_proj = model.base_model.model.model.layers[0].self_attn.q_proj
    lora_a, lora_b = q_proj.lora_A["default"].weight.float(), q_proj.lora_B["default"].weight.float()
    delta = (lora_b @ lora_a * q_proj.scaling["default"]).cpu()  # what merging adds to the base weight
    four_bit = q_proj.base_layer.weight
    dequantized_4bit = bnb_functional.dequantize_4bit(four_bit.data, four_bit.quant_state).cpu()
    weights_file = tmp_path / "weights.pt"
    paths = (f"base_dir, adapter_dir, merged_dir, weights_file = {str(model_dir)!r}, {str(adapter)!r}, {str(merged)!r}, "
             f"{str(weights_file)!r}\n")
    reloaded = run_script(paths + RELOAD, tmp_path, prelude=NO_UNSLOTH)
    assert reloaded["lora_b_abs_sum"] == pytest.approx(lora_b.abs().sum().item(), rel=1e-3)
    assert reloaded["lora_b_abs_sum"] > 0, "training moved the adapter"
    assert reloaded["merged_dtype"] == "torch.bfloat16" and not reloaded["merged_quantized"] and not reloaded["merged_has_lora"]
    weights = torch.load(weights_file)
    # merged into the 16-bit base weights (bf16(base + delta), one rounding), not into the 4-bit ones dequantized,
    # which the same check rejects on this very layer (tests/merges.py; tests/test_export.py checks both on CPU)
    assert_merged_in_16bit(weights["merged_q"], weights["base_q"], delta, name="layer 0's merged q_proj")
    with pytest.raises(AssertionError, match="is not torch.bfloat16"):
        assert_merged_in_16bit((dequantized_4bit.float() + delta).to(torch.bfloat16), weights["base_q"], delta)
    assert reloaded["generated"] == 4


def test_resume_continues_from_the_last_checkpoint(run, dataset, model_dir):
    model, tokenizer = load_model(str(model_dir), backend="unsloth", lora_rank=16)
    resumed = train(model, tokenizer, dataset, [characters_reward], preset="auto", dashboard=False, resume=True,
                    output_dir=run.output_dir, **{**SHORT_RUN, "max_steps": SHORT_RUN["max_steps"] + 2})
    assert resumed.stopped is None
    assert [r["step"] for r in read_metrics(run.output_dir)] == list(range(1, SHORT_RUN["max_steps"] + 3))
    assert (run.output_dir / f"checkpoint-{SHORT_RUN['max_steps']}").is_dir()
