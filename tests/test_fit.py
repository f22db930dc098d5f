"""What the installed TRL and transformers cannot train, judged by what a model is (grpo_lite/model/fit.py): every family's
findings before its weights load, each naming the upstream file that fails; each rule's adapter making a tiny model of a
family it meets train (or generate) on the stack it meets it on, and a model no adapter fits refused before anything runs.
The two-step runs of Llama 4, Granite 4 and Llama 3.2 Vision themselves are in tests/test_families.py and
tests/test_vision.py."""

from __future__ import annotations

import re

import pytest
import torch
from families import BY_NAME, FAMILIES, VISION_FAMILIES, has_torchvision
from PIL import Image

from grpo_lite import generate, load_model, prepare_dataset, train
from grpo_lite.machine import stack
from grpo_lite.model import fit
from grpo_lite.run.settings import ConfigError

needs_torchvision = pytest.mark.skipif(not has_torchvision(), reason="processors need torchvision (docs/stacks.md, "
                                       "'torchvision': .ci/run runs these in .venv-vision and .venv-t4)")
ONE_STEP = dict(preset="cpu-smoke", max_steps=1, num_generations=4, per_device_train_batch_size=4, max_completion_length=6,
                dashboard=False)
UPSTREAM_FILE = re.compile(r"\((trl|transformers)/[\w/]+\.py")


def expected_rules(name: str) -> set[str]:
    """The rules that find something in a family on the installed stack, from the releases in grpo_lite/machine/stack.py
    and the inputs the installed TRL's scoring pass takes."""
    fused = stack.newer("fused_lm_head")
    expected = {"llama-4": {"backbone", "load-balancing loss"} if fused else set(),
                "granite-4": {"load-balancing loss"} if fused else set(),
                "llama-3.2-vision": {"processor outputs"},
                "gemma-3-vision": set() if "token_type_ids" in fit._trl_scoring_inputs() else {"processor outputs"}}
    mrope = set() if stack.newer("mrope_decode_positions") else {"M-RoPE decoding"}
    return expected.get(name, mrope if name in ("qwen2.5-vl", "qwen2-vl") else set())


def check_findings(family, tmp_path, *, vision: bool) -> None:
    findings = fit.judge_unloaded(str(family.build(tmp_path)), vision=vision)
    assert {finding.rule for finding in findings} == expected_rules(family.name)
    for finding in findings:
        assert UPSTREAM_FILE.search(finding.problem) and not finding.refused, finding


@pytest.mark.parametrize("family", FAMILIES, ids=[family.name for family in FAMILIES])
def test_each_family_is_judged_before_its_weights_load(family, tmp_path):
    check_findings(family, tmp_path, vision=False)


@needs_torchvision
@pytest.mark.cuda_build
@pytest.mark.parametrize("family", VISION_FAMILIES, ids=[family.name for family in VISION_FAMILIES])
def test_each_vision_family_is_judged_before_its_weights_load(family, tmp_path):
    check_findings(family, tmp_path, vision=True)


def test_the_adapters_last_the_run_and_leave_the_model_and_its_config_as_they_were(tmp_path):
    """Llama 4's backbone and expert count are given to TRL's fused head while it trains; the class keeps its own
    base_model_prefix and the config gains no num_experts, so the model saves and loads as it was."""
    model, tokenizer = load_model(str(BY_NAME["llama-4"].build(tmp_path)), lora_rank=4)
    base, prefix = model.get_base_model(), type(model.get_base_model()).base_model_prefix
    seen = []
    base.register_forward_pre_hook(lambda module, args: seen.append((module.base_model is module.model,
                                                                     hasattr(module.config, "num_experts"))))
    train(model, tokenizer, prepare_dataset([{"question": "What is 1 + 1?", "answer": "2"}] * 4, tokenizer=tokenizer),
          [lambda completions, **kwargs: [float(len(c[0]["content"])) for c in completions]], output_dir=tmp_path / "run",
          **ONE_STEP)
    if stack.newer("fused_lm_head"):
        assert seen and all(backbone and experts for backbone, experts in seen)
    assert base.base_model_prefix == prefix and "base_model_prefix" not in vars(base) and not hasattr(base.config, "num_experts")


def flat_model():
    """A causal LM built by hand whose decoder layers sit in the model itself, as a custom checkpoint's code may lay them
    out: TRL 1.15's fused head finds no backbone in it."""
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    class FlatForCausalLM(LlamaForCausalLM):
        base_model_prefix = "transformer"

        def __init__(self, config):
            PreTrainedModel.__init__(self, config)
            self.body = torch.nn.ModuleList([LlamaDecoderLayer(config, 0)])
            self.lm_head = torch.nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    return FlatForCausalLM(LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                       num_attention_heads=2, num_key_value_heads=2))


def test_a_model_whose_backbone_trl_cannot_find_is_refused_before_the_trainer_naming_the_trl_that_can(tmp_path):
    from grpo_lite.model.tiny import build_tokenizer

    model = flat_model()
    findings = fit.judge_loaded(model, build_tokenizer())
    if not stack.newer("fused_lm_head"):
        assert findings == []  # TRL 0.22 scores with the model's own forward
        return
    (finding,) = findings
    assert finding.refused and "train on TRL before 1.15.0 (the T4 stack's 0.22.2)" in finding.remedy
    with pytest.raises(ConfigError, match=r"train: this model cannot train here: TRL 1\.\d+\.\d+'s fused LM head .*"
                                          r"FlatForCausalLM.base_model_prefix is 'transformer', no module of it"):
        train(model, build_tokenizer(), prepare_dataset([{"question": "Hi?", "answer": "1"}] * 4), [len],
              output_dir=tmp_path / "run", **ONE_STEP)
    assert not (tmp_path / "run").exists()


