"""Rows with images: every way a dataset gives an image is read, checked and shaped before a model loads, kept where TRL
reads it, placed in the prompt, and counted as the processor counts it."""

from __future__ import annotations

import inspect
import io
import json

import pytest
from datasets import Dataset, Features, Image, List, Value
from PIL import Image as PIL

from grpo_lite.data.prepare import check_prompts, prepare_dataset, prompt_lengths
from grpo_lite.data.prompts import DatasetError, fold_system, prompt_token_ids, render_prompt, text_messages
from grpo_lite.machine import stack
from grpo_lite.model.inference import generate
from grpo_lite.model.tiny import build_tokenizer

# A Qwen2-VL-shaped chat template: one <|image_pad|> per image part, which the processor expands per patch group.
VL_TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
               "{{ message['content'] }}{% else %}{% for part in message['content'] %}{% if part['type'] == 'image' %}"
               "<|vision_start|><|image_pad|><|vision_end|>{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
               "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def processor():
    """Qwen2.5-VL's processor over a tiny byte-level tokenizer, kept to this file: its video part is left out (it needs
    torchvision, which does not import beside the CPU torch here), the image path is transformers' own. The image
    processor is the PIL one (transformers 5 names it Qwen2VLImageProcessorPil; 4.56's Qwen2VLImageProcessor is PIL)."""
    import transformers
    from transformers import Qwen2_5_VLProcessor

    image_processor = getattr(transformers, "Qwen2VLImageProcessorPil", None) or transformers.Qwen2VLImageProcessor

    class ImageOnlyProcessor(Qwen2_5_VLProcessor):
        attributes = ["image_processor", "tokenizer"]  # transformers 4.x reads the parts from here
        tokenizer_class = "PreTrainedTokenizerFast"  # 4.x checks the tokenizer's class by this name

        @classmethod
        def get_attributes(cls):  # transformers 5 reads them from here
            return ["image_processor", "tokenizer"]

    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|vision_start|>", "<|image_pad|>", "<|vision_end|>",
                                                                "<|video_pad|>"]})
    tokenizer.chat_template = VL_TEMPLATE
    return ImageOnlyProcessor(image_processor=image_processor(min_pixels=28 * 28, max_pixels=28 * 28 * 64),
                              tokenizer=tokenizer, chat_template=VL_TEMPLATE)


def png(size=(40, 30), mode="RGB", color=None) -> bytes:
    buffer = io.BytesIO()
    PIL.new(mode, size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def rows(*images):
    return [{"question": f"What is shown {i}?", "answer": str(i), "image": image} for i, image in enumerate(images)]


def test_every_kind_of_image_value_becomes_an_image_trl_reads_with_one_placeholder_each(tmp_path):
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "a.png").write_bytes(png((20, 10)))
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(json.dumps({"question": f"q{i}", "answer": "1", "image": "pics/a.png"}) for i in range(2)))
    from_file = prepare_dataset(data, system_prompt="Look.")  # the path is read from the data file's folder
    assert from_file.features["image"] == Image() and from_file[0]["image"].size == (20, 10)
    assert from_file[0]["prompt"] == [{"role": "system", "content": [{"type": "text", "text": "Look."}]},
                                      {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "q0"}]}]

    given = [PIL.new("RGB", (8, 8)), png((9, 9), "L"), {"bytes": png((7, 5)), "path": None},
             {"bytes": None, "path": str(tmp_path / "pics" / "a.png")}]
    prepared = prepare_dataset(rows(*given), system_prompt=None)
    assert [image.size for image in prepared["image"]] == [(8, 8), (9, 9), (7, 5), (20, 10)]
    # Arrow stores parts as one struct: an image part reads back with text None, which text_messages (every render) drops
    assert [m["content"][0] for p in prepared["prompt"] for m in text_messages(p)] == [{"type": "image"}] * 4

    if not stack.newer("several_images"):  # TRL 0.22 reads one image a row: refused, naming the rows and the stack
        with pytest.raises(DatasetError, match=r"^row 0, column 'image': 1 rows hold other than one image, and TRL 0\.22\.2 "
                                               r"reads one image a row .*or train on TRL 0\.24\.0 or later"):
            prepare_dataset(rows([png(), png((5, 5))], [png()]), system_prompt=None)
        return
    several = prepare_dataset(rows([png(), png((5, 5))], [png()]), system_prompt=None)
    assert several.features["images"] == List(Image()) and "image" not in several.column_names
    assert [len(images) for images in several["images"]] == [2, 1]
    assert [sum(part["type"] == "image" for part in p[0]["content"]) for p in several["prompt"]] == [2, 1]


