"""Unsloth's Qwen2.5-VL (7B) vision GRPO notebook (unslothai/notebooks @ bdda2efc, nb/Qwen2_5_7B_VL_GRPO.ipynb), ported to
grpo-lite on a tiny Qwen2.5-VL (its real chat template and processor settings): the notebook's code cells run verbatim
(tests/ports/unsloth_qwen2_5_vl_cells.py) but for what reaches the hub or the GPU, each replaced here and said so. Its
own data cells shape the rows (the numeric filter, the 512x512 resize, RGB, the prompt with its image placeholder), its
TRL < 0.24 cell renders the prompts to text on the T4 stack (TRL 0.22's processor expands the image token in them), and
its reward functions, which read text, score every batch on both stacks (from TRL 0.24 grpo-lite hands rewards on rows
with images the rendered prompts and decoded completions, as Unsloth's trainer does)."""

import pytest
from families import BY_NAME, has_torchvision

from grpo_lite import export, generate, load_model, train
from grpo_lite.data.prepare import prompt_lengths
from grpo_lite.data.prompts import render_prompt
from grpo_lite.machine import stack
from grpo_lite.monitor.samples import read_samples

from .checks import check_port, run_config_cell
from .unsloth_qwen2_5_vl_cells import CELLS

pytestmark = [pytest.mark.slow, pytest.mark.cuda_build, pytest.mark.skipif(
    not has_torchvision(), reason="Qwen2.5-VL's processor needs torchvision (docs/stacks.md, 'torchvision': .ci/run runs "
                                  "this in .venv-vision and .venv-t4)")]

QUESTIONS = [("How many sides does the shape have?", "4"), ("What is the value of x in the figure?", "2.5"),
             ("How many bars are taller than 3?", "3"), ("What fraction of the circle is shaded?", "0.25"),
             ("Which colour is the largest region?", "red")]  # not a number: the notebook's filter drops it


def _math_vista():
    """REPLACED (hub): load_dataset("AI4Math/MathVista", split="testmini") as rows of its shape: ``decoded_image`` the
    picture (of various sizes and modes, which the notebook resizes to 512x512 and converts to RGB), ``image`` its file
    name (a string column the notebook removes), ``question`` and ``answer`` (text, a number but for the last row)."""
    from datasets import Dataset
    from PIL import Image

    pictures = [Image.new("RGB", (640, 480), "white"), Image.new("RGBA", (300, 200), (0, 128, 0, 128)),
                Image.new("L", (256, 256), 90), Image.new("P", (120, 360)), Image.new("RGB", (64, 64), "blue")]
    rows = [{"pid": str(i + 1), "question": question, "image": f"images/{i + 1}.jpg", "decoded_image": picture,
             "answer": answer} for i, ((question, answer), picture) in enumerate(zip(QUESTIONS, pictures))]
    return Dataset.from_list(rows)


# Cells 8 and 10: FastVisionModel.from_pretrained + get_peft_model, here load_model with the same keywords but for the
# model (REPLACED (hub): the tiny Qwen2.5-VL), fast_inference (REPLACED (GPU): vLLM generates on a GPU only; left out,
# "auto" turns it on where it can) and random_state, which is load_model's seed; loftq_config=None (PEFT's default,
# which load_model keeps) left out
LOAD = dict(max_seq_length=16384, load_in_4bit=True, gpu_memory_utilization=0.8, finetune_vision_layers=False,
            finetune_language_layers=True, finetune_attention_modules=True, finetune_mlp_modules=True, lora_rank=16,
            lora_alpha=16, lora_dropout=0, bias="none", seed=3407, use_rslora=False, use_gradient_checkpointing="unsloth")
# Cell 20 compares TRL's release through unsloth_zoo, which imports only after Unsloth (never on a CPU): the same
# comparison (unsloth_zoo.utils.Version reads a package name as its installed release) through packaging
CELL_20_CHANGES = {"from unsloth_zoo.utils import Version\n":
                   "from importlib.metadata import version as _installed\nfrom packaging.version import Version as _Version\n"
                   "def Version(v): return _Version(_installed(v) if v == 'trl' else v)  # REPLACED (CPU): not unsloth_zoo's\n"}
CELL_28_CHANGES = {"from trl import GRPOConfig, GRPOTrainer\ntraining_args = GRPOConfig(": "training_args = dict("}


