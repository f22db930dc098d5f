"""The supported range (grpo_lite/machine/stack.py), held against the installed transformers and TRL.

CI runs this file on every stack (the T4 notebook stack, the lock and the newest releases, .ci/run), so every entry of
DIFFERENCES is checked on each side of the release it names: a wrong ``since`` fails on one of them.
"""

import dataclasses
import inspect
import json

import pytest
import torch
from packaging.version import Version

from grpo_lite.machine import stack
from grpo_lite.model.tiny import build_tiny_model, build_tokenizer, save_tokenizer

pytestmark = pytest.mark.seam  # .ci/run runs it on the newest releases too

MESSAGES = [{"role": "user", "content": "What is 3 times 4?"}]


def _trl_config_fields() -> set[str]:
    from trl import GRPOConfig

    cls = next(c for c in GRPOConfig.__mro__ if c.__module__.startswith("trl."))  # TRL's class, not Unsloth's
    return {f.name for f in dataclasses.fields(cls) if f.init}


def test_the_installed_stack_is_inside_the_supported_range_and_each_difference_lies_above_its_floor():
    floor = stack.pinned(stack.FLOOR_STACK)
    for package in ("transformers", "trl"):
        assert stack.installed(package) >= Version(floor[package]), package
    for name, difference in stack.DIFFERENCES.items():
        assert Version(floor[difference.package]) < Version(difference.since), name
        assert difference.field in (None, "added", "removed"), name
    for old, new in stack.RENAMED_FIELDS.items():  # each pair: the new name a field from its release, the old one always
        assert stack.DIFFERENCES[new].field == "added" and old not in stack.DIFFERENCES, (old, new)


def test_the_grpoconfig_fields_the_table_names_are_there_exactly_where_it_says():
    fields = _trl_config_fields()
    for name in stack.CHANGED_FIELDS:
        assert stack.has_config_field(name) == (name in fields), (name, stack.DIFFERENCES[name])


def test_warmup_as_a_ratio_is_warmup_steps_only_from_transformers_5():
    from trl import GRPOConfig

    kind = next(f.type for f in dataclasses.fields(GRPOConfig) if f.name == "warmup_steps")
    assert ("float" in str(kind)) == stack.newer("warmup_steps_ratio"), kind


def test_apply_chat_template_returns_a_dict_from_transformers_5_and_the_renderer_gives_the_same_ids_on_both():
    from grpo_lite.data.prompts import prompt_token_ids

    tokenizer = build_tokenizer()
    returned = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True)
    assert isinstance(returned, list) != stack.newer("chat_template_dict"), type(returned)
    ids = returned if isinstance(returned, list) else returned["input_ids"]
    assert prompt_token_ids(tokenizer, MESSAGES, fold_system_prompt=False) == list(ids)


def test_a_tokenizer_without_its_own_inputs_adds_token_type_ids_before_transformers_5_and_generate_takes_none():
    from transformers import PreTrainedTokenizerFast

    plain = PreTrainedTokenizerFast(tokenizer_object=build_tokenizer().backend_tokenizer)
    assert ("token_type_ids" in plain("2 + 2")) != stack.newer("token_type_ids_dropped")
    assert "token_type_ids" not in build_tokenizer()("2 + 2")  # grpo-lite's tiny tokenizer names its inputs
    assert set(stack.generate_inputs(plain("2 + 2", return_tensors="pt"))) == {"input_ids", "attention_mask"}


def test_generate_takes_all_of_a_processors_output_with_images_so_the_model_sees_them():
    from transformers import BatchFeature

    encoding = BatchFeature({"input_ids": [[1]], "attention_mask": [[1]], "pixel_values": [[0.5]], "image_grid_thw": [[1, 2, 2]]})
    assert set(stack.generate_inputs(encoding)) == {"input_ids", "attention_mask", "pixel_values", "image_grid_thw"}