def test_a_datasets_image_column_is_read_undecoded_so_a_bad_image_is_named_not_raised_by_datasets():
    features = Features({"question": Value("string"), "answer": Value("string"), "image": Image()})
    good = Dataset.from_dict({"question": ["a", "b"], "answer": ["1", "2"], "image": [png(), png((3, 3))]}, features=features)
    assert [image.size for image in prepare_dataset(good)["image"]] == [(40, 30), (3, 3)]
    bad = Dataset.from_dict({"question": ["a", "b"], "answer": ["1", "2"], "image": [png(), png()[:60]]}, features=features)
    with pytest.raises(DatasetError, match=r"row 1, column 'image': the bytes are not an image PIL can read"):
        prepare_dataset(bad)


def test_images_are_resized_and_converted_as_the_notebooks_do():
    prepared = prepare_dataset(rows(png((100, 50), "RGBA"), png((10, 40), "L")), image_resize=(512, 512), image_convert="RGB")
    assert [(image.size, image.mode) for image in prepared["image"]] == [((512, 512), "RGB")] * 2
    longest = prepare_dataset(rows(png((100, 50)), png((10, 40))), image_resize=20)
    assert [image.size for image in longest["image"]] == [(20, 10), (5, 20)]
    with pytest.raises(DatasetError, match=r"image_resize=\(0, 5\): give the longest side"):
        prepare_dataset(rows(png()), image_resize=(0, 5))
    with pytest.raises(DatasetError, match=r"image_convert='CMYKX': give one of RGB"):
        prepare_dataset(rows(png()), image_convert="CMYKX")
    with pytest.raises(DatasetError, match=r"image_resize and image_convert apply to images, and the rows have none"):
        prepare_dataset([{"question": "q", "answer": "1"}], image_convert="RGB")


def test_every_bad_image_is_named_at_once_by_row_and_column_with_the_fix(tmp_path):
    bad = rows(png()[:50], str(tmp_path / "gone.png"), "https://example.com/cat.png", b"not an image", 42, None, [],
               [png(), "s3://bucket/x.png"], png())
    with pytest.raises(DatasetError) as refused:
        prepare_dataset(bad)
    message = str(refused.value)
    assert message.startswith("8 image values cannot be read")
    for expected in ("row 0, column 'image': the bytes are not an image PIL can read",
                     f"row 1, column 'image': image file {str(tmp_path / 'gone.png')!r} does not exist",
                     "row 2, column 'image': 'https://example.com/cat.png' is a URL, and nothing is fetched from the network "
                     "while preparing data: download the image first",
                     "row 3, column 'image': the bytes are not an image", "row 4, column 'image': expected an image",
                     "row 5, column 'image': the row has no image", "row 6, column 'image': the list of images is empty",
                     "row 7, column 'image', image 1: 's3://bucket/x.png' is a URL"):
        assert expected in message
    assert "row 8" not in message


def test_a_named_image_column_goes_where_trl_reads_it_and_is_not_kept_twice():
    prepared = prepare_dataset([{"question": "q", "answer": "1", "photo": png()}], image_column="photo")
    assert "photo" not in prepared.column_names and prepared[0]["image"].size == (40, 30)
    with pytest.raises(DatasetError, match=r"image_column=5: name the column holding each row's image"):
        prepare_dataset([{"question": "q", "answer": "1", "photo": png()}], image_column=5)
    with pytest.raises(DatasetError, match=r"column 'pic' \(image_column, the images\) is missing"):
        prepare_dataset([{"question": "q", "answer": "1", "photo": png()}], image_column="pic")
    with pytest.raises(DatasetError, match=r"the data has its own 'image': rename it, or pass image_column='image'"):
        prepare_dataset([{"question": "q", "answer": "1", "photo": png(), "image": "x"}], image_column="photo")
    text_only = prepare_dataset([{"question": "q", "answer": "1", "image": "not read"}], image_column=None)
    assert text_only[0]["image"] == "not read" and text_only[0]["prompt"][-1]["content"] == "q"


