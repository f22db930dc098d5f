"""A short supervised warm-up on formatted examples before GRPO, as Unsloth's Qwen3 (4B) GRPO notebook does.

That notebook fine-tunes the model on ~60 examples written in the format its rewards check (a system prompt, the
question, and an answer with the reasoning and solution markers), so that GRPO's first completions already follow
the format and the format rewards have something to tell apart; then it GRPO-trains the same model and LoRA adapter.
It builds a ``Messages`` column (system, user, assistant), renders it to text with the chat template and runs
TRL's ``SFTTrainer`` with ``per_device_train_batch_size=1``, ``warmup_steps=5``, ``num_train_epochs=2``,
``learning_rate=2e-4``, ``weight_decay=0.01``, ``lr_scheduler_type="linear"``, ``seed=3407``.

:func:`warmup_format` does the same on any backend, the CPU included: the examples are chat conversations (a list of
messages each, or rows with ``messages``/``Messages``), rows with ``prompt`` and ``completion`` (the loss on the
completion only) or rows with ``text`` already rendered; the adapter it trains stays on the model, trainable, for
the ``train()`` that follows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewards.extract import is_data_frame

from ..data.prompts import chat_messages, is_chat, template_kwargs
from ..errors import UserError
from ..log import logger
from ..machine import stack
from .trl_compat import enable_cpu_logprobs, prepare_for_unsloth_trainer

# Unsloth's Qwen3 (4B) GRPO notebook's SFTConfig, but for optim="adamw_8bit" (bitsandbytes, a GPU) and logging_steps
WARMUP_DEFAULTS: dict[str, Any] = dict(per_device_train_batch_size=1, gradient_accumulation_steps=1, warmup_steps=5,
                                       num_train_epochs=2, learning_rate=2e-4, weight_decay=0.01, lr_scheduler_type="linear",
                                       seed=3407, logging_steps=1, optim="adamw_torch", report_to="none", save_strategy="no",
                                       gradient_checkpointing=False)


class WarmupError(UserError, ValueError):
    """Examples a format warm-up cannot train on; the message says what each row needs."""


@dataclass
class WarmupResult:
    """What :func:`warmup_format` did: the SFT trainer (its ``state.log_history``) and the loss at each logged step."""

    trainer: Any
    losses: list[float] = field(default_factory=list)


def _is_messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m and "content" in m for m in value)


def _row(example: Any, index: int) -> dict[str, Any]:
    """One example as SFTTrainer reads it: ``{"messages": [...]}``, ``{"prompt", "completion"}`` or ``{"text"}``."""
    if _is_messages(example):
        example = {"messages": example}
    if not isinstance(example, dict):
        raise WarmupError(f"format warm-up example {index}: {type(example).__name__}; give a list of chat messages "
                          "([{'role': 'user', 'content': ...}, {'role': 'assistant', 'content': ...}]), or a row with "
                          "messages, prompt and completion, or text")
    messages = example.get("messages", example.get("Messages"))
    if messages is not None:
        if not _is_messages(messages) or not any(m["role"] == "assistant" for m in messages):
            raise WarmupError(f"format warm-up example {index}: its messages need an assistant turn written in the format "
                              "the rewards check (role and content in each message)")
        return {"messages": [{"role": m["role"], "content": m["content"]} for m in messages]}
    if "prompt" in example and "completion" in example:
        return {"prompt": example["prompt"], "completion": example["completion"]}
    if isinstance(example.get("text"), str):
        return {"text": example["text"]}
    raise WarmupError(f"format warm-up example {index} has {sorted(example)}: give messages (a chat with an assistant "
                      "turn), prompt and completion, or text")


def _rows(examples: Any) -> list[dict[str, Any]]:
    if is_data_frame(examples):  # as the notebook builds them
        examples = examples.to_dict("records")
    rows = [_row(example, i) for i, example in enumerate(examples)]
    if not rows:
        raise WarmupError("format warm-up: no examples; give a few dozen written in the format the rewards check")
    shapes = {tuple(sorted(row)) for row in rows}
    if len(shapes) > 1:
        raise WarmupError(f"format warm-up: the examples mix shapes ({', '.join('/'.join(s) for s in sorted(shapes))}); "
                          "give them all in one")
    return rows


def _rendered_as_grpo(rows: list[dict[str, Any]], tokenizer, chat_template_kwargs: dict[str, Any],
                      fold_system_prompt: bool) -> list[dict[str, Any]]:
    """The examples' chat turns as GRPO's prompts render them (grpo_lite.data.prompts): a system turn the template cannot
    render folded into the first user turn, and the chat template's keyword arguments on each row, where TRL's
    SFTTrainer reads them (trl/trainer/sft_trainer.py, ``example.get("chat_template_kwargs")``)."""
    fitted = []
    for row in rows:
        row = {key: chat_messages(tokenizer, value, chat_template_kwargs, fold_system_prompt=fold_system_prompt)
               if key in ("messages", "prompt") and is_chat(value) else value for key, value in row.items()}
        fitted.append({**row, "chat_template_kwargs": chat_template_kwargs} if chat_template_kwargs and "text" not in row else row)
    return fitted


def warmup_format(model, tokenizer, examples, *, output_dir: str | Path = "outputs/format-warmup", max_steps: int = -1,
                  max_length: int | None = None, chat_template_kwargs: dict[str, Any] | None = None,
                  fold_system_prompt: bool = True, **sft_overrides: Any) -> WarmupResult:
    """Fine-tune ``model``'s LoRA adapter on ``examples`` with TRL's ``SFTTrainer`` before GRPO, as Unsloth's Qwen3
    GRPO notebook does, so the first completions already follow the format the rewards check.

    ``examples``: chat conversations (a list of messages each, or rows with ``messages``; the notebook's ``Messages``
    too), rows with ``prompt`` and ``completion`` (loss on the completion only), or rows with ``text``; a list, a
    ``datasets.Dataset`` or a pandas DataFrame. The notebook's settings (``WARMUP_DEFAULTS``: 2 epochs, learning
    rate 2e-4, batch 1) apply unless ``max_steps`` or ``sft_overrides`` (``trl.SFTConfig`` fields) say otherwise;
    ``max_length`` defaults to the model's ``max_seq_length``. The same model and adapter then go to ``train()``.
    Chat examples are rendered as the GRPO run renders its prompts: give the run's ``chat_template_kwargs`` (Qwen3's
    ``{"enable_thinking": False}``; ``None``: those of the last ``train()`` with this tokenizer), and a system turn
    the template rejects or drops is folded into the first user turn (``fold_system_prompt=False`` refuses)."""
    import datasets
    import torch
    from trl import SFTConfig, SFTTrainer

    enable_cpu_logprobs()  # TRL's SFT loss runs through the same Triton log-prob kernel as GRPO's
    rows = _rendered_as_grpo(_rows(examples), tokenizer, template_kwargs(tokenizer, chat_template_kwargs), fold_system_prompt)
    gpu = torch.cuda.is_available()
    precision = {"use_cpu": True, "bf16": False, "fp16": False} if not gpu else (
        {"bf16": True, "fp16": False} if torch.cuda.is_bf16_supported() else {"bf16": False, "fp16": True})
    if gpu and model.get_input_embeddings().weight.dtype == torch.float32:
        precision = {"bf16": False, "fp16": False}  # an fp32 model trains in fp32, as train() keeps it
    limit = max_length or getattr(model, "max_seq_length", None) or 1024
    # a renamed field under the name the installed transformers reads (stack.RENAMED_FIELDS), the user's over the defaults
    options = {stack.field_name(key): value for key, value in
               {**WARMUP_DEFAULTS, **precision, "max_length": limit, "max_steps": max_steps, **sft_overrides}.items()}
    try:
        config = SFTConfig(output_dir=str(output_dir), **options)
    except (TypeError, ValueError) as error:
        raise WarmupError(f"format warm-up: SFTConfig refused the settings: {error}") from None
    prepare_for_unsloth_trainer(model, config)  # Unsloth's generated SFTTrainer calls for_training too
    trainer = SFTTrainer(model=model, args=config, train_dataset=datasets.Dataset.from_list(rows), processing_class=tokenizer)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    logger.info(f"format warm-up: {trainer.state.global_step} steps on {len(rows)} examples"
                + (f", loss {losses[0]:.3f} -> {losses[-1]:.3f}" if losses else ""))
    return WarmupResult(trainer=trainer, losses=losses)
