"""load_model on a CUDA GPU: through Unsloth, and through transformers + bitsandbytes; both 4-bit with LoRA."""

import torch

from grpo_lite import load_model
from grpo_lite.model.load import loaded_as

LINEAR_LAYERS = 24 * 7  # Qwen2.5-0.5B: 24 layers of q, k, v, o, gate, up, down


def four_bit_layers(model) -> int:
    import bitsandbytes as bnb

    return sum(isinstance(module, bnb.nn.Linear4bit) for module in model.modules())


def trainable(model) -> list[str]:
    return [name for name, parameter in model.named_parameters() if parameter.requires_grad]


def test_unsloth_loads_4bit_with_lora_and_its_own_gradient_checkpointing(model_dir):
    model, tokenizer = load_model(str(model_dir), backend="unsloth", lora_rank=16)
    backend = loaded_as(model).backend
    assert (backend.name, backend.load_in_4bit) == ("unsloth", True)
    # no vLLM on this machine: fast_inference="auto" falls back to transformers' generate and says why
    assert not backend.fast_inference and "fast_inference off" in backend.reason
    assert four_bit_layers(model) == LINEAR_LAYERS
    assert trainable(model) and all("lora_" in name for name in trainable(model))
    # unsloth/models/_utils.py apply_unsloth_gradient_checkpointing: "unsloth" (activations offloaded to the CPU)
    # from max_seq_length 512 up, which load_model's default 2048 is; plain checkpointing below
    assert model._unsloth_gradient_checkpointing == "unsloth"
    assert model.get_input_embeddings().weight.dtype == torch.bfloat16  # compute capability 9.0 has bf16
    assert model.max_seq_length == 2048 and tokenizer.pad_token is not None


def test_transformers_backend_loads_4bit_through_bitsandbytes(model_dir):
    model, _ = load_model(str(model_dir), backend="transformers", lora_rank=16)
    backend = loaded_as(model).backend
    assert (backend.name, backend.load_in_4bit, backend.fast_inference) == ("transformers", True, False)
    assert four_bit_layers(model) == LINEAR_LAYERS
    assert trainable(model) and all("lora_" in name for name in trainable(model))
    assert model.is_gradient_checkpointing  # peft's prepare_model_for_kbit_training turns it on
    assert {parameter.device.type for parameter in model.parameters()} == {"cuda"}