@pytest.mark.parametrize("column", ["image", "images"])
def test_the_columns_written_are_those_the_installed_trl_reads(column):
    """TRL 0.24 and later read images then image; TRL 0.22 reads image only (trl/trainer/grpo_trainer.py), as
    grpo_lite.machine.stack's several_images says."""
    from trl import GRPOTrainer

    reads = f'"{column}" in inputs[0]' in inspect.getsource(GRPOTrainer)
    assert reads == (column == "image" or stack.newer("several_images"))


def test_prepared_rows_give_one_image_per_placeholder_and_images_that_read():
    placed = [{"role": "user", "content": [{"type": "image"}, {"type": "image"}, {"type": "text", "text": "Which?"}]}]
    check_prompts([{"prompt": placed, "images": [png(), png()]}])
    check_prompts([{"prompt": [{"role": "user", "content": "Which?"}], "image": png()}])  # TRL places it
    with pytest.raises(DatasetError, match=r"row 1, column 'prompt': the prompt has 2 image placeholder\(s\) .* and the row "
                                           r"gives 1 in column 'images'"):
        check_prompts([{"prompt": placed, "images": [png(), png()]}, {"prompt": placed, "images": [png()]}])
    with pytest.raises(DatasetError, match=r"row 0, column 'prompt': the prompt has 2 .* no image column"):
        check_prompts([{"prompt": placed}])
    if stack.newer("text_prompts_with_images"):
        with pytest.raises(DatasetError, match=r"row 0, column 'prompt': the row has images \(column 'image'\) and its prompt "
                                               r"is text: give it as chat messages"):
            check_prompts([{"prompt": "Which?", "image": png()}])
    else:  # TRL 0.22 hands a text prompt to the processor as it is; with the processor, its image token is counted
        check_prompts([{"prompt": "Which?", "image": png()}])
    with pytest.raises(DatasetError, match=r"row 0, column 'image': 'http://x/y.png' is a URL"):
        check_prompts([{"prompt": placed[:1], "image": "http://x/y.png"}])