def test_transformers_5_writes_a_tokenizer_config_transformers_4_cannot_read_and_the_portable_one_reads_back(tmp_path):
    from transformers import AutoTokenizer

    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(tmp_path / "as-saved")
    written = json.loads((tmp_path / "as-saved" / "tokenizer_config.json").read_text())
    assert isinstance(written.get("extra_special_tokens"), list) == stack.newer("tokenizer_config_v5"), written
    save_tokenizer(tokenizer, tmp_path / "portable")
    portable = json.loads((tmp_path / "portable" / "tokenizer_config.json").read_text())
    assert "extra_special_tokens" not in portable and portable["additional_special_tokens"] == ["<|im_start|>", "<|im_end|>"]
    assert portable["tokenizer_class"] == "PreTrainedTokenizerFast"
    reloaded = AutoTokenizer.from_pretrained(tmp_path / "portable")
    assert reloaded.apply_chat_template(MESSAGES, tokenize=False) == tokenizer.apply_chat_template(MESSAGES, tokenize=False)
    ids = reloaded("<|im_start|>x<|im_end|>")["input_ids"]
    assert ids == tokenizer("<|im_start|>x<|im_end|>")["input_ids"] and len(ids) == 3  # special tokens stay whole
    assert set(reloaded("x")) == {"input_ids", "attention_mask"}


def test_from_pretrained_keeps_the_checkpoints_dtype_only_from_transformers_5(tmp_path):
    from transformers import AutoModelForCausalLM

    build_tiny_model(tmp_path, dtype="bfloat16")
    assert (AutoModelForCausalLM.from_pretrained(tmp_path).dtype == torch.bfloat16) == stack.newer("from_pretrained_dtype_auto")
    assert AutoModelForCausalLM.from_pretrained(tmp_path, dtype="auto").dtype == torch.bfloat16


def test_trls_names_for_rewards_async_rewards_and_data_parallel_are_where_the_table_says():
    import trl.rewards
    import trl.trainer.utils
    from trl import GRPOConfig, GRPOTrainer

    assert hasattr(trl.rewards, "accuracy_reward") == stack.newer("trl_math_rewards")
    assert hasattr(trl.trainer.utils, "get_callable_name") == stack.newer("reward_callable_name")
    assert hasattr(trl.trainer.utils, "is_async_callable") == stack.newer("async_reward_objects")
    assert hasattr(GRPOTrainer, "_generate_single_turn") == stack.newer("generation_helpers")
    source = inspect.getsource(GRPOTrainer.__init__)
    assert ("does not support `nn.DataParallel`" in source) == stack.newer("data_parallel_refused")
    assert ("model.enable_input_require_grads()" in source) == stack.newer("peft_input_grads")
    assert (GRPOConfig.__dataclass_fields__["vllm_mode"].default == "colocate") == stack.newer("vllm_mode_colocate")


def test_how_trl_and_unsloths_trainer_take_rows_with_images_changes_where_the_table_says():
    """TRL 0.25 makes every prompt with images chat messages (prepare_multimodal_messages takes the images, not their
    number), so a text prompt fails there; Unsloth's trainer hands rewards text on rows with images from TRL 0.24 on
    (read in its source: importing Unsloth needs a GPU here)."""
    import importlib.util
    from pathlib import Path

    from trl.data_utils import prepare_multimodal_messages

    assert ("images" in inspect.signature(prepare_multimodal_messages).parameters) == stack.newer("text_prompts_with_images")
    spec = importlib.util.find_spec("unsloth")
    if spec is None:
        pytest.skip("Unsloth is not installed")
    source = (Path(spec.submodule_search_locations[0]) / "models" / "rl_replacements.py").read_text()
    at = source.index("self._calculate_rewards(inputs, prompts_text, completions_text")
    gate = source.rindex("if trl_version >= Version(", 0, at)
    assert source[gate:].startswith(f'if trl_version >= Version("{stack.DIFFERENCES["image_rewards_as_text"].since}"):')


