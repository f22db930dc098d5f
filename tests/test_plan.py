import sys
from pathlib import Path

import pytest
from families import has_torchvision

from grpo_lite.launch.cli import main
from grpo_lite.machine.planner import KNOWN_MODELS, PlanError, model_shape, plan

VISION_TEST_IMAGE = 448  # pixels a side: 1024 patches, 256 image tokens
VISION_TEST_SEQUENCES = 4


def test_known_shapes_give_the_published_parameter_counts():
    for name, billions in [("Qwen2.5-0.5B", 0.49), ("Qwen2.5-1.5B-Instruct", 1.54), ("unsloth/Qwen2.5-7B-Instruct", 7.6),
                           ("Llama-3.2-1B", 1.24), ("gemma-3-1b-it", 1.0)]:
        shape = model_shape(name)
        total = shape.layers * shape.linear_params_per_layer + shape.embedding_params
        assert total / 1e9 == pytest.approx(billions, rel=0.06), name


def test_local_folder_is_read_with_its_config(tiny_model_dir):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(tiny_model_dir)
    assert model_shape(str(tiny_model_dir)) == model_shape(config)
    assert model_shape(config).hidden == config.hidden_size


def test_a_small_run_fits_and_says_so():
    result = plan("Qwen2.5-1.5B", gpu="T4", num_generations=4, max_completion_length=256)
    assert result.fits and result.suggestion is None and "fits" in result.verdict()
    assert set(result.parts) == {"weights", "lora", "activations", "kv_cache", "logits", "overhead"}


def test_a_run_too_big_is_refused_with_the_nearest_config_that_fits():
    result = plan("Qwen2.5-7B", gpu="T4", num_generations=16, max_completion_length=1024, load_in_4bit=False)
    assert not result.fits
    assert result.suggestion.fits and result.suggestion.total_gb <= 15.0
    assert result.changes["load_in_4bit"] == (False, True)
    assert all(getattr(result.suggestion.run, f) == new for f, (_, new) in result.changes.items())
    assert "nearest config that fits" in str(result)


def test_each_knob_moves_the_estimate_the_right_way():
    base = plan("Qwen2.5-3B", gpu=80).total_gb
    assert plan("Qwen2.5-3B", gpu=80, num_generations=16).total_gb > base
    assert plan("Qwen2.5-3B", gpu=80, max_completion_length=1024).total_gb > base
    assert plan("Qwen2.5-3B", gpu=80, lora_rank=64).total_gb > base
    assert plan("Qwen2.5-3B", gpu=80, load_in_4bit=False).total_gb > base
    assert plan("Qwen2.5-3B", gpu=80, gpu_memory_utilization=0.5).parts["kv_cache"] > 30


def test_nothing_fits_on_a_tiny_gpu():
    result = plan("Qwen2.5-7B", gpu=2)
    assert not result.fits and result.suggestion is None and "smaller model" in result.verdict()


def test_unknown_model_and_gpu_are_named():
    with pytest.raises(PlanError, match="unknown model 'gpt-9'.*qwen2.5-1.5b"):
        plan("gpt-9")
    with pytest.raises(PlanError, match="unknown gpu 'V100'.*T4"):
        plan("Qwen2.5-0.5B", gpu="V100")
    assert "qwen2.5-0.5b" in KNOWN_MODELS


def test_cli_plan_prints_and_exits_1_when_it_does_not_fit(capsys):
    assert main(["plan", "Qwen2.5-0.5B", "--gpu", "24"]) == 0
    assert "fits" in capsys.readouterr().out
    assert main(["plan", "Qwen2.5-7B", "--gpu", "T4", "--no-4bit"]) == 1
    assert "load_in_4bit False -> True" in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow
def test_the_gpu_path_estimate_covers_torchs_allocation_peak_of_a_plain_trl_step():
    # Plain TRL in bf16 with a PEFT LoRA, gradient checkpointing and TRL's log-prob tiles, on the CPU under torch's
    # profiler: its allocation count is what torch.cuda.max_memory_allocated keeps on a GPU (benchmarks/plan_vs_allocated.py).
    # The planner must cover the peak above the weights, and not by much more than half again.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from plan_vs_allocated import measure_in_own_process, planned

    from grpo_lite import load_builtin, prepare_dataset
    from grpo_lite.data.prepare import prompt_lengths
    from grpo_lite.machine.planner import ModelShape
    from grpo_lite.model.tiny import build_tokenizer

    shape = ModelShape(hidden=256, layers=2, heads=4, kv_heads=2, head_dim=64, intermediate=1024, vocab=2048, tied=True)
    measured = measure_in_own_process(hidden=256, layers=2, heads=4, kv_heads=2, head_dim=64, intermediate=1024, vocab=2048,
                                      tokens=32, steps=1)
    prompt_tokens = max(prompt_lengths(prepare_dataset(load_builtin("arithmetic")[:64]), build_tokenizer(2048)))
    parts = planned(shape, 2, prompt_tokens, 32)
    above_weights = sum(parts.values()) - parts["weights"]
    assert measured["peak_above_weights_gb"] <= above_weights <= 1.6 * measured["peak_above_weights_gb"], (measured, parts)


@pytest.mark.slow
@pytest.mark.cuda_build
@pytest.mark.skipif(not has_torchvision(), reason="Qwen2.5-VL's processor needs torchvision (docs/stacks.md, 'torchvision')")
def test_the_gpu_path_estimate_covers_torchs_allocation_peak_of_a_vision_language_trl_step():
    # The text case's run on a Qwen2.5-VL, each prompt with an image: its vision tower runs over every completion's copy of
    # the image, and keeps each block's input for the backward (benchmarks/plan_vs_allocated.py). Held as the text case is.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from plan_vs_allocated import QWEN2_5_VL_VISION, _tower, measure_in_own_process, planned

    from grpo_lite.machine.planner import ModelShape

    text = dict(hidden=256, heads=4, kv_heads=2, head_dim=64, intermediate=1024, vocab=2048)
    # A narrower tower than Qwen2.5-VL's (512 wide, not 1280) over the 1024 patches of a 448-pixel image, 4 copies (8 took
    # twice as long on these CPUs' bf16 and measured the same ratio): its recomputed block outweighs the language layer's.
    # Measured 2026-11-28: 0.124 GiB above the weights, planned 0.136 (1.10x); a planner leaving the tower's activations
    # out said 0.067 (0.54x).
    vision = {**_tower(QWEN2_5_VL_VISION, 2), "hidden_size": 512, "intermediate_size": 1024, "num_heads": 8}
    measured = measure_in_own_process(**text, layers=2, tokens=32, steps=1, vision=vision, image_size=VISION_TEST_IMAGE,
                                      sequences=VISION_TEST_SEQUENCES)
    shape = ModelShape(**text, layers=2, tied=True, vision_width=512, vision_intermediate=1024, vision_layers=2,
                       patches_per_image_token=4)
    assert measured["image_tokens"] == (VISION_TEST_IMAGE // 28) ** 2  # 14-pixel patches, 2 x 2 to a token
    parts = planned(shape, 2, measured["prompt_tokens"], 32, 2, measured["image_tokens"], VISION_TEST_SEQUENCES)
    above_weights = sum(parts.values()) - parts["weights"]
    assert measured["peak_above_weights_gb"] <= above_weights <= 1.6 * measured["peak_above_weights_gb"], (measured, parts)