def test_a_text_prompt_with_images_is_taken_where_trl_hands_it_to_the_processor_holding_one_image_token_each(processor):
    """Unsloth's vision notebooks render their prompts for TRL before 0.24 (nb/Qwen2_5_7B_VL_GRPO.ipynb); TRL 0.22 hands
    such a text to the processor, which expands its image token, and TRL 0.25 on fails on it (``text_prompts_with_images``)."""
    rendered = render_prompt(processor, [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Which?"}]}])
    assert rendered.count("<|image_pad|>") == 1
    if stack.newer("text_prompts_with_images"):
        with pytest.raises(DatasetError, match=rf"its prompt is text: give it as chat messages .*TRL {stack.installed('trl')} "
                                               r"refuses text prompts with images: from TRL 0.25.0"):
            check_prompts([{"prompt": rendered, "image": png()}], tokenizer=processor)
        return
    check_prompts([{"prompt": rendered, "image": png()}], tokenizer=processor)
    with pytest.raises(DatasetError, match=r"row 0, column 'prompt': the prompt is text holding the image token "
                                           r"'<\|image_pad\|>' 0 time\(s\) and the row gives 1 image\(s\) in column 'image'"):
        check_prompts([{"prompt": "Which?", "image": png()}], tokenizer=processor)


def test_a_prompt_with_images_keeps_its_parts_and_folds_a_system_turn_before_them():
    prompt = [{"role": "system", "content": "Be brief."},
              {"role": "user", "content": [{"type": "image", "text": None}, {"type": "text", "text": "What?"}]}]
    assert text_messages(prompt)[1]["content"] == [{"type": "image"}, {"type": "text", "text": "What?"}]
    assert fold_system(prompt) == [{"role": "user", "content": [{"type": "text", "text": "Be brief.\n\n"}, {"type": "image"},
                                                                 {"type": "text", "text": "What?"}]}]


def test_prompt_lengths_count_the_image_tokens_the_processor_makes_of_each_rows_images(processor):
    small, large = PIL.new("RGB", (56, 56)), PIL.new("RGB", (224, 224))
    prepared = prepare_dataset(rows(small, large), system_prompt=None, tokenizer=processor)
    text = render_prompt(processor, prepared[0]["prompt"])
    assert text.count("<|image_pad|>") == 1  # one placeholder in the text, expanded by the processor
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    expanded = [processor(text=[render_prompt(processor, p)], images=[image])["input_ids"][0].count(pad)
                for p, image in zip(prepared["prompt"], [small, large])]
    assert expanded[0] < expanded[1]
    lengths = prompt_lengths(prepared, processor)
    assert lengths[1] - lengths[0] == expanded[1] - expanded[0]
    kept = prepare_dataset(rows(small, large), system_prompt=None, tokenizer=processor, max_prompt_tokens=lengths[0])
    assert len(kept) == 1 and kept[0]["image"].size == (56, 56)


def test_images_with_a_text_tokenizer_are_refused_in_one_message_wherever_they_arrive(tiny_model):
    model, tokenizer = tiny_model
    fix = r"is a text tokenizer: pass the vision model's processor \(transformers.AutoProcessor\), as load_model returns it"
    with pytest.raises(DatasetError, match=r"^the rows have images \(column 'image'\), and \w+ " + fix):
        prepare_dataset(rows(png()), tokenizer=tokenizer)
    with pytest.raises(DatasetError, match=r"^the prompt has 1 image\(s\), and \w+ " + fix):
        prompt_token_ids(tokenizer, [{"role": "user", "content": "What colour?"}], images=[PIL.new("RGB", (8, 8))])
    with pytest.raises(DatasetError, match=r"^generate: the rows have images, and \w+ " + fix):
        generate(model, tokenizer, [{"prompt": [{"role": "user", "content": "What colour?"}], "image": PIL.new("RGB", (8, 8))}])


def test_a_system_prompt_is_kept_or_folded_before_the_images_as_the_processors_template_takes_it(processor):
    image = PIL.new("RGB", (56, 56))
    kept = prepare_dataset(rows(image), system_prompt="Be brief.", tokenizer=processor)
    assert render_prompt(processor, kept[0]["prompt"]).startswith("<|im_start|>system\nBe brief.<|im_end|>")
    rejecting = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
                 + VL_TEMPLATE)
    template = processor.chat_template
    processor.chat_template = rejecting
    try:
        folded = prepare_dataset(rows(image), system_prompt="Be brief.", tokenizer=processor)
        assert text_messages(folded[0]["prompt"]) == [{"role": "user", "content": [
            {"type": "text", "text": "Be brief.\n\n"}, {"type": "image"}, {"type": "text", "text": "What is shown 0?"}]}]
        assert render_prompt(processor, folded[0]["prompt"]).startswith(
            "<|im_start|>user\nBe brief.\n\n<|vision_start|><|image_pad|><|vision_end|>What is shown 0?")
        with pytest.raises(DatasetError, match=r"rejects a system turn .* and fold_system_prompt=False"):
            prepare_dataset(rows(image), system_prompt="Be brief.", tokenizer=processor, fold_system_prompt=False)
    finally:
        processor.chat_template = template


def test_a_prepared_row_tokenizes_through_trls_own_image_path_to_the_length_counted(processor):
    """What GRPOTrainer does with a row: TRL 1.15 fills the placeholders with the row's images
    (``prepare_multimodal_messages(prompt, images=...)``) and the processor renders and tokenizes them; TRL 0.22 keeps
    the placeholders (``num_images=1``), renders with ``maybe_apply_chat_template`` and gives the processor the images."""
    import copy

    import trl
    from trl.data_utils import prepare_multimodal_messages

    prepared = prepare_dataset(rows(PIL.new("RGB", (56, 56)), PIL.new("RGB", (112, 84))), tokenizer=processor)
    for row, length in zip(prepared, prompt_lengths(prepared, processor)):
        if trl.__version__.startswith("0.22"):
            from trl.data_utils import maybe_apply_chat_template

            prompt = copy.deepcopy(row["prompt"])
            prepare_multimodal_messages(prompt, num_images=1)
            text = maybe_apply_chat_template({"prompt": prompt}, processor)["prompt"]
            ids = processor(text=[text], images=[[row["image"]]], add_special_tokens=False)["input_ids"][0]
        else:
            prompt = prepare_multimodal_messages(row["prompt"], images=[row["image"]])
            ids = processor.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"][0]
        assert len(ids) == length


def test_a_run_yaml_takes_the_image_options_and_names_a_bad_image_before_the_model_loads(tmp_path):
    from grpo_lite.launch.recipe import read_recipe
    from grpo_lite.run.settings import ConfigError

    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "a.png").write_bytes(png((20, 10), mode="RGBA"))
    data = tmp_path / "rows.jsonl"
    lines = [{"question": "What colour?", "answer": "red", "picture": "pics/a.png"}] * 2
    data.write_text("\n".join(json.dumps(row) for row in lines))
    recipe = tmp_path / "run.yaml"
    recipe.write_text(f"model: tiny\nrewards: [exact_match_reward]\npreset: cpu-smoke\ndataset: {{path: {data}, image_column: picture, "
                      "image_resize: [8, 4], image_convert: RGB}\n")
    settings = read_recipe(recipe)
    settings.validate()
    assert settings.dataset["image_resize"] == [8, 4] and settings.dataset["image_convert"] == "RGB"
    data.write_text("\n".join(json.dumps(row) for row in [*lines, {**lines[0], "picture": "pics/gone.png"}]))
    with pytest.raises(ConfigError, match=r"rows.jsonl, line 3, column 'picture': image file .*gone.png' does not exist"):
        read_recipe(recipe).validate()


