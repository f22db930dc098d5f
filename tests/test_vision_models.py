"""Vision-language models: the tiny ones build_tiny_model writes with each family's real processor and chat template, and
load_model loads them with their processor, LoRA on the language layers unless the vision tower is asked for."""

from __future__ import annotations

import ast
import importlib.util
import sys
import types
from pathlib import Path

import pytest
from families import IMAGE_TOKENS, VISION_FAMILIES, has_torchvision

from grpo_lite.errors import UserError
from grpo_lite.model.load import Backend, _load_unsloth, load_model
from grpo_lite.model.lora import LayerChoice
from grpo_lite.run.settings import ConfigError

pytestmark = pytest.mark.cuda_build
needs_torchvision = pytest.mark.skipif(not has_torchvision(), reason="processors need torchvision (docs/stacks.md, "
                                       "'torchvision': .ci/run runs these in .venv-vision and .venv-t4)")
FAMILY = pytest.mark.parametrize("family", VISION_FAMILIES, ids=[family.name for family in VISION_FAMILIES])
VISION_PARTS = ("visual", "vision_tower", "vision_model")  # where Qwen-VL, Gemma 3 and Mllama keep their vision tower


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("vision")
    return {family.name: family.build(root) for family in VISION_FAMILIES}


def _prompt(text: str = "What is 2 + 2?") -> list[dict]:
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]


def image_token_of(processor, family) -> int:
    return processor.tokenizer.convert_tokens_to_ids(IMAGE_TOKENS[family.name][0])


def _lora_paths(model) -> list[str]:
    return [name.removesuffix(".lora_A") for name, _ in model.named_modules() if name.endswith(".lora_A")]


@needs_torchvision
@FAMILY
def test_a_tiny_vision_model_renders_one_image_and_runs_forward(family, folders):
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(folders[family.name])
    model = AutoModelForImageTextToText.from_pretrained(folders[family.name])
    assert model.config.model_type == {"qwen2.5-vl": "qwen2_5_vl", "qwen2-vl": "qwen2_vl",
                                       "gemma-3-vision": "gemma3", "llama-3.2-vision": "mllama"}[family.name]
    assert processor.chat_template == family.chat_template()
    # random weights would sample image tokens into a completion, whose forward then finds more image tokens than images
    assert image_token_of(processor, family) in model.generation_config.suppress_tokens
    text = processor.apply_chat_template(_prompt(), add_generation_prompt=True, tokenize=False)
    assert text.endswith(family.generation_prompt) and "What is 2 + 2?" in text
    inputs = processor(text=[text], images=[Image.new("RGB", (56, 56), "red")], return_tensors="pt")
    image_token = image_token_of(processor, family)
    # a 56-pixel image: a 4x4 grid of 14-pixel patches, pooled 2x2 into 4 tokens, or one token for the image (Mllama)
    assert inputs["input_ids"][0].tolist().count(image_token) == IMAGE_TOKENS[family.name][1]
    with torch.no_grad():
        logits = model(**inputs).logits
    assert logits.shape[:2] == inputs["input_ids"].shape and torch.isfinite(logits).all()