def test_unsloths_qwen2_5_vl_notebook_trains_as_written(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("datasets.load_dataset", lambda path, split=None: _math_vista())
    monkeypatch.chdir(tmp_path)  # the notebook writes "outputs" in the working folder
    model, tokenizer = load_model(str(BY_NAME["qwen2.5-vl"].build(tmp_path)), **LOAD)
    loaded = capsys.readouterr().err
    assert "use_gradient_checkpointing='unsloth': Unsloth's from_pretrained option" in loaded  # left out on a CPU, said
    assert "gpu_memory_utilization=0.8 is ignored" in loaded  # vLLM's share: no vLLM here, said
    import torch

    ns: dict = {"model": model, "tokenizer": tokenizer, "torch": torch}
    for cell in (12, 14, 16, 18):
        exec(CELLS[cell], ns)
    train_dataset = ns["train_dataset"]
    assert len(train_dataset) == 4  # the notebook's filter dropped the non-numeric answer
    assert all(image.size == (512, 512) and image.mode == "RGB" for image in train_dataset["image"])
    (old, new), = CELL_20_CHANGES.items()
    exec(CELLS[20].replace(old, new), ns)
    # TRL before 0.24: the prompts rendered to text, the image token in them, beside the image column
    assert isinstance(ns["train_dataset"][0]["prompt"], str) == (not stack.newer("image_rewards_as_text"))
    exec(CELLS[22], ns)  # the reward functions
    exec(CELLS[24], ns)

    # cell 26: model.fast_generate({"prompt": ..., "multi_modal_data": {"image": ...}}, SamplingParams(...)) on row 100
    # (REPLACED (GPU): grpo-lite's generate on a row, its image with it; the tiny data has 4 rows)
    assert len(generate(model, tokenizer, ns["train_dataset"].select([1]), max_completion_length=8)) == 1

    args, output_dir = run_config_cell(CELLS[28], CELL_28_CHANGES, ns)  # max_steps=2 added (num_train_epochs=0.5 there)
    # the processor makes each 512x512 picture 324 image tokens (a 36x36 grid of 14-pixel patches, merged 2x2), as
    # Qwen2.5-VL's does: the notebook's max_prompt_length=1024 keeps every prompt whole, on the tiny model as on the 7B
    row = ns["train_dataset"][0]
    text = row["prompt"] if isinstance(row["prompt"], str) else render_prompt(tokenizer, row["prompt"])
    ids = tokenizer(text=[text], images=[row["image"]])["input_ids"][0]
    assert list(ids).count(tokenizer.image_token_id) == 324
    assert max(prompt_lengths(ns["train_dataset"], tokenizer)) <= args["max_prompt_length"]
    # cell 30: GRPOTrainer(model, args=training_args, processing_class=tokenizer, reward_funcs=[...],
    # train_dataset=train_dataset).train()
    capsys.readouterr()
    rewards = [ns["formatting_reward_func"], ns["correctness_reward_func"]]
    result = train(model, tokenizer, ns["train_dataset"], rewards, output_dir=output_dir, dashboard=False, **args)
    err = capsys.readouterr().err
    assert result.trainer.state.global_step == 2
    check_port(output_dir, err, args, result.trainer.args, batch_raised=True)
    # the notebook's rewards read text (re.findall on each completion): they score every batch on both stacks, TRL 0.22
    # giving text for the prompts cell 20 rendered, TRL 1.15 chat messages, which grpo-lite turns to text on image rows
    # as Unsloth's trainer does
    assert all(reward.failures == 0 and reward.calls == 2 for reward in result.rewards)
    assert all(record["rewards/formatting_reward_func/mean"] is not None for record in result.metrics)
    samples = read_samples(output_dir)
    assert samples and all(len(row["images"]) == 1 for row in samples)

    export(model, tokenizer, "grpo_lora", how="adapter")  # cell 33: model.save_lora("grpo_lora") (REPLACED (GPU): Unsloth's)
    # cell 35: fast_generate on row 165 with lora_request=model.load_lora("grpo_lora") (REPLACED (GPU): generate with the
    # trained adapter, on a row of the 4)
    assert len(generate(model, tokenizer, ns["train_dataset"].select([3]), max_completion_length=8)) == 1
    for cell in (37, 39, 41):  # the adapter's A and B are not all zeros; the export cells, each under "if False"
        exec(CELLS[cell], ns)