def halves(image) -> tuple[float, float]:
    """The mean of the left and right halves of ``image`` as a vision processor gets it (PIL's convert("RGB"))."""
    import numpy as np

    pixels = np.asarray(image.convert("RGB"), dtype=float)
    return pixels[:, : pixels.shape[1] // 2].mean(), pixels[:, pixels.shape[1] // 2:].mean()


def test_pictures_a_processor_would_lose_are_converted_as_they_are_meant_to_be_seen_and_that_is_said(caplog):
    """PIL's convert("RGB"), which every processor applies, clips a 16-bit scan to white and shows what hides behind
    transparency (black here): each picture reaches the model as it looks, with one line saying what was done."""
    import numpy as np

    scan = PIL.fromarray(np.repeat(np.array([[1000, 60000]], dtype=np.uint16), 2, axis=1).repeat(2, axis=0))
    assert halves(scan) == (255.0, 255.0)  # what a processor makes of it as it is
    drawing = PIL.new("P", (4, 2), 0)  # black lines (entry 0) on a transparent page (entry 1, black too behind it)
    drawing.putpalette([0, 0, 0] * 2)
    drawing.paste(1, (2, 0, 4, 2))
    drawing.info["transparency"] = 1
    logo = PIL.new("RGBA", (4, 2), (0, 0, 0, 0))
    logo.paste((0, 0, 0, 255), (0, 0, 2, 2))
    assert halves(drawing) == halves(logo) == (0.0, 0.0)
    faint = PIL.fromarray(np.array([[10, 10, 200, 200]], dtype=np.uint16))  # 16-bit values under 257: black when scaled
    broken_profile = PIL.new("CMYK", (4, 2), (0, 0, 0, 0))
    broken_profile.info["icc_profile"] = b"not a profile"
    buffer = io.BytesIO()
    scan.save(buffer, format="PNG")  # as a file: PIL reads a 16-bit PNG as I;16
    with caplog.at_level("INFO", logger="grpo_lite"):
        prepared = prepare_dataset(rows(buffer.getvalue(), drawing, logo, faint, broken_profile), image_convert="RGB")
    dark, light = halves(prepared[0]["image"])
    assert (round(dark), round(light)) == (4, 233)  # 1000 and 60000 of 65535
    assert [halves(prepared[i]["image"]) for i in (1, 2, 3)] == [(0.0, 255.0)] * 3
    assert prepared[4]["image"].getpixel((0, 0)) == (255, 255, 255)
    said = caplog.text
    for line in ("images of column 'image' a vision processor would not show as they are:",
                 "2 in mode I;16 (deep grayscale) scaled from 0-65535 to 8-bit L",  # the scan and the faint one
                 "1 in mode P with transparency composited over white as RGB",
                 "1 in mode RGBA with transparency composited over white as RGB",
                 "1 in mode CMYK converted to RGB by PIL's formula: its colour profile cannot be read",
                 "row 3, column 'image': its values span 10-200 of 0-65535, 2 shades of 256 scaled: stretched to 0-255"):
        assert line in said
    warned = [record for record in caplog.records if record.levelname == "WARNING"]
    assert len(warned) == 1 and "row 3" in warned[0].getMessage()


def test_images_given_to_a_processor_directly_are_seen_as_prepared_ones_and_said(caplog):
    import numpy as np

    from grpo_lite.data.images import seen_images

    scan = PIL.fromarray(np.array([[1000, 60000]], dtype=np.uint16))
    with caplog.at_level("INFO", logger="grpo_lite"):
        rows_seen = seen_images([[scan, "kept.png"], []], "generate")
    assert [image.mode if hasattr(image, "mode") else image for image in rows_seen[0]] == ["L", "kept.png"]
    assert np.asarray(rows_seen[0][0]).tolist() == np.asarray(prepare_dataset(rows(scan))[0]["image"]).tolist() == [[4, 233]]
    assert rows_seen[1] == [] and "generate: images a vision processor would not show as they are: 1 in mode I;16" in caplog.text


def test_prepared_rows_reach_the_trainer_with_their_pictures_converted_as_said(caplog):
    from grpo_lite.training.trainer import _training_rows

    logo = PIL.new("LA", (4, 2), (0, 0))
    logo.paste((0, 255), (0, 0, 2, 2))
    buffer = io.BytesIO()
    logo.save(buffer, format="PNG")
    prompt = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is drawn?"}]}]
    prepared = Dataset.from_dict({"prompt": [prompt], "image": [buffer.getvalue()]},
                                 features=Features({"prompt": List({"role": Value("string"), "content": List(
                                     {"type": Value("string"), "text": Value("string")})}), "image": Image()}))
    with caplog.at_level("INFO", logger="grpo_lite"):
        rows_trained = _training_rows(prepared, None)
    assert halves(rows_trained[0]["image"]) == (0.0, 255.0) and rows_trained[0]["image"].mode == "L"
    assert "1 in mode LA with transparency composited over white as L" in caplog.text
    assert rows_trained.features["image"] == Image() and rows_trained["prompt"] == prepared["prompt"]


@pytest.mark.parametrize("given", ["PIL", "bytes", "path", "datasets Image column", "list"])
def test_a_column_of_images_not_named_image_is_refused_naming_image_column_or_said(given, tmp_path, caplog):
    """A picture column under another name would go unread: the prompts would reach the model without their pictures."""
    (tmp_path / "a.png").write_bytes(png())
    value = {"PIL": PIL.new("RGB", (8, 8)), "bytes": png(), "path": str(tmp_path / "a.png"), "datasets Image column": png(),
             "list": [png(), png()]}[given]
    data = [{"question": "What is this?", "answer": "1", "picture": value}]
    if given == "datasets Image column":
        data = Dataset.from_list(data, features=Features({"question": Value("string"), "answer": Value("string"),
                                                         "picture": Image()}))
    with pytest.raises(DatasetError, match=r"^column 'picture' \(.*\) holds images, and image_column='auto' takes only a "
                                           r"column named images or image, as TRL does: pass image_column='picture' to give "
                                           r"the model its pictures, or image_column=None to train on the text alone"):
        prepare_dataset(data)
    text_alone = prepare_dataset(data, image_column=None)  # asked for: no word
    assert "image" not in text_alone.column_names and "picture" in text_alone.column_names
    with caplog.at_level("WARNING", logger="grpo_lite"):
        prepare_dataset([{"question": "q", "answer": "1", "photo": png(), "sketch": value}], image_column="photo")
        check_prompts([{"prompt": [{"role": "user", "content": "q"}], "picture": value}])
    assert "column 'sketch' (" in caplog.text and "besides image_column='photo', which alone goes to the model" in caplog.text
    assert "column 'picture' (" in caplog.text and "TRL reads a row's images from a column named image or images alone" in caplog.text
    prepare_dataset([{"question": "What is in a.png?", "answer": "a.png", "note": "plain text"}])  # text is not an image


def test_a_run_yaml_whose_pictures_go_unread_is_refused_before_the_model_loads(tmp_path):
    from grpo_lite.launch.recipe import read_recipe
    from grpo_lite.run.settings import ConfigError

    (tmp_path / "a.png").write_bytes(png())
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"question": "What colour?", "answer": "red", "picture": "a.png"}))
    recipe = tmp_path / "run.yaml"
    recipe.write_text(f"model: tiny\nrewards: [exact_match_reward]\npreset: cpu-smoke\ndataset: {{path: {data}}}\n")
    with pytest.raises(ConfigError, match=r"column 'picture' \(row 0 holds the path of an image, 'a.png'\) holds images.*"
                                          r"pass image_column='picture'"):
        read_recipe(recipe).validate()
