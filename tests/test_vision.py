"""Vision-language GRPO through the one path text takes: tiny models of three families (tests/families.py,
VISION_FAMILIES) with image rows from prepare_dataset train two steps through train(), each sample in samples.jsonl
refers to its image and the dashboard shows it; generate, evaluate and preview take the image rows; the exported
adapter and merged model reload with plain transformers to the same logits on an image prompt."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from families import VISION_FAMILIES, has_torchvision
from PIL import Image

from grpo_lite import evaluate, export, generate, load_model, prepare_dataset, preview, read_metrics, show_run, train
from grpo_lite.data.prompts import render_prompt
from grpo_lite.machine import stack
from grpo_lite.monitor.samples import read_samples
from grpo_lite.monitor.views import frame_html

pytestmark = [pytest.mark.cuda_build, pytest.mark.skipif(
    not has_torchvision(), reason="processors need torchvision (docs/stacks.md, 'torchvision': .ci/run runs these in "
                                  ".venv-vision and .venv-t4)")]
FAMILY = pytest.mark.parametrize("family", VISION_FAMILIES, ids=[family.name for family in VISION_FAMILIES])
COLOURS = ["red", "green", "blue", "yellow"]
TWO_STEPS = dict(preset="cpu-smoke", max_steps=2, num_generations=4, per_device_train_batch_size=4, max_completion_length=8,
                 learning_rate=5e-3)


def colour_reward(completions, answer, **kwargs):
    """1 for naming the picture's colour; characters / 1000 tell a random model's completions apart."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [float(a in t) + len(t) / 1000 for t, a in zip(texts, answer)]


def text_reward(prompts, completions, **kwargs):
    """1 where the prompt and the completion come as text, as Unsloth's vision notebooks' rewards read them."""
    return [float(isinstance(p, str) and isinstance(c, str)) for p, c in zip(prompts, completions)]


def colour_rows():
    return [{"question": "What colour is this picture?", "answer": colour, "image": Image.new("RGB", (32, 32), colour)}
            for colour in COLOURS * 2]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("vision")
    return {family.name: family.build(root) for family in VISION_FAMILIES}


def _lora_b(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters() if "lora_B" in name}


@FAMILY
def test_a_vision_model_trains_on_image_rows_and_each_sample_shows_its_image(family, folders, tmp_path):
    model, processor = load_model(str(folders[family.name]), lora_rank=8)
    dataset = prepare_dataset(colour_rows())
    before = _lora_b(model)
    train(model, processor, dataset, [colour_reward], output_dir=tmp_path / "run", dashboard=True, **TWO_STEPS)

    records = read_metrics(tmp_path / "run")
    assert [r["step"] for r in records] == [1, 2] and all(math.isfinite(r["loss"]) for r in records)
    assert any(not torch.equal(before[name], p) for name, p in _lora_b(model).items())  # the adapter moved
    samples = read_samples(tmp_path / "run")
    assert samples and all(len(row["images"]) == 1 and (tmp_path / "run" / row["images"][0]).is_file() for row in samples)
    assert all(row["prompt"][-1]["content"][0] == {"type": "image"} for row in samples)  # a placeholder, no pixels
    page = frame_html(show_run(tmp_path / "run", view="log").frame())
    assert 'class="grpo-lite-thumbnail"' in page


@FAMILY
def test_generate_evaluate_preview_and_export_take_image_rows(family, folders, tmp_path, caplog):
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model, processor = load_model(str(folders[family.name]), lora_rank=8)
    for name, p in model.named_parameters():  # an adapter that changes the logits, as a trained one does
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.05)
    dataset = prepare_dataset(colour_rows())
    assert len(generate(model, processor, dataset.select(range(2)), max_completion_length=4)) == 2
    # a 16-bit scan given to generate directly reaches the processor scaled, as prepare_dataset gives it, and said
    scan = Image.fromarray(np.array([[1000, 60000] * 16] * 32, dtype=np.uint16))
    with caplog.at_level("INFO", logger="grpo_lite"):
        given = generate(model, processor, [{"prompt": dataset[0]["prompt"], "image": scan}], max_completion_length=4)
    assert "generate: images a vision processor would not show as they are: 1 in mode I;16" in caplog.text
    scaled = prepare_dataset([{"question": "q", "answer": "a", "image": scan}])[0]["image"]
    assert given == generate(model, processor, [{"prompt": dataset[0]["prompt"], "image": scaled}], max_completion_length=4)
    report = evaluate(model, processor, dataset, [colour_reward, text_reward], max_completion_length=4)
    assert report.n == len(dataset)
    found = preview(model, processor, dataset, [colour_reward, text_reward], n_prompts=2, num_generations=2,
                    max_completion_length=4)
    assert len(found.groups) == 2
    # the rewards get what training gives them: text on image rows from TRL 0.24 on (as Unsloth's trainer), else messages
    as_text = float(stack.newer("image_rewards_as_text"))
    assert report.mean_rewards["text_reward"] == as_text
    assert {float(isinstance(row["completion"], str)) for row in found.rows} == {as_text}

    row = dataset[2]
    text = render_prompt(processor, row["prompt"])

    def logits(m, p):
        inputs = p(text=[text], images=[row["image"]], return_tensors="pt")
        with torch.no_grad():
            return m(**inputs).logits.float()

    model.eval()
    expected = logits(model, processor)
    merged = export(model, processor, tmp_path / "merged", how="merged_16bit", dtype=torch.float32)
    reloaded = AutoModelForImageTextToText.from_pretrained(merged).eval()
    assert torch.allclose(logits(reloaded, AutoProcessor.from_pretrained(merged)), expected, atol=1e-4)
    adapter = export(model, processor, tmp_path / "adapter", how="adapter")
    base = AutoModelForImageTextToText.from_pretrained(folders[family.name])
    with_adapter = PeftModel.from_pretrained(base, adapter).eval()
    assert torch.allclose(logits(with_adapter, AutoProcessor.from_pretrained(adapter)), expected, atol=1e-4)


