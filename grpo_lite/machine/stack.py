"""The installed transformers and TRL, and what differs across the range grpo-lite supports.

grpo-lite runs on transformers from 4.56.2 and TRL from 0.22.2 up to their newest releases, and is tested at three
points: the T4 notebook stack, what Unsloth's own Colab GRPO notebooks install (requirements/t4.txt, the floor); the
lock, the newest releases Unsloth allows (requirements/lock.txt); and the newest releases of all, as pip resolves them
the day CI runs (docs/stacks.md). Each way the releases differ that grpo-lite meets is one entry of
:data:`DIFFERENCES`: the package, the first release that behaves as the newer ones do, and what the releases on each
side do with the upstream file that makes it so (read in the wheels, the release found by reading the ones between).
Code asks :func:`newer` or :func:`has_config_field`; nothing else in grpo-lite compares versions. tests/test_stack.py
holds every entry against the installed libraries, on each stack CI runs, and tests/test_upstream_source.py looks up
the upstream names grpo-lite reads in the wheels of each tested release without installing them.

Importing this module imports neither transformers nor TRL: the versions come from the packages' metadata, so it
can be asked before Unsloth is imported.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The stack files, shipped inside the package (grpo_lite/assets/stacks is requirements/): each the whole resolution of
# one tested stack, pinned.
STACKS = Path(__file__).resolve().parents[1] / "assets" / "stacks"
FLOOR_STACK, LOCK_STACK = "t4.txt", "lock.txt"


@functools.cache
def pinned(stack_file: str) -> dict[str, str]:
    """The releases a stack file pins, by lower-case package name (``pinned("t4.txt")["trl"] == "0.22.2"``)."""
    pins = {}
    for line in (STACKS / stack_file).read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line):
            pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


@dataclass(frozen=True)
class Difference:
    """One way the ends differ: from ``package`` release ``since`` on, ``newer`` holds; before it, ``older``.

    ``field`` marks a GRPOConfig field (TRL's own or inherited from transformers' TrainingArguments) that the newer
    end ``"added"`` or ``"removed"``; its entry is named as the field."""

    package: str
    since: str
    older: str
    newer: str
    field: str | None = None


def _removed(package: str, since: str, older: str, newer: str = "removed") -> Difference:
    """A config field the newer end removed; both ends' text read in the file that declares the config's fields."""
    source = "trl/trainer/grpo_config.py" if package == "trl" else "transformers/training_args.py"
    return Difference(package, since, f"{older} ({source})", f"{newer} ({source})", field="removed")


DIFFERENCES: dict[str, Difference] = {
    # GRPOConfig fields grpo-lite sets, carries over or refuses
    "vllm_importance_sampling_correction": Difference(
        "trl", "0.23.0",
        "no such field: generation through vLLM is not corrected for its sampling mismatch (trl/trainer/grpo_config.py)",
        "GRPOConfig.vllm_importance_sampling_correction, default True (trl/trainer/grpo_config.py)", field="added"),
    "chat_template_kwargs": Difference(
        "trl", "0.25.0",
        "no such field: the trainer renders each prompt with tokenizer.apply_chat_template and no keywords "
        "(trl/data_utils.py, maybe_apply_chat_template; trl/trainer/grpo_trainer.py)",
        "GRPOConfig.chat_template_kwargs, handed to the chat template with every prompt (trl/trainer/grpo_config.py)",
        field="added"),
    "multi_objective_aggregation": Difference(
        "trl", "0.27.0", "no such field: weighted rewards are summed, then normalized (trl/trainer/grpo_trainer.py)",
        "GRPOConfig.multi_objective_aggregation, default 'sum_then_normalize' (trl/trainer/grpo_config.py)", field="added"),
    "max_prompt_length": Difference(
        "trl", "0.28.0",
        "GRPOConfig.max_prompt_length: the trainer cuts longer prompts on the left (trl/trainer/grpo_trainer.py)",
        "removed: grpo-lite cuts longer prompts on the left itself (trl/trainer/grpo_trainer.py, _tokenize_prompts)", field="removed"),
    "use_liger_loss": _removed("trl", "0.28.0", "GRPOConfig.use_liger_loss, from 0.25 an old name of use_liger_kernel"),
    "vllm_guided_decoding_regex": _removed("trl", "0.28.0", "GRPOConfig.vllm_guided_decoding_regex",
                                           "removed for vllm_structured_outputs_regex"),
    "wandb_log_unique_prompts": _removed("trl", "0.27.0", "GRPOConfig.wandb_log_unique_prompts", "removed for log_unique_prompts"),
    "warmup_ratio": _removed("transformers", "5.15.0", "TrainingArguments.warmup_ratio; from 5.0 an old name of warmup_steps"),
    "logging_dir": _removed("transformers", "5.15.0", "TrainingArguments.logging_dir",
                            "removed: TENSORBOARD_LOGGING_DIR names the folder"),
    **{name: _removed("transformers", "5.0.0", f"TrainingArguments.{name}")
       for name in ("overwrite_output_dir", "use_mps_device", "no_cuda", "per_gpu_train_batch_size", "per_gpu_eval_batch_size",
                    "push_to_hub_token", "include_inputs_for_metrics", "half_precision_backend", "fp16_backend")},
    # behaviours
    "warmup_steps_ratio": Difference(
        "transformers", "5.0.0", "warmup_steps is a whole number of steps; a ratio is warmup_ratio (transformers/training_args.py)",
        "warmup_steps below 1 is a ratio of the steps (transformers/training_args.py, get_warmup_steps)"),
    "chat_template_dict": Difference(
        "transformers", "5.0.0",
        "apply_chat_template(tokenize=True) returns the token ids, a list (transformers/tokenization_utils_base.py)",
        "it returns a BatchEncoding (input_ids, attention_mask) unless return_dict=False "
        "(transformers/tokenization_utils_base.py)"),
    "token_type_ids_dropped": Difference(
        "transformers", "5.0.0",
        "a tokenizer that names no model_input_names of its own returns token_type_ids too, which a causal LM's generate() "
        "refuses (transformers/tokenization_utils_base.py, model_input_names; transformers/generation/utils.py)",
        "tokenizers return input_ids and attention_mask (transformers/tokenization_utils_base.py, model_input_names)"),
    "tokenizer_config_v5": Difference(
        "transformers", "5.0.0",
        "tokenizer_config.json: extra special tokens are additional_special_tokens (a list), extra_special_tokens only a "
        "mapping of named tokens, and tokenizer_class TokenizersBackend is unknown (transformers/tokenization_utils_base.py, "
        "transformers/models/auto/tokenization_auto.py)",
        "writes extra_special_tokens as a list and tokenizer_class TokenizersBackend; still reads additional_special_tokens "
        "(transformers/tokenization_utils_base.py, from_pretrained)"),
    "from_pretrained_dtype_auto": Difference(
        "transformers", "5.0.0", "from_pretrained without dtype loads in torch's default float32 (transformers/modeling_utils.py)",
        "from_pretrained without dtype loads in the checkpoint's dtype, dtype='auto' (transformers/modeling_utils.py)"),
    "vllm_mode_colocate": Difference(
        "trl", "1.0.0", "GRPOConfig.vllm_mode defaults to 'server'; Unsloth's generated GRPOConfig to 'colocate' "
        "(trl/trainer/grpo_config.py, unsloth/models/rl.py)", "it defaults to 'colocate' (trl/trainer/grpo_config.py)"),
    "peft_input_grads": Difference(
        "trl", "0.27.0",
        "a LoRA model's inputs require grad only for reentrant checkpointing, though TRL enables it reentrant whatever "
        "gradient_checkpointing_kwargs says: use_reentrant=False trains nothing (trl/models/utils.py, "
        "enable_gradient_checkpointing)",
        "GRPOTrainer makes a LoRA model's inputs require grad whenever it checkpoints (trl/trainer/grpo_trainer.py)"),
    "generation_helpers": Difference(
        "trl", "0.24.0", "_generate_and_score_completions calls the model's generate itself (trl/trainer/grpo_trainer.py)",
        "it generates through GRPOTrainer._generate and _generate_single_turn (trl/trainer/grpo_trainer.py)"),
    "several_images": Difference(
        "trl", "0.24.0", "the trainer reads one image a row, from a column 'image' (trl/trainer/grpo_trainer.py, "
        "_generate_and_score_completions)",
        "it reads a list of images a row from a column 'images', else one from 'image' (trl/trainer/grpo_trainer.py, "
        "_generate_and_score_completions)"),
    "text_prompts_with_images": Difference(
        "trl", "0.25.0",
        "a text prompt (a chat template applied already) with images goes to the processor as it is, which expands each "
        "image token it holds (trl/trainer/grpo_trainer.py, _generate_single_turn: only a chat prompt gets placeholders)",
        "every prompt with images is made chat messages with its images (trl/data_utils.py, prepare_multimodal_messages): "
        "a text prompt fails there, and from 0.29 is refused, 'Multimodal training requires conversational prompts' "
        "(trl/trainer/grpo_trainer.py)"),
    "image_rewards_as_text": Difference(
        "trl", "0.24.0",
        "rewards get the prompts and completions as the rows give them: text for the text prompts Unsloth's vision "
        "notebooks render first for this TRL, chat messages for chat prompts (trl/trainer/grpo_trainer.py)",
        "a chat prompt's completions are chat messages; on rows with images Unsloth's trainer hands rewards the rendered "
        "prompts and the decoded completions instead, as text (unsloth/models/rl_replacements.py, _calculate_rewards)"),
    "trl_math_rewards": Difference(
        "trl", "0.24.0", "trl.rewards holds think_format_reward and get_soft_overlong_punishment (trl/rewards/__init__.py)",
        "trl.rewards adds accuracy_reward, reasoning_accuracy_reward, get_repetition_penalty_reward, ... "
        "(trl/rewards/accuracy_rewards.py, other_rewards.py)"),
    "reward_callable_name": Difference(
        "trl", "1.9.0",
        "a reward is logged under reward_func.__name__, which a functools.partial lacks (trl/trainer/grpo_trainer.py)",
        "under get_callable_name(reward_func): a partial's function, a callable object's class (trl/trainer/utils.py)"),
    "async_reward_objects": Difference(
        "trl", "1.14.0",
        "rewards are called plainly: up to 0.26 a coroutine is never awaited, from 0.27 only `async def` functions are "
        "(asyncio.iscoroutinefunction; trl/trainer/grpo_trainer.py, _calculate_rewards)",
        "is_async_callable: async functions, their partials and objects with an async __call__ run concurrently "
        "(trl/trainer/utils.py, trl/trainer/grpo_trainer.py)"),
    "logged_prompts_as_given": Difference(
        "trl", "1.15.0",
        "trainer._logs['prompt'] holds the text generated from: the chat template applied, tokenized and decoded "
        "(trl/trainer/grpo_trainer.py, _generate_and_score_completions)",
        "it holds the prompts as the dataset gave them, chat messages (trl/trainer/grpo_trainer.py)"),
    # what a rollout can be beyond one reply: GRPOTrainer's tools, environment_factory and rollout_func (OPTION_NEEDS)
    "tools": Difference(
        "trl", "0.26.0", "GRPOTrainer takes no tools (trl/trainer/grpo_trainer.py)",
        "GRPOTrainer(tools=[...]): the model's tool calls are run and their results appended, turn by turn, and "
        "tools/call_frequency and tools/failure_frequency logged (trl/trainer/grpo_trainer.py, _tool_call_loop)"),
    "tool_call_parsing": Difference(
        "transformers", "5.0.0",
        "tokenizers have no parse_response, and TRL refuses tools: 'requires transformers version 5.0.0 or higher' "
        "(trl/trainer/grpo_trainer.py)",
        "PreTrainedTokenizerBase.parse_response reads a reply's tool calls (transformers/tokenization_utils_base.py)"),
    "environment_factory": Difference(
        "trl", "0.29.0", "GRPOTrainer takes no environment_factory (trl/trainer/grpo_trainer.py)",
        "GRPOTrainer(environment_factory=...): one environment per rollout, reset with its row, its public methods the "
        "tools, its get_reward a reward (trl/trainer/grpo_trainer.py)"),
    "environment_tools": Difference(
        "transformers", "5.2.0",
        "TRL refuses environment_factory: 'requires transformers version 5.2.0 or higher' (trl/trainer/grpo_trainer.py)",
        "TRL takes environment_factory (trl/trainer/grpo_trainer.py)"),
    "environment_per_row": Difference(
        "trl", "1.8.0", "environment_factory is one callable (trl/trainer/grpo_trainer.py)",
        "it may be a dict of them, each row choosing one by its 'environment' column (trl/trainer/grpo_trainer.py, "
        "_multi_environment)"),
    "rollout_func": Difference(
        "trl", "1.0.0",
        "no rollout_func before 0.25; from 0.25 to 0.29 it is called only where vLLM generates (trl/trainer/grpo_trainer.py, "
        "VLLMGeneration)",
        "GRPOTrainer(rollout_func=...) replaces generation on every path, called as rollout_func(prompts, trainer) "
        "(trl/trainer/grpo_trainer.py, _generate)"),
    "tool_template_check": Difference(
        "trl", "1.1.0", "TRL does not check that the chat template can render a tool call (trl/chat_template_utils.py)",
        "trl.chat_template_utils.supports_tool_calling checks it, and GRPOTrainer refuses a template that cannot "
        "(trl/chat_template_utils.py, trl/trainer/grpo_trainer.py)"),
    # what a model meets in TRL's scoring and transformers' generation (grpo_lite/model/fit.py), and in PEFT
    "fused_lm_head": Difference(
        "trl", "1.15.0",
        "GRPOTrainer scores completions with the model's own forward and its logits; an MoE model computes its own "
        "load-balancing loss (trl/trainer/grpo_trainer.py, _get_per_token_logps_and_entropies)",
        "GRPOTrainer replaces the model's forward with a fused LM head (trl/trainer/utils.py, add_fused_lm_head): the "
        "backbone is model.base_model (model.model for a vision-language model before transformers 5), its "
        "last_hidden_state is projected through the output layer, and where the trainer asks for router logits the "
        "load-balancing loss reads the expert count as config.num_experts from transformers 5 on"),
    "fused_lm_head_reads": Difference(
        "transformers", "5.0.0",
        "TRL's fused LM head takes a vision-language model's backbone as model.model and the expert count as the model's "
        "num_experts (trl/trainer/utils.py, add_fused_lm_head)",
        "it takes the backbone as model.base_model and the expert count as config.num_experts (trl/trainer/utils.py, "
        "add_fused_lm_head)"),
    "mrope_decode_positions": Difference(
        "transformers", "5.3.0",
        "an M-RoPE model's get_rope_index gives each row's decoding offset over its padded length, so a left-padded row of "
        "a batch decodes from positions its padding shifts (transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py, "
        "qwen2_vl/modeling_qwen2_vl.py: 'mrope_position_deltas.append(... - len(total_input_ids[i]))')",
        "the offset is over the row's own tokens (transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py, get_rope_index)"),
    "rope_parameters": Difference(
        "transformers", "5.0.0",
        "a config's rotary settings are rope_theta and rope_scaling, which M-RoPE models index for mrope_section "
        "(transformers/modeling_rope_utils.py, models/qwen2_5_vl/configuration_qwen2_5_vl.py)",
        "they are rope_parameters, written in its place; a config's rope_scaling is still read into it "
        "(transformers/modeling_rope_utils.py)"),
    "peft_expert_targets": Difference(
        "transformers", "5.0.0",
        "PEFT attaches LoRA to the targets a LoraConfig names (peft/tuners/tuners_utils.py, BaseTuner.inject_adapter)",
        "for the mixture-of-experts families transformers 5 re-laid out, PEFT first rewrites the targets as a transformers "
        "4 adapter named them (peft/utils/transformers_weight_conversion.py, _convert_peft_config_moe): PEFT 0.21 moves "
        "every gate_proj, up_proj and down_proj to the experts' parameters, dense and shared MLPs too, and doubles the "
        "rank of gate_up_proj"),
    "peft_dense_targets_kept": Difference(
        "peft", "0.22.0",
        "that rewrite moves a dense or shared MLP's gate_proj, up_proj and down_proj to the experts too "
        "(peft/utils/transformers_weight_conversion.py, _convert_peft_config_moe)",
        "it keeps a target whose every match is an nn.Linear, and targets the experts' parameter of that name beside it "
        "(peft/utils/transformers_weight_conversion.py, _convert_peft_config_moe: PEFT #3711, #3945)"),
    "data_parallel_refused": Difference(
        "trl", "1.15.0",
        "a process that sees several GPUs trains through the Trainer's nn.DataParallel (transformers/trainer.py)",
        "GRPOTrainer refuses args.n_gpu > 1: 'does not support nn.DataParallel' (trl/trainer/grpo_trainer.py)"),
    # past the lock: the newest releases
    "activation_checkpointing": Difference(
        "transformers", "5.23.0",
        "TrainingArguments.gradient_checkpointing turns activation checkpointing on, and the Trainer reads it "
        "(transformers/training_args.py, transformers/trainer.py)",
        "TrainingArguments.activation_checkpointing does; gradient_checkpointing is a deprecated alias taken only where "
        "activation_checkpointing is unset when the config is built, and the Trainer reads the new name only "
        "(transformers/training_args.py, __post_init__; transformers/trainer.py)", field="added"),
    "activation_checkpointing_kwargs": Difference(
        "transformers", "5.23.0", "TrainingArguments.gradient_checkpointing_kwargs (transformers/training_args.py)",
        "TrainingArguments.activation_checkpointing_kwargs; gradient_checkpointing_kwargs its deprecated alias "
        "(transformers/training_args.py, __post_init__)", field="added"),
    "generate_cache": Difference(
        "transformers", "5.24.0",
        "generate and a model's forward take the cache as past_key_values, and their outputs hold it there "
        "(transformers/generation/utils.py, transformers/modeling_outputs.py)",
        "they take it as cache, and their outputs hold it there; past_key_values is a deprecated alias that warns "
        "(transformers/generation/utils.py, deprecate_kwarg; transformers/utils/generic.py)"),
    "cpu_logprobs": Difference(
        "trl", "1.16.0",
        "the fused LM head's log-probabilities come from a Triton kernel chosen by whether Triton imports: None without "
        "it, a launch that fails on CPU tensors with it (trl/trainer/utils.py, _ChunkedLogProbFunction)",
        "ChunkedLogProbFunction runs torch operations where the tensors are not on cuda or xpu "
        "(trl/kernels/chunked_logprob.py, _use_triton)"),
    "typed_tool_arguments": Difference(
        "trl", "1.16.0",
        "parse_response reads a tool call's arguments as the reply wrote them (trl/chat_template_utils.py)",
        "parse_response(..., tools=) types them by the calling tool's JSON schema, and the trainer passes each prompt's "
        "tools (trl/chat_template_utils.py, trl/trainer/grpo_trainer.py)"),
}


# GRPOTrainer's rollout options and the DIFFERENCES each needs on the newer side
OPTION_NEEDS = {
    "tools": ("tools", "tool_call_parsing"),
    "environment_factory": ("environment_factory", "environment_tools"),
    "environment_factory (a dict)": ("environment_per_row", "environment_tools"),
    "rollout_func": ("rollout_func",),
}

# The GRPOConfig fields one end has and the other lacks; every other field is on both ends or on neither.
CHANGED_FIELDS = frozenset(name for name, difference in DIFFERENCES.items() if difference.field)

# Fields renamed with the old name kept as a deprecated alias, old -> new, each new name a DIFFERENCES entry. The alias
# is taken only where the new name is unset when the config is built: a config given both, or the old name set after,
# keeps the new name's value without a word (transformers/training_args.py, __post_init__). So grpo-lite passes,
# records and reads one name only, the one the installed release reads (:func:`field_name`).
RENAMED_FIELDS = {"gradient_checkpointing": "activation_checkpointing",
                  "gradient_checkpointing_kwargs": "activation_checkpointing_kwargs"}


@functools.cache
def installed(package: str):
    """The installed release of ``package`` (``"transformers"``, ``"trl"``, ``"peft"``) as a ``packaging`` Version."""
    from importlib.metadata import version

    from packaging.version import Version

    return Version(version(package))


def newer(name: str, release: str | None = None) -> bool:
    """Whether the installed package (or its ``release``) behaves as the newer end does for the difference ``name``."""
    difference = DIFFERENCES[name]
    from packaging.version import Version

    return (installed(difference.package) if release is None else Version(release)) >= Version(difference.since)


def has_config_field(name: str) -> bool:
    """Whether the installed GRPOConfig has ``name``, one of :data:`CHANGED_FIELDS`."""
    return newer(name) == (DIFFERENCES[name].field == "added")


@dataclass(frozen=True)
class Upstream:
    """A name grpo-lite reads or wraps inside TRL or transformers: ``name`` (a function, a module-level name,
    ``Class.method`` or ``Class.attribute``, its own or inherited from ``bases``) in ``file`` of ``package``, a function
    taking each of ``parameters`` (those grpo-lite passes by name); needed on the releases where every DIFFERENCES entry
    of ``on`` holds (``"not X"``: the older side of X)."""

    package: str
    file: str
    name: str
    parameters: tuple[str, ...] = ()
    on: tuple[str, ...] = ()


_GRPO_TRAINER, _TRAINER = "trl/trainer/grpo_trainer.py", "transformers/trainer.py"
# What grpo-lite reads inside TRL and transformers beyond their public top-level names. tests/test_upstream_source.py
# looks each one up in the wheels of every tested release and of the newest (read, not installed), so a rename is named
# before a user meets it, and holds this table against grpo-lite's own imports and reads of private names.
UPSTREAM_NAMES = (
    Upstream("trl", _GRPO_TRAINER, "GRPOTrainer._generate_and_score_completions", ("inputs",)),
    Upstream("trl", _GRPO_TRAINER, "GRPOTrainer._calculate_rewards", ("inputs", "prompts", "completions", "completion_ids_list")),
    Upstream("trl", _GRPO_TRAINER, "GRPOTrainer._tokenize_prompts", ("prompts",), on=("max_prompt_length",)),
    Upstream("trl", _GRPO_TRAINER, "GRPOTrainer._generate", ("prompts",), on=("generation_helpers",)),
    Upstream("trl", _GRPO_TRAINER, "GRPOTrainer._logs"),
    # the processor outputs a model's forward takes, carried to TRL's scoring (grpo_lite/model/fit.py)
    Upstream("trl", _GRPO_TRAINER, "GRPOTrainer._get_per_token_logps_and_entropies", ("model", "input_ids", "logits_to_keep")),
    Upstream("trl", _GRPO_TRAINER, "GRPOTrainer._compute_loss", ("model", "inputs")),
    Upstream("trl", "trl/trainer/utils.py", "_ChunkedLogProbFunction", on=("fused_lm_head", "not cpu_logprobs")),
    # benchmarks/plan_vs_allocated.py measures TRL's GPU path on a CPU: the completions' positions only
    Upstream("trl", "trl/trainer/utils.py", "_use_triton", on=("cpu_logprobs",)),
    Upstream("trl", "trl/data_utils.py", "apply_chat_template", ("example",)),
    Upstream("trl", "trl/chat_template_utils.py", "parse_response", ("tokenizer", "ids", "prefix"), on=("tools",)),
    Upstream("trl", "trl/chat_template_utils.py", "parse_response", ("tools",), on=("typed_tool_arguments",)),
    Upstream("trl", "trl/chat_template_utils.py", "add_response_schema", on=("tools",)),
    Upstream("trl", "trl/chat_template_utils.py", "supports_tool_calling", ("processing_class",), on=("tool_template_check",)),
    Upstream("transformers", _TRAINER, "Trainer._save_checkpoint", ("model", "trial")),
    Upstream("transformers", _TRAINER, "Trainer._load_from_checkpoint", ("resume_from_checkpoint",)),
    Upstream("transformers", _TRAINER, "DEFAULT_PROGRESS_CALLBACK"),
    Upstream("transformers", "transformers/trainer_callback.py", "PrinterCallback"),
    Upstream("transformers", "transformers/utils/chat_template_utils.py", "get_json_schema", ("func",)),
    # the keywords grpo-lite's generation passes (grpo_lite/model/inference.py, training/trl_compat.py)
    *(Upstream("transformers", "transformers/generation/configuration_utils.py", f"GenerationConfig.{keyword}")
      for keyword in ("max_new_tokens", "do_sample", "num_return_sequences", "pad_token_id", "repetition_penalty",
                      "temperature", "top_p", "top_k", "min_p", "stop_strings")),
)


def field_name(name: str) -> str:
    """``name`` as the installed release reads it: either name of a :data:`RENAMED_FIELDS` pair gives the one the installed
    GRPOConfig reads, any other name is itself.

    >>> field_name("learning_rate")
    'learning_rate'
    """
    new = RENAMED_FIELDS.get(name, name)
    if new not in RENAMED_FIELDS.values():
        return name
    return new if has_config_field(new) else next(old for old, renamed in RENAMED_FIELDS.items() if renamed == new)


def missing_field_reason(name: str) -> str:
    """Why the installed GRPOConfig has no field ``name``: the release, and when the field came or went."""
    difference = DIFFERENCES[name]
    package = _label(difference.package)
    when = f"added in {package} {difference.since}" if difference.field == "added" else f"removed in {package} {difference.since}"
    return f"{package} {installed(difference.package)} has no {name} ({when})"


def lacking(option: str) -> str | None:
    """Why the installed stack cannot run GRPOTrainer's rollout option ``option`` (a key of :data:`OPTION_NEEDS`): the
    releases it needs and the ones installed; None where it can."""
    needs = [DIFFERENCES[name] for name in OPTION_NEEDS[option]]
    if all(newer(name) for name in OPTION_NEEDS[option]):
        return None
    want = " and ".join(f"{_label(d.package)} >= {d.since}" for d in needs)
    have = " and ".join(f"{_label(package)} {installed(package)}" for package in dict.fromkeys(d.package for d in needs))
    return f"{option} needs {want}, and this stack has {have}"


def _label(package: str) -> str:
    return "TRL" if package == "trl" else package


def portable_tokenizer_config(config: dict[str, Any]) -> dict[str, Any]:
    """A ``tokenizer_config.json`` that both ends read alike (``tokenizer_config_v5``): extra special tokens under the
    name both read, a tokenizer class both know, and the model inputs named, so that transformers 4 returns no
    ``token_type_ids`` (``token_type_ids_dropped``).

    >>> portable_tokenizer_config({"extra_special_tokens": ["<|im_start|>"], "tokenizer_class": "TokenizersBackend"})
    {'tokenizer_class': 'PreTrainedTokenizerFast', 'additional_special_tokens': ['<|im_start|>'], 'model_input_names': ['input_ids', 'attention_mask']}
    """
    config = dict(config)
    extra = config.pop("extra_special_tokens", None)
    if isinstance(extra, dict) and extra:
        config["extra_special_tokens"] = extra  # named tokens: both ends read a mapping
    elif extra:
        config["additional_special_tokens"] = list(extra)
    if config.get("tokenizer_class") == "TokenizersBackend":
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config.setdefault("model_input_names", ["input_ids", "attention_mask"])
    return config


def portable_model_config(config: dict[str, Any]) -> dict[str, Any]:
    """A model's ``config.json`` that both ends read alike (``rope_parameters``): each (sub-)config that keeps its rotary
    settings in ``rope_parameters``, as transformers 5 writes them, keeps them where transformers 4 reads them too,
    ``rope_theta`` and ``rope_scaling`` (an M-RoPE model's ``mrope_section`` is indexed there).

    >>> text = portable_model_config({"text_config": {"rope_parameters": {"rope_theta": 1e6, "mrope_section": [2, 3, 3]}}})
    >>> text["text_config"]["rope_theta"], text["text_config"]["rope_scaling"]
    (1000000.0, {'mrope_section': [2, 3, 3]})
    """
    config = {key: portable_model_config(value) if isinstance(value, dict) and key.endswith("_config") else value
              for key, value in config.items()}
    rope = config.get("rope_parameters")
    if isinstance(rope, dict):
        if "rope_theta" in rope:
            config.setdefault("rope_theta", rope["rope_theta"])
        if "mrope_section" in rope:
            config.setdefault("rope_scaling", {key: value for key, value in rope.items() if key != "rope_theta"})
    return config


def generate_inputs(encoding) -> dict[str, Any]:
    """What ``generate`` takes from a tokenizer's output: input_ids and attention_mask, as TRL's GRPOTrainer hands them
    (``token_type_ids_dropped``: transformers 4 tokenizers may add token_type_ids); from a processor's output with
    images, all of it, as TRL hands it: without ``pixel_values`` and the rest the model answers blind."""
    if "pixel_values" in encoding:
        return dict(encoding)
    return {"input_ids": encoding["input_ids"], "attention_mask": encoding["attention_mask"]}
