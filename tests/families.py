"""The model families users load, as tiny random models carrying each family's real chat template.

Each template in tests/data/chat_templates is copied verbatim (the template text the model's tokenizer carries) from
the public source named beside it. ``generation_prompt`` is how a rendered prompt must end: where the assistant's turn
begins. ``system`` is what the template does with a system turn, which grpo-lite keeps, folds or refuses. ``lora_modules``
are the weights LoRA goes on by default, as load_model names them: the family's linear layers but the output layer, and
the experts' parameters where a family keeps its experts so (gpt-oss), the router left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TEMPLATES = Path(__file__).parent / "data" / "chat_templates"
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# Phi-3/3.5/4, in the order transformers' Phi3Attention and Phi3MLP hold them
FUSED_PROJECTIONS = ("o_proj", "qkv_proj", "gate_up_proj", "down_proj")
# gpt-oss: the attention projections, and its MLP as the experts' parameters (transformers' GptOssExperts)
EXPERT_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "experts.gate_up_proj", "experts.down_proj")
# Gemma 3n, in the order transformers' Gemma3nTextModel holds them: each decoder layer's attention, MLP, AltUp and
# LAuReL layers and per-layer input projections, then the model's own, two of them in lists (named by their index)
GEMMA_3N_LAYERS = (*PROJECTIONS, "correction_coefs", "prediction_coefs", "modality_router", "linear_left", "linear_right",
                   "per_layer_input_gate", "per_layer_projection", "per_layer_model_projection", "altup_projections.0",
                   "altup_unembed_projections.0")


@dataclass(frozen=True)
class ModelFamily:
    name: str
    family: str  # grpo_lite.model.tiny.FAMILIES: the transformers classes and special tokens
    template: str  # file in tests/data/chat_templates
    generation_prompt: str
    system: str  # "kept" | "rejected" | "dropped"
    lora_modules: tuple[str, ...] = PROJECTIONS

    def chat_template(self) -> str:
        return (TEMPLATES / self.template).read_text()

    def build(self, path: Path, **options) -> Path:
        from grpo_lite.model.tiny import build_tiny_model

        return build_tiny_model(path / self.name, family=self.family, chat_template=self.chat_template(), **options)


FAMILIES = [
    # meta-llama/Llama-3.2-3B-Instruct's chat_template: ggml-org/llama.cpp models/templates/meta-llama-Llama-3.2-3B-Instruct.jinja,
    # read from the mirror ye-NX/llama.cpp at commit 1eeb523c3e0c7ffbd59469f5463dcbdecba3535e (last changed by llama.cpp's
    # commit 8b576b6c55bc4e6be898b47522f0ef402b93ef62)
    ModelFamily("llama-3.2", "llama-3.2", "llama-3.2.jinja", "<|start_header_id|>assistant<|end_header_id|>\n\n", "kept"),
    # Qwen/Qwen3-0.6B's chat_template: ggml-org/llama.cpp models/templates/Qwen-Qwen3-0.6B.jinja, mirror ye-NX/llama.cpp
    # at commit 1eeb523c3e0c7ffbd59469f5463dcbdecba3535e (last changed by llama.cpp's commit e121edc4324a640be11b7e567edd39b721b0f8e4)
    ModelFamily("qwen3", "qwen3", "qwen3.jinja", "<|im_start|>assistant\n", "kept"),
    # google/gemma-2-2b-it's chat_template: ggml-org/llama.cpp models/templates/google-gemma-2-2b-it.jinja, mirror
    # ye-NX/llama.cpp at commit 1eeb523c3e0c7ffbd59469f5463dcbdecba3535e (last changed by commit 8b576b6c55bc4e6be898b47522f0ef402b93ef62)
    ModelFamily("gemma-2", "gemma-2", "gemma-2.jinja", "<start_of_turn>model\n", "rejected"),
    # Gemma 3's chat_template: huggingface/transformers src/transformers/models/gemma3/convert_gemma3_weights.py,
    # _CHAT_TEMPLATE, at commit 0d7e95d96b4e187c651e2b2406ed98ed40d74963 (the converter that writes it into Gemma 3's
    # checkpoints); the same text as google/gemma-3-270m's GGUF template in huggingface/huggingface.js
    # packages/ollama-utils/src/chat-template-automap.ts ("library/gemma3:270m") at commit fe42e68017ffc76d09922ea8f9b38a6964345710
    ModelFamily("gemma-3", "gemma-3", "gemma-3.jinja", "<start_of_turn>model\n", "kept"),
    # google/gemma-3n-E4B-it's chat_template: unslothai/unsloth unsloth/chat_templates.py, gemma3n_template ("Obtained via
    # print(tokenizer.chat_template...)"), at commit 02658740e7a4cb0634470a1fc57573d6202acfbe; Gemma 3's text but for the
    # audio and image soft tokens of a multimodal turn
    ModelFamily("gemma-3n", "gemma-3n", "gemma-3n.jinja", "<start_of_turn>model\n", "kept", GEMMA_3N_LAYERS),
    # mistralai/Mistral-7B-Instruct-v0.1's chat_template: huggingface/huggingface.js packages/jinja/test/e2e.test.js,
    # "TheBloke/Mistral-7B-Instruct-v0.1-GPTQ" (its copy of v0.1's tokenizer_config.json), at commit
    # fe42e68017ffc76d09922ea8f9b38a6964345710; the same text as Ollama's mistral:7b-instruct in chat-template-automap.ts there
    ModelFamily("mistral-v0.1", "mistral", "mistral-v0.1.jinja", " [/INST]", "rejected"),
    # microsoft/Phi-3-mini-4k-instruct's first chat_template: ggml-org/llama.cpp tests/test-chat-template.cpp, the
    # "Phi-3-mini" case, mirror ye-NX/llama.cpp at commit 1eeb523c3e0c7ffbd59469f5463dcbdecba3535e
    ModelFamily("phi-3-mini", "phi-3", "phi-3-mini.jinja", "<|end|>\n<|assistant|>\n", "dropped",
                FUSED_PROJECTIONS),
    # HuggingFaceTB/SmolLM2-135M-Instruct's chat_template: huggingface/huggingface.js
    # packages/ollama-utils/src/chat-template-automap.ts, "library/smollm2:135m" (the template its GGUF carries from
    # tokenizer_config.json), at commit fe42e68017ffc76d09922ea8f9b38a6964345710
    ModelFamily("smollm2", "smollm2", "smollm2.jinja", "<|im_start|>assistant\n", "kept"),
    # HuggingFaceTB/SmolLM3-3B's chat_template: huggingface/swift-jinja Tests/JinjaTests/IntegrationTests.swift, the
    # "HuggingFaceTB SmolLM3-3B" test's template string (Swift escapes read), at commit 8552e80d0418a43a88743eb5d00f4ab56d45d240
    ModelFamily("smollm3", "smollm3", "smollm3.jinja", "<|im_start|>assistant\n", "kept"),
    # openai/gpt-oss-120b's chat_template: ggml-org/llama.cpp models/templates/openai-gpt-oss-120b.jinja, mirror
    # ye-NX/llama.cpp at commit 1eeb523c3e0c7ffbd59469f5463dcbdecba3535e (last changed by llama.cpp's commit b204a5a2);
    # the system turn becomes the developer message's instructions
    ModelFamily("gpt-oss", "gpt-oss", "gpt-oss.jinja", "<|start|>assistant", "kept", EXPERT_PROJECTIONS),
]

# A family whose chat template TRL reads tool calls out of (trl/chat_template_utils.py, add_response_schema: by the
# template's exact text): Qwen/Qwen2.5-*-Instruct's chat_template, as TRL 1.15.0 bundles it (trl/chat_templates/qwen2_5.jinja,
# "Original Qwen2.5 chat template"), on a tiny Qwen2 with ChatML's tokens. Not in FAMILIES: only the tool tests train it.
TOOL_CALLING = ModelFamily("qwen2.5", "qwen2", "qwen2.5.jinja", "<|im_start|>assistant\n", "kept")

# Vision-language families: ``image_tokens`` are the tokens the processor writes for one image
VISION_FAMILIES = [
    # Qwen/Qwen2.5-VL-*-Instruct's chat_template: xorbitsai/inference xinference/model/llm/models/qwen2.5-vl-instruct.json,
    # "chat_template", at commit fee81b4082b471323208ee0cd0684225fa5bc087 (JSON escapes read); the same text is
    # Qwen/Qwen2-VL-*-Instruct's there (qwen2-vl-instruct.json at commit ed62af21be4ee68255fd8e24cd658497eef0d6b6)
    ModelFamily("qwen2.5-vl", "qwen2.5-vl", "qwen2.5-vl.jinja", "<|im_start|>assistant\n", "kept"),
    ModelFamily("qwen2-vl", "qwen2-vl", "qwen2.5-vl.jinja", "<|im_start|>assistant\n", "kept"),
    # Gemma 3's template (above) writes <start_of_image> for an image item; the processor expands it
    ModelFamily("gemma-3-vision", "gemma-3-vision", "gemma-3.jinja", "<start_of_turn>model\n", "kept"),
]
IMAGE_TOKENS = {"qwen2.5-vl": "<|image_pad|>", "qwen2-vl": "<|image_pad|>", "gemma-3-vision": "<image_soft_token>"}

BY_NAME = {family.name: family for family in FAMILIES + VISION_FAMILIES}


def has_torchvision() -> bool:
    """Whether torchvision imports: vision-language processors need it (docs/stacks.md, "torchvision")."""
    try:
        import torchvision  # noqa: F401
    except Exception:  # absent, or a build for another torch
        return False
    return True