@needs_torchvision
@FAMILY
def test_without_a_chat_template_a_vision_family_gets_chatml_that_writes_its_image_tokens(family, tmp_path):
    """Smoke-mode notebooks build one with no template of their own: each image part must reach the processor."""
    from PIL import Image
    from transformers import AutoProcessor

    from grpo_lite.model.tiny import build_tiny_model

    processor = AutoProcessor.from_pretrained(build_tiny_model(tmp_path, family=family.family))
    text = processor.apply_chat_template(_prompt(), add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n") and "What is 2 + 2?" in text
    inputs = processor(text=[text], images=[Image.new("RGB", (56, 56), "red")], return_tensors="pt")
    assert inputs["input_ids"][0].tolist().count(image_token_of(processor, family)) == IMAGE_TOKENS[family.name][1]


@needs_torchvision
@FAMILY
def test_load_model_puts_lora_on_the_language_layers_unless_asked(family, folders, caplog):
    from transformers import ProcessorMixin

    model, processor = load_model(folders[family.name], backend="cpu", load_in_4bit=False)
    assert isinstance(processor, ProcessorMixin)  # TRL's GRPOTrainer takes it as processing_class
    language = _lora_paths(model)
    assert language and not [path for path in language if any(part in path for part in VISION_PARTS)]
    assert "left out: the vision tower (finetune_vision_layers=True adapts it)" in caplog.text
    assert "a vision-language model: it loads with its processor" in caplog.text

    caplog.clear()
    model, _ = load_model(folders[family.name], backend="cpu", load_in_4bit=False, finetune_vision_layers=True)
    both = _lora_paths(model)
    assert set(language) < set(both) and [path for path in both if any(part in path for part in VISION_PARTS)]
    assert "vision (" in caplog.text and "the vision tower" not in caplog.text


@needs_torchvision
def test_finetune_flags_narrow_the_layers_and_refuse_none(folders):
    folder = folders["gemma-3-vision"]
    model, _ = load_model(folder, backend="cpu", load_in_4bit=False, finetune_vision_layers=True, finetune_mlp_modules=False,
                          finetune_language_layers=False)
    paths = _lora_paths(model)
    assert paths and all("vision_tower" in path and "self_attn" in path for path in paths)
    with pytest.raises(ConfigError, match="finetune_vision_layers=False, finetune_language_layers=False"):
        load_model(folder, backend="cpu", load_in_4bit=False, finetune_language_layers=False)


@needs_torchvision
def test_an_export_of_a_vision_model_with_its_text_tokenizer_alone_is_refused_before_anything_is_written(folders, tmp_path):
    """A folder written with ``processor.tokenizer`` holds no image processor: AutoProcessor cannot load it. Every way
    of exporting refuses it, naming the fix; with the processor the folder loads (tests/test_vision.py)."""
    from grpo_lite import export
    from grpo_lite.model.exporter import ExportError

    model, processor = load_model(str(folders[VISION_FAMILIES[0].name]), lora_rank=8)
    for how in ("adapter", "merged_16bit", "merged_4bit", "gguf"):
        with pytest.raises(ExportError, match=r"is a vision-language model and the \w+ given is a text tokenizer "
                                              r"\(processor.tokenizer\?\).*export\(model, processor, \.\.\.\)"):
            export(model, processor.tokenizer, tmp_path / how, how=how)
        assert not (tmp_path / how).exists()


def test_a_vision_model_without_torchvision_is_refused_with_the_fix(tmp_path, monkeypatch):
    folder = VISION_FAMILIES[0].build(tmp_path)
    monkeypatch.setitem(sys.modules, "torchvision", None)  # import torchvision raises ModuleNotFoundError
    with pytest.raises(UserError, match="needs torchvision, which is not installed: install the torchvision release"):
        load_model(folder, backend="cpu", load_in_4bit=False)


class _FakeUnsloth:
    """Stands for Unsloth's FastLanguageModel or FastVisionModel on a CPU: loads through transformers and records what
    get_peft_model is given."""

    calls: list = []

    def __init__(self, name):
        self.name = name

    def from_pretrained(self, model_name, **kwargs):
        from transformers import AutoModelForImageTextToText

        self.calls.append((self.name, "from_pretrained", kwargs))
        return AutoModelForImageTextToText.from_pretrained(model_name), None

    def get_peft_model(self, model, **kwargs):
        self.calls.append((self.name, "get_peft_model", kwargs))
        return model


def test_the_unsloth_path_loads_a_vision_model_through_fastvisionmodel(folders_without_processor, monkeypatch):
    fake = types.ModuleType("unsloth")
    fake.FastVisionModel = _FakeUnsloth("FastVisionModel")  # a text model's loader would fail here: there is none
    monkeypatch.setitem(sys.modules, "unsloth", fake)
    _FakeUnsloth.calls.clear()
    backend = Backend("unsloth", "test", load_in_4bit=True, fast_inference=False)
    lora_options = dict(lora_dropout=0.0, bias="none", use_rslora=False, init_lora_weights=True, modules_to_save=None,
                        layers_to_transform=None, layers_pattern=None, ensure_weight_tying=None)  # as load_model gives them
    _load_unsloth(str(folders_without_processor), backend, 1024, 8, 16, "all-linear", "auto", 3407, {}, lora_options,
                  vision=True, layers=LayerChoice(vision=False))
    (loader, _, loaded), (peft_loader, _, peft) = _FakeUnsloth.calls
    assert loader == peft_loader == "FastVisionModel" and loaded["load_in_4bit"] is True
    assert peft["finetune_vision_layers"] is False and peft["finetune_language_layers"] is True
    assert peft["use_gradient_checkpointing"] == "unsloth" and peft["random_state"] == 3407
    # "all-linear" as None: FastVisionModel builds its targets from the flags (its own "all-linear" turns them all on)
    assert peft["target_modules"] is None
    _FakeUnsloth.calls.clear()
    _load_unsloth(str(folders_without_processor), backend, 1024, 8, 16, ["q_proj", "self_attn.v_proj"], "auto", 3407, {},
                  lora_options, vision=True, layers=LayerChoice(vision=False))
    assert _FakeUnsloth.calls[-1][2]["target_modules"] == ["q_proj", "v_proj"]  # leaf names, which its flags scope
    # every keyword handed over is a named parameter of the installed Unsloth's FastVisionModel.from_pretrained (FastModel's,
    # unsloth/models/loader.py) and get_peft_model (FastBaseModel's, unsloth/models/vision.py), read from their files:
    # importing Unsloth patches transformers
    monkeypatch.delitem(sys.modules, "unsloth")
    spec = importlib.util.find_spec("unsloth")
    if spec is None:
        pytest.skip("Unsloth is not installed: its loaders' parameters cannot be read")
    assert set(loaded) <= _parameters(Path(spec.origin).parent / "models" / "loader.py", "FastModel", "from_pretrained")
    assert set(peft) <= _parameters(Path(spec.origin).parent / "models" / "vision.py", "FastBaseModel", "get_peft_model")


def _parameters(source: Path, cls: str, method: str) -> set[str]:
    tree = ast.parse(source.read_text())
    owner = next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == cls)
    function = next(node for node in owner.body if isinstance(node, ast.FunctionDef) and node.name == method)
    return {argument.arg for argument in function.args.args + function.args.kwonlyargs}