@needs_torchvision
@pytest.mark.cuda_build
def test_mllamas_processor_outputs_reach_its_forward_each_rows_own_and_continued_over_the_completion(tmp_path):
    model, processor = load_model(str(BY_NAME["llama-3.2-vision"].build(tmp_path)), lora_rank=4)
    calls = []

    def record(module, args, kwargs, output):
        if module.training or kwargs.get("cross_attention_mask") is not None:
            calls.append({name: kwargs.get(name) for name in ("input_ids", "cross_attention_mask", "aspect_ratio_ids")})

    model.register_forward_hook(record, with_kwargs=True)
    rows = [{"question": "What colour?" + "?" * i, "answer": colour, "image": Image.new("RGB", (56, 56), colour)}
            for i, colour in enumerate(["red", "blue"] * 2)]
    train(model, processor, prepare_dataset(rows), [lambda completions, **kwargs: [1.0] * len(completions)],
          output_dir=tmp_path / "run", **ONE_STEP)
    scored = [call for call in calls if call["cross_attention_mask"] is not None]
    assert scored, "TRL's scoring pass got no cross_attention_mask"
    for call in scored:
        ids, mask = call["input_ids"], call["cross_attention_mask"]
        assert mask.shape[:2] == ids.shape and call["aspect_ratio_ids"].shape[0] == ids.shape[0]
        image = processor.tokenizer.convert_tokens_to_ids("<|image|>")
        for row, row_ids in zip(mask, ids):
            at = (row_ids == image).nonzero()[0, 0]
            assert row[at:].bool().all() and not row[:at].bool().any()  # the image and every token after it, completion too


@needs_torchvision
@pytest.mark.cuda_build
def test_left_padded_rows_of_an_m_rope_model_decode_as_each_alone(tmp_path):
    """The vision demo model answers its three questions, each a different length, alike in one batch and alone: before
    transformers 5.3 a left-padded row decodes from positions its padding shifts, and its answer is garbled."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from grpo_lite.data.pictures import heldout_picture_questions
    from grpo_lite.launch.demo import VISION_DEMO_MODEL_DIR

    rows = prepare_dataset(heldout_picture_questions(12), system_prompt=None)
    rows = rows.select([next(i for i, row in enumerate(rows) if row["kind"] == kind) for kind in ("colour", "count", "shape")])
    model, processor = load_model(str(VISION_DEMO_MODEL_DIR), lora_rank=None, backend="cpu")
    alone = [generate(model, processor, rows.select([i]), max_completion_length=24)[0] for i in range(len(rows))]
    assert generate(model, processor, rows, max_completion_length=24) == alone
    assert all(answer.startswith("The answer is ") for answer in alone)

    raw = AutoModelForImageTextToText.from_pretrained(VISION_DEMO_MODEL_DIR)  # no grpo-lite: the upstream behaviour
    raw_processor = AutoProcessor.from_pretrained(VISION_DEMO_MODEL_DIR)
    assert (generate(raw, raw_processor, rows, max_completion_length=24) == alone) == stack.newer("mrope_decode_positions")


def test_a_tool_run_on_a_template_trl_knows_another_revision_of_is_refused_naming_that_revision(tmp_path):
    """Qwen3-MoE ships Qwen3's first chat template, and TRL 1.15 reads tool calls only out of its later revision: the
    refusal names that revision and where it is, never the family the user is on; given it, the run trains."""
    from grpo_lite.data.calculator import calculate

    if stack.lacking("tools") is not None:
        pytest.skip(stack.lacking("tools"))
    import trl

    model, tokenizer = load_model(str(BY_NAME["qwen3-moe"].build(tmp_path)), lora_rank=4)
    rows = prepare_dataset([{"question": "What is 12 * 7?", "answer": "84"}] * 4, tokenizer=tokenizer)
    steps = {**ONE_STEP, "max_completion_length": 16}
    with pytest.raises(ConfigError) as refused:
        train(model, tokenizer, rows, ["numeric_correctness_reward"], tools=[calculate], output_dir=tmp_path / "run", **steps)
    said = str(refused.value)
    assert "another revision of the template it knows as qwen3.jinja" in said
    assert "(pathlib.Path(trl.__file__).parent / 'chat_templates' / 'qwen3.jinja').read_text()" in said
    assert "Qwen3, " not in said and "Qwen2.5" not in said
    from pathlib import Path

    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    result = train(model, tokenizer, rows, ["numeric_correctness_reward"], tools=[calculate], output_dir=tmp_path / "run",
                   **steps)
    assert result.trainer.state.global_step == 1


def test_a_template_trl_knows_no_revision_of_is_refused_with_the_templates_it_knows():
    from grpo_lite.model.inference import tool_template_advice
    from grpo_lite.model.tiny import build_tokenizer

    if not stack.newer("tool_template_check"):
        pytest.skip(f"TRL {stack.installed('trl')} reads no tool call out of a template")
    tokenizer = build_tokenizer(family="mistral")
    tokenizer.chat_template = BY_NAME["mistral-v0.1"].chat_template()
    said = tool_template_advice(tokenizer)
    assert "reads tool calls out of these chat templates only" in said and "qwen2_5" in said
    assert "mistral" not in said.split(":", 1)[1]