@pytest.mark.parametrize("preset", ["cpu-smoke", "t4-16gb", "l4-24gb", "a100-80gb"])
def test_presets_set_only_fields_the_installed_grpoconfig_has_and_name_the_rest(preset):
    from grpo_lite.run.presets import preset_values, unavailable_values
    from grpo_lite.run.settings import resolve_options

    fields = _trl_config_fields()
    assert set(preset_values(preset)) <= fields
    assert set(unavailable_values(preset)) == {"vllm_importance_sampling_correction"} - fields
    warmup = "warmup_steps" if stack.newer("warmup_steps_ratio") else "warmup_ratio"
    assert preset_values(preset)[warmup] == 0.1
    options = resolve_options("cpu-smoke", warmup_steps=0)  # the user's warmup replaces the preset's, in either field
    assert options["warmup_steps"] == 0 and "warmup_ratio" not in options


def test_a_field_the_installed_release_still_has_keeps_its_meaning_and_a_removed_one_is_carried_over():
    from grpo_lite.run.porting import port_overrides
    from grpo_lite.run.settings import RunSettings

    ported = port_overrides("cpu-smoke", {"warmup_ratio": 0.1, "max_prompt_length": 256, "overwrite_output_dir": True})
    fields = _trl_config_fields()
    assert ported.problems == []
    for name in ("warmup_ratio", "max_prompt_length", "overwrite_output_dir"):
        assert (name in ported.overrides) == (name in fields), name
        assert (name in ported.translated) == (name not in fields), name
    assert ported.overrides.get("warmup_steps") == (None if "warmup_ratio" in fields else 0.1)
    assert ported.cut_prompts_to == (None if "max_prompt_length" in fields else 256)
    # a field neither end has is refused on both, with its fix
    refused = RunSettings(model="tiny", rewards=["numeric_correctness_reward"], preset="cpu-smoke",
                          overrides={"vllm_device": "cuda:1", "max_prompt_length": -3}).problems()
    assert any("vllm_device: TRL removed it" in line for line in refused)
    assert any("max_prompt_length=-3: give the longest prompt in tokens" in line for line in refused)


def test_docs_stacks_names_every_difference_with_its_release():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "stacks.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    for name, difference in stack.DIFFERENCES.items():
        release = f"{stack._label(difference.package)} {difference.since}"  # as the refusals name it
        assert any(f"`{name}`" in row.split(" | ")[0] and f"| {release} |" in row for row in rows), name


def test_grpotrainers_rollout_options_and_what_they_need_of_transformers_are_where_the_table_says():
    """tools (TRL 0.26), environment_factory (0.29; a dict of them 1.8), rollout_func on every generation path (1.0) and
    TRL's check of the chat template (1.1); where TRL has them, its own refusals name the transformers releases the
    table gives (5.0 for tools, 5.2 for environments), and transformers 5.0 parses a reply's tool calls."""
    import importlib.util

    from transformers import PreTrainedTokenizerBase
    from trl import GRPOTrainer

    parameters = inspect.signature(GRPOTrainer.__init__).parameters
    assert ("tools" in parameters) == stack.newer("tools")
    assert ("environment_factory" in parameters) == stack.newer("environment_factory")
    init = inspect.getsource(GRPOTrainer.__init__)
    assert ("self._multi_environment = isinstance(environment_factory, dict)" in init) == stack.newer("environment_per_row")
    generate = inspect.getsource(GRPOTrainer._generate) if hasattr(GRPOTrainer, "_generate") else ""
    assert ("self.rollout_func(prompts, self)" in generate) == stack.newer("rollout_func")
    templates = importlib.import_module("trl.chat_template_utils") if importlib.util.find_spec("trl.chat_template_utils") else None
    assert hasattr(templates, "supports_tool_calling") == stack.newer("tool_template_check")
    assert hasattr(PreTrainedTokenizerBase, "parse_response") == stack.newer("tool_call_parsing")
    for option, transformers_needs in (("tools", "tool_call_parsing"), ("environment_factory", "environment_tools")):
        if stack.newer(option):
            assert f'Version(transformers.__version__) >= Version("{stack.DIFFERENCES[transformers_needs].since}")' in init


