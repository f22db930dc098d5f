"""The vision-language families (tests/families.py, VISION_FAMILIES) through Unsloth's FastVisionModel on a CUDA GPU:
each loads 4-bit with LoRA on its language layers, trains two steps on image rows and generates from one. The
keywords load_model gives FastVisionModel are checked on a CPU against the installed Unsloth (tests/test_vision_models.py);
here they run. Skipped without torchvision, which vision processors need (docs/stacks.md, "torchvision")."""

import pytest
from families import VISION_FAMILIES, has_torchvision
from on_gpu import characters_reward
from PIL import Image

from grpo_lite import generate, load_model, prepare_dataset, train
from grpo_lite.model.load import loaded_as

pytestmark = pytest.mark.skipif(not has_torchvision(), reason="vision processors need torchvision, which this machine lacks")
SIZE = dict(dtype="bfloat16")
ROWS = [{"question": "What colour is this picture?", "answer": colour, "image": Image.new("RGB", (56, 56), colour)}
        for colour in ("red", "green", "blue", "yellow")]
TWO_STEPS = dict(max_steps=2, num_generations=4, per_device_train_batch_size=4, max_completion_length=16, learning_rate=5e-4,
                 save_steps=100, dashboard=False)


@pytest.fixture(scope="module")
def vision_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("vision")
    return {family.name: family.build(root, **SIZE) for family in VISION_FAMILIES}


@pytest.mark.parametrize("family", VISION_FAMILIES, ids=[family.name for family in VISION_FAMILIES])
def test_each_vision_family_loads_trains_on_images_and_generates_through_unsloth(family, vision_dirs, tmp_path):
    model, processor = load_model(str(vision_dirs[family.name]), backend="unsloth", lora_rank=8)
    assert loaded_as(model).backend.name == "unsloth" and loaded_as(model).backend.load_in_4bit
    dataset = prepare_dataset(ROWS, tokenizer=processor)
    result = train(model, processor, dataset, [characters_reward], output_dir=tmp_path, **TWO_STEPS)
    assert result.trainer.state.global_step == 2
    assert all(".visual." not in name and ".vision_tower." not in name
               for name, p in result.model.named_parameters() if "lora_" in name)  # the language layers only
    texts = generate(model, processor, dataset.select(range(1)), max_completion_length=8)
    assert len(texts) == 1 and isinstance(texts[0], str)
