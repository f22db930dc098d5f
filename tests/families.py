"""The model families users load, as tiny random models carrying each family's real chat template.

Each template in tests/data/chat_templates is copied verbatim (the template text the model's tokenizer carries) from
the public source named beside it. ``generation_prompt`` is how a rendered prompt must end: where the assistant's turn
begins. ``system`` is what the template does with a system turn, which grpo-lite keeps, folds or refuses. ``lora_modules``
are the weights LoRA goes on by default, as load_model names them: the family's linear layers but the output layer, and
the experts' parameters where a family keeps its experts so (gpt-oss), the router left out; ``lora_modules_4`` where
transformers 4 lays them out otherwise (a mixture's experts as a list of MLPs there). ``lora_blocks`` counts the blocks of
each kind that carry LoRA, which is the same on both ends of the supported range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grpo_lite.machine import stack

TEMPLATES = Path(__file__).parent / "data" / "chat_templates"
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# Phi-3/3.5/4, in the order transformers' Phi3Attention and Phi3MLP hold them
FUSED_PROJECTIONS = ("o_proj", "qkv_proj", "gate_up_proj", "down_proj")
# gpt-oss: the attention projections, and its MLP as the experts' parameters (transformers' GptOssExperts)
EXPERT_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "experts.gate_up_proj", "experts.down_proj")
# Gemma 3n, in the order transformers' Gemma3nTextModel holds them: each decoder layer's attention, MLP, AltUp and
# LAuReL layers and per-layer input projections, then the model's own, two of them in lists (named by their index)
MLA_PROJECTIONS = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")  # DeepSeek-V3's attention
MLP_PROJECTIONS = PROJECTIONS[4:]
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
    lora_blocks: dict[str, int] = field(default_factory=lambda: {"attention": 2, "MLP": 2})
    lora_modules_4: tuple[str, ...] | None = None

    def expected_lora_modules(self) -> tuple[str, ...]:
        """The weights LoRA goes on by default with the installed transformers."""
        older = stack.installed("transformers").major < 5
        return self.lora_modules_4 if self.lora_modules_4 is not None and older else self.lora_modules

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
    ModelFamily("gemma-3n", "gemma-3n", "gemma-3n.jinja", "<start_of_turn>model\n", "kept", GEMMA_3N_LAYERS,
                {"attention": 2, "MLP": 2, "other": 9}),
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
    ModelFamily("gpt-oss", "gpt-oss", "gpt-oss.jinja", "<|start|>assistant", "kept", EXPERT_PROJECTIONS,
                {"attention": 2, "experts": 2}),
    # Mixtures of experts. Qwen/Qwen3-30B-A3B (Qwen3-MoE) was released with the Qwen3 family's first chat template, the
    # one above (TRL 1.15 recognises only its later revision, trl/chat_templates/qwen3.jinja)
    ModelFamily("qwen3-moe", "qwen3-moe", "qwen3.jinja", "<|im_start|>assistant\n", "kept", EXPERT_PROJECTIONS,
                {"attention": 2, "experts": 2}, PROJECTIONS),
    # deepseek-ai/DeepSeek-V3.1's chat_template: ggml-org/llama.cpp models/templates/deepseek-ai-DeepSeek-V3.1.jinja, mirror
    # ye-NX/llama.cpp at commit 1eeb523c3e0c7ffbd59469f5463dcbdecba3535e (last changed by llama.cpp's commit
    # 88021565f08e0b7c4e07ac089a15ec16fae9166c); the same text as Ollama's deepseek-v3.1 in chat-template-automap.ts below.
    # Its dense first MLP and its shared expert are MLPs, its routed experts experts
    ModelFamily("deepseek-v3.1", "deepseek-v3", "deepseek-v3.1.jinja", "<\uff5cAssistant\uff5c></think>", "kept",
                (*MLA_PROJECTIONS, *MLP_PROJECTIONS, "experts.gate_up_proj", "experts.down_proj"),
                {"attention": 2, "MLP": 2, "experts": 1}, (*MLA_PROJECTIONS, *MLP_PROJECTIONS)),
    # meta-llama/Llama-4-Scout-17B-16E-Instruct's chat_template: huggingface/huggingface.js
    # packages/ollama-utils/src/chat-template-automap.ts, "library/llama4:latest" (the template its GGUF carries from
    # tokenizer_config.json), at commit fe42e68017ffc76d09922ea8f9b38a6964345710. Its text model: a dense MLP in the first
    # layer, experts beside a shared MLP in the second
    ModelFamily("llama-4", "llama-4", "llama-4.jinja", "<|header_start|>assistant<|header_end|>\n\n", "kept",
                (*PROJECTIONS, "experts.gate_up_proj", "experts.down_proj"), {"attention": 2, "MLP": 2, "experts": 1}),
    # mistralai/Mixtral-8x7B-Instruct-v0.1's chat_template: chat-template-automap.ts (above), "library/mixtral:8x7b"
    ModelFamily("mixtral", "mixtral", "mixtral.jinja", " [/INST]", "kept", EXPERT_PROJECTIONS,
                {"attention": 2, "experts": 2}, (*PROJECTIONS[:4], "w1", "w2", "w3")),
    # ibm-granite/granite-4.0-h-*'s chat_template: chat-template-automap.ts (above), "library/granite4:latest". A Mamba-2
    # layer (other) and an attention layer, each with experts and a shared MLP
    ModelFamily("granite-4", "granite-4", "granite-4.jinja", "<|start_of_role|>assistant<|end_of_role|>", "kept",
                ("experts.gate_up_proj", "experts.down_proj", "input_linear", "output_linear", "in_proj", "out_proj",
                 *PROJECTIONS[:4]), {"attention": 1, "MLP": 2, "experts": 2, "other": 1},
                ("block_sparse_moe.input_linear.weight", "block_sparse_moe.output_linear.weight", "shared_mlp.input_linear",
                 "shared_mlp.output_linear", "in_proj", "out_proj", *PROJECTIONS[:4])),
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
    # meta-llama/Llama-3.2-11B-Vision-Instruct's chat_template: chat-template-automap.ts (above), "library/llama3.2-vision:
    # latest": the revision that takes a system turn with images (huggingface/swift-jinja's predecessor johnmai-dev/Jinja
    # Tests/Templates/VisionTests.swift, at commit bb238dd96fbe4c18014f3107c00edd6edb15428e, holds the first, which refuses
    # one). Its MLP sits in the self- and the cross-attention layers alike
    ModelFamily("llama-3.2-vision", "mllama", "llama-3.2-vision.jinja", "<|start_header_id|>assistant<|end_header_id|>\n\n",
                "kept"),
]
# The token the processor writes for an image, and how many of them for a 56-pixel one
IMAGE_TOKENS = {"qwen2.5-vl": ("<|image_pad|>", 4), "qwen2-vl": ("<|image_pad|>", 4),
                "gemma-3-vision": ("<image_soft_token>", 4), "llama-3.2-vision": ("<|image|>", 1)}

BY_NAME = {family.name: family for family in FAMILIES + VISION_FAMILIES}


def has_torchvision() -> bool:
    """Whether torchvision imports: vision-language processors need it (docs/stacks.md, "torchvision")."""
    try:
        import torchvision  # noqa: F401
    except Exception:  # absent, or a build for another torch
        return False
    return True