@pytest.fixture
def folders_without_processor(tmp_path):
    return VISION_FAMILIES[0].build(tmp_path)


@needs_torchvision
def test_a_vision_model_trains_its_lora_over_4bit_weights_on_the_cpu(folders):
    pytest.importorskip("bitsandbytes")
    from PIL import Image

    model, processor = load_model(folders["qwen2.5-vl"], backend="transformers", load_in_4bit=True)
    text = processor.apply_chat_template(_prompt(), add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[text], images=[Image.new("RGB", (56, 56), "red")], return_tensors="pt")
    model.train()
    model(**inputs, labels=inputs["input_ids"]).loss.backward()
    trained = [name for name, parameter in model.named_parameters() if parameter.grad is not None]
    assert trained and all("lora_" in name and "visual" not in name for name in trained)


@FAMILY
def test_the_planner_counts_the_vision_tower_with_the_language_model(family, folders):
    """plan() weighs a vision-language model whole: the language model's shape from its text config, and the vision tower
    with its projector counted on a model built on the meta device (grpo_lite.machine.planner, _vision_tower)."""
    from transformers import AutoModelForImageTextToText

    from grpo_lite.machine.planner import model_shape

    shape = model_shape(folders[family.name])
    model = AutoModelForImageTextToText.from_pretrained(folders[family.name])
    towers = (*VISION_PARTS, "multi_modal_projector")  # Gemma 3's projector sits beside its tower
    vision = sum(p.numel() for name, p in model.named_parameters() if any(part in name for part in towers))
    assert shape.vision_params == vision > 0
    planned = shape.layers * shape.linear_params_per_layer + shape.embedding_params + shape.vision_params
    assert 0.99 < planned / sum(p.numel() for p in model.parameters()) <= 1.0  # all but the norms


@needs_torchvision
@FAMILY
def test_the_out_of_memory_planner_sees_the_image_tokens_of_the_longest_prompt(family, folders):
    """When a run runs out of memory, the planner is given the run as it was (grpo_lite.guards.out_of_memory): for image
    rows, the image tokens among the longest prompt's, which its vision tower runs over."""
    from types import SimpleNamespace

    from PIL import Image
    from transformers import AutoProcessor

    from grpo_lite import prepare_dataset
    from grpo_lite.guards.out_of_memory import _longest_prompt

    processor = AutoProcessor.from_pretrained(folders[family.name])
    rows = [{"question": "What colour?", "answer": "red", "image": Image.new("RGB", (56, 56), "red")},
            {"question": "What colour is the square in the middle of this picture?", "answer": "blue",
             "image": Image.new("RGB", (112, 56), "blue")}]
    dataset = prepare_dataset(rows, tokenizer=processor)
    longest, image_tokens = _longest_prompt(SimpleNamespace(train_dataset=dataset, processing_class=processor))
    # 56 pixels a side: 4 tokens (14-pixel patches pooled 2x2); Qwen-VL gives the wider image 8, Gemma 3 resizes every
    # image to its one square, Mllama writes one token for an image whatever its size
    assert image_tokens == {"gemma-3-vision": 4, "llama-3.2-vision": 1}.get(family.name, 8)
    assert longest > image_tokens