def test_bitsandbytes_hub_kernel_notice_is_silenced_once_grpo_lite_is_imported():
    """bitsandbytes 0.50, imported on a CPU with AVX512-BF16, logs that it could not fetch a Hub kernel in every offline
    run (bitsandbytes/backends/cpu/ops.py); this machine may lack the instruction, so the notice is logged here as
    bitsandbytes logs it, read from its source, in a fresh process that imported grpo_lite first."""
    import importlib.util
    import subprocess
    import sys
    from pathlib import Path

    from grpo_lite.log import HUB_KERNEL_NOTICE

    spec = importlib.util.find_spec("bitsandbytes")
    if spec is None:
        pytest.skip("bitsandbytes is not installed")
    source = (Path(spec.submodule_search_locations[0]) / "backends" / "cpu" / "ops.py").read_text()
    assert "logger = logging.getLogger(__name__)" in source and f'"{HUB_KERNEL_NOTICE}: %s.' in source
    notice = f"{HUB_KERNEL_NOTICE}: %s. Please make sure you already `pip install kernels`"
    script = ("import grpo_lite, logging\n"
              f"logging.getLogger('bitsandbytes.backends.cpu.ops').warning({notice!r}, 'offline')\n"
              "logging.getLogger('bitsandbytes.backends.cpu.ops').warning('another notice')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "another notice" in done.stderr and HUB_KERNEL_NOTICE not in done.stderr, done.stderr


def test_a_models_forward_returns_and_takes_its_cache_under_the_name_the_table_gives(tmp_path):
    """transformers 5.24 renamed past_key_values to cache in forward, generate and their outputs, keeping the old name
    as a warned alias (scripts/train_tool_demo_model.py feeds a prompt's cache back in)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path))
    name, old = ("cache", "past_key_values") if stack.newer("generate_cache") else ("past_key_values", "cache")
    first = model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True)
    assert name in first.keys() and old not in first.keys()
    after = model(input_ids=torch.tensor([[4]]), **{name: getattr(first, name)})
    assert after.logits.shape[1] == 1


def test_trls_fused_head_transformers_m_rope_offsets_and_rope_fields_are_where_the_table_says():
    """TRL 1.15 patches a model's forward with its fused LM head (trl/trainer/utils.py); transformers before 5.3 gives an
    M-RoPE row's decoding offset over its padded length (get_rope_index); transformers 5 keeps rotary settings in
    rope_parameters. The model a config saved portably describes is read alike on both."""
    import trl.trainer.utils as trl_utils
    from transformers import Qwen2Config
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel

    assert hasattr(trl_utils, "add_fused_lm_head") == stack.newer("fused_lm_head")
    padded = "len(total_input_ids[i])" in inspect.getsource(Qwen2_5_VLModel.get_rope_index)
    assert padded != stack.newer("mrope_decode_positions")
    assert hasattr(Qwen2Config(), "rope_parameters") == stack.newer("rope_parameters")
    config = Qwen2Config(**stack.portable_model_config({"rope_parameters": {"rope_theta": 123.0, "rope_type": "default"}}))
    assert (config.rope_parameters["rope_theta"] if stack.newer("rope_parameters") else config.rope_theta) == 123.0


def test_peft_rewrites_a_mixture_of_experts_targets_from_transformers_5_and_not_as_grpo_lite_attaches_them(tmp_path):
    """PEFT 0.21 on transformers 5 moves a DeepSeek-V3's gate_proj, up_proj and down_proj targets to its experts, so its
    dense first MLP gets no LoRA (PEFT 0.22 keeps it); with grpo-lite's targets_as_named it gets LoRA on every stack."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from grpo_lite.model.lora import targets_as_named

    folder = build_tiny_model(tmp_path, family="deepseek-v3")
    targets = dict(r=2, target_modules=["gate_proj", "up_proj", "down_proj"], target_parameters=["experts.gate_up_proj"])
    plain = get_peft_model(AutoModelForCausalLM.from_pretrained(folder), LoraConfig(**targets))
    with targets_as_named():
        named = get_peft_model(AutoModelForCausalLM.from_pretrained(folder), LoraConfig(**targets))
    dense = "model.layers.0.mlp.gate_proj.lora_A"
    assert any(dense in name for name, _ in named.named_modules())
    dropped = stack.newer("peft_expert_targets") and not stack.newer("peft_dense_targets_kept")  # PEFT 0.22 keeps it
    assert any(dense in name for name, _ in plain.named_modules()) != dropped
