"""Out of GPU memory: where the step ran out, the planner's estimate against the card, the nearest config that fits.

torch raises ``torch.cuda.OutOfMemoryError`` wherever an allocation fails, with a CUDA traceback and no
word on which setting to lower. :func:`out_of_memory` turns it into :class:`OutOfMemory`, which says

  - where the step ran out, read from the traceback's frames (generation, scoring the completions, the
    loss's forward pass, backward, the optimizer step) and what holds the memory there;
  - the memory planner's estimate (:func:`grpo_lite.plan`) for this run against the card, and what the
    run needed when CUDA's message says so;
  - the nearest config that fits as the planner proposes it (for a vLLM run, a lower
    ``gpu_memory_utilization`` first) and the fixes for that phase that keep the run's batch (gradient
    checkpointing, smaller micro-batches, 8-bit AdamW).

When the planner's estimate is under the card (it underestimated this run), the config proposed is the
nearest one under the estimate scaled by how far it was off (card / needed), or, when CUDA gave no
numbers, the nearest one the planner puts under its estimate for this run. Without a CUDA GPU (the error
raised by hand, as the tests do) there is no card: the estimate is shown with that nearest smaller config.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

from ..errors import RunFault
from ..machine import stack
from ..machine.device import GB, GPU, this_gpu
from ..model.load import loaded_as

LOAD_MODEL_OPTIONS = ("lora_rank", "load_in_4bit", "gpu_memory_utilization")  # the rest are train() options
PROMPT_ROWS = 256  # prompts measured for the planner's prompt length


class OutOfMemory(RunFault, torch.cuda.OutOfMemoryError):
    """The GPU ran out of memory during training; the message says where, what the planner estimated,
    and which settings to lower. It is a ``torch.cuda.OutOfMemoryError``, raised from CUDA's own.

    Attributes: ``phase`` (where the step ran out), ``step`` (the steps done), ``plan`` (the planner's
    :class:`~grpo_lite.machine.planner.MemoryPlan`, or None), ``nearest`` (the planner's nearest config that fits,
    as options), ``phase_fixes`` (options for that phase that keep the batch), ``checkpoint`` (the run's
    newest whole checkpoint, or None).
    """


@dataclass(frozen=True)
class Phase:
    name: str
    holds: str  # what takes the memory there


GENERATION = Phase("generation", "the KV cache of the whole generation batch (its completions, up to max_completion_length "
                                 "tokens each) beside the model")
SCORING = Phase("scoring the completions", "log-probabilities under the old policy and the reference model: logits over "
                                           "the vocabulary for per_device_train_batch_size completions at a time")
LOSS = Phase("the loss's forward pass", "activations and logits of per_device_train_batch_size completions")
BACKWARD = Phase("backward", "the gradients of per_device_train_batch_size completions and the activations kept for them")
OPTIMIZER = Phase("the optimizer step", "the optimizer's state for every trainable weight")
ELSEWHERE = Phase("outside the GRPO step", "what the last frames of the traceback allocated (a callback, held-out evaluation)")


def where_it_ran_out(tb: TracebackType | None) -> Phase:
    """The phase of the GRPO step the traceback ran out in, from the names of its functions (TRL's, and
    Unsloth's compiled copy of them, share these names)."""
    frames = [frame for frame, _ in traceback.walk_tb(tb)]
    names = {frame.f_code.co_name for frame in frames}
    # TRL before 0.24 calls generate inside _generate_and_score_completions (generation_helpers in machine/stack.py)
    if names & {"_generate", "_generate_single_turn"} or {"_generate_and_score_completions", "generate"} <= names:
        return GENERATION
    if "_generate_and_score_completions" in names:
        return SCORING
    if "backward" in names:
        return BACKWARD
    if names & {"compute_loss", "_compute_loss"}:
        return LOSS
    if any(f"{sep}optim{sep}" in frame.f_code.co_filename for frame in frames for sep in "/\\") or "_clip_grad_norm" in names:
        return OPTIMIZER
    return ELSEWHERE




_UNITS = {"B": 1 / GB, "KiB": 1 / 1024**2, "MiB": 1 / 1024, "GiB": 1.0}
_CUDA_NUMBERS = re.compile(r"Tried to allocate ([\d.]+) (GiB|MiB|KiB|B)\b.*?total capacity of ([\d.]+) (GiB|MiB)"
                           r".*?of which ([\d.]+) (GiB|MiB|KiB|B) is free", re.S)


def cuda_numbers(message: str) -> tuple[float, float, float] | None:
    """(card GiB, free GiB, GiB the failed allocation asked for) from CUDA's message, when it has them.

    >>> cuda_numbers("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 14.74 GiB of "
    ...              "which 512.00 MiB is free. Including non-PyTorch memory, this process has 14.2 GiB memory in use.")
    (14.74, 0.5, 2.0)
    """
    found = _CUDA_NUMBERS.search(message)
    if found is None:
        return None
    tried, tried_unit, total, total_unit, free, free_unit = found.groups()
    return float(total) * _UNITS[total_unit], float(free) * _UNITS[free_unit], float(tried) * _UNITS[tried_unit]


def _longest_prompt(trainer) -> tuple[int, int]:
    """Tokens in the longest of the first prompts of the training set (what generation pads to), and the most of them
    a prompt's images make (a vision model's tower runs over them)."""
    from ..data.prepare import image_column, image_token_id, prompt_ids

    dataset, tokenizer = trainer.train_dataset, trainer.processing_class
    sample = dataset.select(range(min(PROMPT_ROWS, len(dataset))))
    if image_column(sample.column_names) is None and all(isinstance(prompt, str) for prompt in sample["prompt"]):
        return max(len(tokenizer(prompt)["input_ids"]) for prompt in sample["prompt"]), 0
    ids, token = list(prompt_ids(sample, tokenizer)), image_token_id(tokenizer)
    return max(map(len, ids)), max(row.count(token) for row in ids) if token is not None else 0


def _planner_run(trainer) -> dict[str, Any] | None:
    """The run as the planner takes it, or None when the planner does not model it (no LoRA).

    The planner's ``num_generations`` is the sequences a step holds at once: TRL's micro-batch,
    ``per_device_train_batch_size`` (equal to ``num_generations`` in every preset; larger when a micro-batch
    holds several prompts' groups). :func:`as_run_options` turns its suggestion back into the run's options.
    """
    model, args = trainer.model, trainer.args
    lora = getattr(model, "peft_config", {}).get(getattr(model, "active_adapter", "default"))
    if lora is None:
        return None
    loaded = loaded_as(model)
    backend = loaded.backend if loaded is not None else None
    vllm_share = backend.gpu_memory_utilization if backend is not None and backend.fast_inference else None
    prompt_tokens, image_tokens = _longest_prompt(trainer)
    return dict(
        model_name_or_config=model.config,
        num_generations=args.per_device_train_batch_size,
        max_prompt_tokens=prompt_tokens,
        image_tokens=image_tokens,
        max_completion_length=args.max_completion_length,
        lora_rank=lora.r,
        load_in_4bit=backend.load_in_4bit if backend is not None else bool(getattr(model, "is_loaded_in_4bit", False)),
        gpu_memory_utilization=vllm_share,
        weight_bytes=model.get_input_embeddings().weight.element_size(),
        backend="transformers" if backend is not None and backend.name == "transformers" else "unsloth",
    )


def nearest_config(run: dict[str, Any], card_gb: float, budget_gb: float) -> tuple[Any, dict[str, Any]]:
    """The planner's nearest config for ``run`` under ``budget_gb`` (the card, or less where the planner
    underestimated), as (its plan, options; empty when none fits). For a vLLM run, whose pool is a share
    of the whole card, the highest ``gpu_memory_utilization`` that fits with nothing else changed comes first."""
    from ..machine.planner import plan

    share = run["gpu_memory_utilization"]
    for lower in (round(share - step * 0.05, 2) for step in range(1, int(share * 20) - 1)) if share else ():
        smaller = plan(gpu=card_gb, **{**run, "gpu_memory_utilization": lower})
        if smaller.total_gb <= budget_gb:
            return smaller, {"gpu_memory_utilization": lower}
    result = plan(gpu=budget_gb, **run)
    if result.suggestion is None:
        return result, {}
    return result.suggestion, {f: new for f, (_, new) in result.changes.items()}


def as_run_options(planned: dict[str, Any], args) -> dict[str, Any]:
    """The planner's suggested changes as the run's options: its sequences per step are the micro-batch
    (``per_device_train_batch_size``), and ``num_generations`` comes down with it only where TRL needs it to, as
    each generation batch (micro-batch x processes x ``steps_per_generation``) must hold whole groups of ``num_generations``.

    >>> from types import SimpleNamespace
    >>> as_run_options({"num_generations": 1024}, SimpleNamespace(num_generations=4096, steps_per_generation=1))
    {'per_device_train_batch_size': 1024, 'num_generations': 1024}
    >>> as_run_options({"num_generations": 8, "lora_rank": 8}, SimpleNamespace(num_generations=8, steps_per_generation=1))
    {'lora_rank': 8, 'per_device_train_batch_size': 8}
    """
    options = {name: value for name, value in planned.items() if name != "num_generations"}
    if "num_generations" in planned:
        batch = planned["num_generations"]
        options["per_device_train_batch_size"] = batch
        if (batch * getattr(args, "world_size", 1) * (args.steps_per_generation or 1)) % args.num_generations:
            options["num_generations"] = batch
    return options


def phase_fixes(phase: Phase, args) -> dict[str, Any]:
    """Options that free memory in ``phase`` and keep the batch each optimizer step sees."""
    if phase in (SCORING, LOSS, BACKWARD):
        checkpointing = stack.field_name("gradient_checkpointing")  # transformers 5.23 reads activation_checkpointing
        if phase is not SCORING and not getattr(args, checkpointing):
            return {checkpointing: True}
        if args.per_device_train_batch_size >= 2 and args.per_device_train_batch_size % 2 == 0:
            return {"per_device_train_batch_size": args.per_device_train_batch_size // 2,
                    "gradient_accumulation_steps": 2 * args.gradient_accumulation_steps}
    if phase is OPTIMIZER and "8bit" not in str(args.optim):
        return {"optim": "adamw_8bit"}
    return {}


def as_calls(options: dict[str, Any]) -> str:
    """``options`` as the calls that take them.

    >>> as_calls({"num_generations": 4, "lora_rank": 8})
    'train(..., num_generations=4) and load_model(..., lora_rank=8)'
    """
    calls = []
    for function, names in (("train", [k for k in options if k not in LOAD_MODEL_OPTIONS]),
                            ("load_model", [k for k in options if k in LOAD_MODEL_OPTIONS])):
        if names:
            calls.append(f"{function}(..., {', '.join(f'{k}={options[k]!r}' for k in names)})")
    return " and ".join(calls)


def _planner_lines(trainer, error: BaseException) -> tuple[list[str], Any, dict[str, Any]]:
    """What the planner says of this run against the card, with its plan and nearest config as options."""
    from ..machine.planner import PlanError, plan

    try:
        run = _planner_run(trainer)
    except PlanError as unreadable:
        return [f"The planner cannot read this model ({unreadable})."], None, {}
    if run is None:
        return ["The planner models LoRA runs only, and this run trains all weights."], None, {}
    numbers = cuda_numbers(str(error))
    card = this_gpu() or (GPU("the GPU", numbers[0]) if numbers else None)
    needed = numbers[0] - numbers[1] + numbers[2] if numbers else None
    estimate = plan(gpu=card.memory_gb if card else float("inf"), **run)
    parts = ", ".join(f"{name} {value:.2f}" for name, value in estimate.parts.items())
    smaller = estimate.total_gb * 0.999  # under the estimate: the planner's nearest config that needs less
    if card is None:
        lines = [f"No CUDA GPU is visible, so the planner's estimate, {estimate.total_gb:.2f} GB ({parts}), has no card to "
                 "be compared with (`grpo-lite plan` compares your model and settings with your card)."]
        budget, heading = smaller, "Nearest config the planner estimates smaller"
    else:
        lines = [f"The planner's estimate for this run: {estimate.total_gb:.2f} GB ({parts}) on {card.name} ({card.memory_gb:.2f} GB)"
                 + (f"; the run needed about {needed:.2f} GB." if needed else ".")]
        budget, heading = card.memory_gb, "Nearest config that fits, as the planner proposes it"
        if estimate.fits and needed:
            budget = card.memory_gb * estimate.total_gb / needed
            lines.append(f"The planner underestimated this run by {needed / estimate.total_gb:.1f}x, so the config below "
                         f"is the nearest one under its estimate scaled down to {budget:.2f} GB.")
        elif estimate.fits:
            budget, heading = smaller, "The planner underestimated this run. Nearest config it estimates smaller"
    fitting, planned = nearest_config(run, card.memory_gb if card else budget, budget)
    nearest = as_run_options(planned, trainer.args)
    if nearest:
        lines.append(f"{heading} ({fitting.total_gb:.2f} GB): {as_calls(nearest)}.")
    else:
        lines.append("The planner finds no config of this model that fits: use a smaller model or a bigger GPU.")
    return lines, estimate, nearest


def _resume_line(checkpoint: Path | None, changes: dict[str, Any]) -> str:
    from ..run.resume import RESUME_FIXED_CONFIG, RESUME_FIXED_RUN

    if checkpoint is None:
        return "No checkpoint of the steps done could be kept: start again with the settings above."
    fixed = [k for k in changes if k in RESUME_FIXED_CONFIG or k in RESUME_FIXED_RUN]
    free = [k for k in changes if k not in fixed]
    line = (f"The steps done are in {checkpoint.name}, which is whole: train(..., resume=True) continues from it with the "
            f"same settings (after restarting the runtime, if something else held GPU memory)")
    line += f" or with {', '.join(free)} changed" if free else ""
    line += (f"; {', '.join(fixed)} {'changes' if len(fixed) == 1 else 'change'} what a checkpoint holds, which resuming "
             "refuses: start another output_dir for that." if fixed else ".")
    return line


def out_of_memory(trainer, error: BaseException, phase: Phase, checkpoint: Path | None) -> OutOfMemory:
    """The :class:`OutOfMemory` for CUDA's ``error``, raised in ``phase`` of ``trainer``'s next step;
    ``checkpoint`` is the run's newest whole one."""
    step = trainer.state.global_step
    try:
        planner_lines, estimate, nearest = _planner_lines(trainer, error)
    except Exception as failed:  # a report that fails must not hide the error it reports
        planner_lines, estimate, nearest = [f"The planner could not estimate this run ({failed!r})."], None, {}
    fixes = phase_fixes(phase, trainer.args)
    lines = [f"out of GPU memory in {phase.name} during step {step + 1}, after {step} steps were done. Memory there "
             f"goes to {phase.holds}.", *planner_lines]
    if fixes:
        lines.append(f"For {phase.name}, first try this, which keeps the batch of each optimizer step: {as_calls(fixes)}.")
    lines.append(_resume_line(checkpoint, {**fixes, **nearest}))
    fault = OutOfMemory("\n".join(lines))
    fault.phase, fault.step, fault.plan, fault.checkpoint = phase.name, step, estimate, checkpoint
    fault.nearest, fault.phase_fixes = nearest, fixes
    return fault