@pytest.mark.parametrize("family", [VISION_FAMILIES[0]], ids=[VISION_FAMILIES[0].name])
def test_a_ported_max_prompt_length_cuts_image_prompts_as_trl_0_22_did_or_is_refused_where_trl_removed_it(
        family, folders, tmp_path, caplog):
    """Unsloth's Qwen2.5-VL notebook sets max_prompt_length with images. TRL 0.22 cuts such a prompt itself, keeping
    the image's tokens (trl 0.22.2, truncate_with_protected_tokens); TRL 1.15 removed the field and renders a prompt with
    images again for its log-probabilities, so a cut is refused there, naming the value that keeps the prompts whole."""
    from grpo_lite.data.prepare import prompt_lengths
    from grpo_lite.machine import stack
    from grpo_lite.run.settings import ConfigError

    model, processor = load_model(str(folders[family.name]), lora_rank=8)
    dataset = prepare_dataset(colour_rows(), tokenizer=processor)
    lengths = prompt_lengths(dataset, processor)
    rendered = processor(text=[render_prompt(processor, dataset[0]["prompt"])], images=[dataset[0]["image"]])
    image_tokens = sum(i == processor.image_token_id for i in rendered["input_ids"][0])
    limit = image_tokens + 6  # the image (and its start and end) and a few text tokens
    assert limit < min(lengths)
    run = dict(output_dir=tmp_path / "run", dashboard=False, max_prompt_length=limit, **TWO_STEPS)
    if stack.has_config_field("max_prompt_length"):
        with caplog.at_level("INFO", logger="grpo_lite"):
            train(model, processor, dataset, [colour_reward], **run)
        assert [r["step"] for r in read_metrics(tmp_path / "run")] == [1, 2]
        assert f"cuts {len(lengths)} of {len(lengths)} prompts on the left to their last max_prompt_length={limit}" in caplog.text
    else:
        with pytest.raises(ConfigError, match=rf"^max_prompt_length={limit} would cut {len(lengths)} of {len(lengths)} prompts "
                                              rf"with images .* Set max_prompt_length={max(lengths)} \(keeps them whole\)"):
            train(model, processor, dataset, [colour_reward], **run)
        assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_generate_gives_vllm_each_prompt_with_its_images_as_unsloths_vision_notebooks_do(folders, tmp_path):
    """With a vLLM engine on the model (Unsloth's fast_inference), a prompt with images goes as
    ``{"prompt": text, "multi_modal_data": {"image": ...}}`` (nb/Qwen2_5_7B_VL_GRPO.ipynb's fast_generate cells).
    vLLM cannot be installed here: a stand-in package and engine (tests/vllm_stand_in.py) render the prompt with its
    images through the processor and sample with the model's own generate, in a fresh interpreter."""
    from pathlib import Path

    from real_unsloth import run_script
    from vllm_stand_in import write_vllm

    stand_in = write_vllm(tmp_path / "stand-in", "0.11.2")
    done = run_script(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from PIL import Image
        from vllm_stand_in import SharedWeightsEngine
        from grpo_lite import generate, load_model, prepare_dataset

        model, processor = load_model({str(folders[VISION_FAMILIES[0].name])!r}, lora_rank=8)
        engine = SharedWeightsEngine(model, processor)
        model.vllm_engine, model.fast_generate = engine, engine.generate
        rows = prepare_dataset([{{"question": "What colour?", "answer": c, "image": Image.new("RGB", (32, 32), c)}}
                                for c in ("red", "blue")])
        texts = generate(model, processor, rows, max_completion_length=4, adapter=False)
        result({{"texts": texts, "images": [[image.size for image in prompt] for call in engine.calls for prompt in call["images"]]}})
    """, tmp_path, prelude=f"import sys\nsys.path.insert(0, {str(stand_in)!r})\n")
    assert len(done["texts"]) == 2 and all(isinstance(text, str) for text in done["texts"])
    assert done["images"] == [[[32, 32]], [[32, 32]]]  # each prompt reached vLLM with its own image
