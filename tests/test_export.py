import pytest
import torch
from peft import AutoPeftModelForCausalLM
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_lite.model.exporter import ExportError, export
from grpo_lite.model.inference import generate

PROMPTS = [[{"role": "user", "content": "What is 2 + 2?"}], [{"role": "user", "content": "Name a prime."}]]


@pytest.fixture
def trained_lora(tiny_model):
    """The tiny LoRA model with nonzero adapter weights, as after training (fresh LoRA B is all zeros)."""
    model, tokenizer = tiny_model
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    return model, tokenizer


def test_merged_16bit_reloads_with_plain_transformers_and_generates_the_same_text(trained_lora, tmp_path):
    model, tokenizer = trained_lora
    export(model, tokenizer, tmp_path, how="merged_16bit")

    merged = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert not any("lora" in name for name, _ in merged.named_parameters())
    expected = generate(model, tokenizer, PROMPTS, max_completion_length=8)
    assert generate(merged, AutoTokenizer.from_pretrained(tmp_path), PROMPTS, max_completion_length=8) == expected
    assert any("lora_B" in name for name, _ in model.named_parameters()), "export must leave the model trainable"


def test_merged_export_casts_to_the_asked_dtype(trained_lora, tmp_path):
    model, tokenizer = trained_lora
    export(model, tokenizer, tmp_path, how="merged_16bit", dtype=torch.bfloat16)
    assert AutoModelForCausalLM.from_pretrained(tmp_path).dtype == torch.bfloat16
    assert model.dtype == torch.float32


def test_adapter_reloads_through_peft_and_generates_the_same_text(trained_lora, tmp_path):
    model, tokenizer = trained_lora
    export(model, tokenizer, tmp_path, how="adapter")
    assert (tmp_path / "adapter_model.safetensors").exists()

    reloaded = AutoPeftModelForCausalLM.from_pretrained(tmp_path)
    assert generate(reloaded, tokenizer, PROMPTS, max_completion_length=8) == generate(model, tokenizer, PROMPTS, max_completion_length=8)


@pytest.mark.parametrize("how", ["gguf", "merged_4bit"])
def test_unsloth_formats_name_what_is_missing(tiny_model, tmp_path, how):
    model, tokenizer = tiny_model
    with pytest.raises(ExportError, match=r"needs Unsloth.*backend='unsloth'.*merged_16bit"):
        export(model, tokenizer, tmp_path, how=how)


def test_bad_options_are_named(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    with pytest.raises(ExportError, match="how='onnx'"):
        export(model, tokenizer, tmp_path, how="onnx")
    with pytest.raises(ExportError, match="quantization='q9'"):
        export(model, tokenizer, tmp_path, how="gguf", quantization="q9")


def test_an_export_into_a_folder_that_holds_files_is_refused_unless_asked(trained_lora, tmp_path):
    model, tokenizer = trained_lora
    export(model, tokenizer, tmp_path / "out", how="adapter")
    with pytest.raises(ExportError, match=r"out already holds README\.md, adapter_config\.json, adapter_model\.safetensors, .*overwrite=True"):
        export(model, tokenizer, tmp_path / "out", how="merged_16bit")
    assert (tmp_path / "out" / "adapter_model.safetensors").exists()  # refused before anything was touched
    export(model, tokenizer, tmp_path / "out", how="merged_16bit", overwrite=True)
    held = {p.name for p in (tmp_path / "out").iterdir()}
    assert "model.safetensors" in held and not held & {"adapter_config.json", "adapter_model.safetensors"}
