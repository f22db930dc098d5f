"""Make TRL 1.15's GRPOTrainer run where Triton cannot (CPU-only machines), and Unsloth's trainer run any model.

TRL 1.15 (the newest release Unsloth 2026.10.9 accepts) computes per-token log-probabilities with a Triton
kernel and, when Triton is missing, calls ``None.apply`` on the first training step. TRL 1.16 added a
plain-PyTorch path for exactly this case. Until the lock can move to 1.16, :func:`enable_cpu_logprobs`
installs the equivalent plain-PyTorch function in its place; on machines where Triton imports (any CUDA
setup) it changes nothing.

Once Unsloth is imported, ``trl.GRPOTrainer`` is Unsloth's generated trainer for the whole process, and it calls
``model.for_training()`` on every step and picks mixed precision itself: :func:`prepare_for_unsloth_trainer` gives
a model not loaded by Unsloth (the demo, ``backend="transformers"`` or ``"cpu"``) the two methods Unsloth's
loaders attach, and keeps an fp32 run in fp32.

TRL 0.28 removed ``max_prompt_length``; :func:`cut_prompts_on_the_left` cuts a ported one where TRL cut it before.
"""

from __future__ import annotations

import contextlib
import functools

import torch

from ..machine import stack


class TorchLogProbFunction:
    """Plain-PyTorch stand-in for ``trl.kernels.ChunkedLogProbFunction`` (same signature and outputs).

    It materialises the ``[N, V]`` logits, which the Triton kernel avoids; fine for the models a CPU trains.
    Autograd provides the backward pass.
    """

    @staticmethod
    def apply(
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        targets: torch.Tensor,
        temperature: float,
        chunk_size: int,
        final_logit_softcapping: float | None = None,
        logit_scale: float = 1.0,
        outputs: tuple[str, ...] = ("log_probs",),
    ):
        logits = torch.nn.functional.linear(hidden, weight, bias).float() * logit_scale
        if final_logit_softcapping is not None:
            logits = final_logit_softcapping * torch.tanh(logits / final_logit_softcapping)
        logits = logits / temperature
        log_z = torch.logsumexp(logits, dim=-1)
        target_logits = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        log_probs = target_logits - log_z
        entropy = log_sum_sq_probs = mean_logits = is_top1 = None
        if "entropy" in outputs:
            probs = torch.softmax(logits, dim=-1)
            entropy = log_z - (probs * logits).sum(-1)
        with torch.no_grad():
            if "log_sum_sq_probs" in outputs:
                log_sum_sq_probs = torch.logsumexp(2 * (logits - log_z.unsqueeze(-1)), dim=-1)
            if "mean_logits" in outputs:
                mean_logits = logits.mean(-1)
            if "is_top1" in outputs:
                is_top1 = logits.argmax(-1) == targets
        return log_probs, entropy, log_sum_sq_probs, mean_logits, is_top1


def enable_cpu_logprobs() -> bool:
    """Install :class:`TorchLogProbFunction` when TRL's Triton kernel is unavailable.

    Returns True when the fallback is (now) in place, False when TRL has its own kernel or fallback.
    Idempotent; imports trl, so call it only after a possible Unsloth import.
    """
    import trl.trainer.utils as trl_utils

    current = getattr(trl_utils, "_ChunkedLogProbFunction", NotImplemented)
    if current is None:
        trl_utils._ChunkedLogProbFunction = current = TorchLogProbFunction
    return current is TorchLogProbFunction


def prepare_for_unsloth_trainer(model, config) -> None:
    """Make ``model`` train under Unsloth's generated GRPOTrainer as ``config`` says; nothing changes under TRL's.

    - ``for_training`` / ``for_inference`` when Unsloth's loaders did not attach them: the trainer calls
      ``self.model.for_training(use_gradient_checkpointing=...)`` unconditionally after generating
      (unsloth/models/rl_replacements.py, ``_generate_and_score_completions``) and both around ``train()``
      (unsloth/models/rl.py, ``prepare_for_training_mode``). Here they switch train/eval mode only: gradient
      checkpointing is the Trainer's, from the config.
    - An fp32 model with neither ``fp16`` nor ``bf16`` asked for stays in fp32: the trainer otherwise turns on fp16
      autocast (bf16 on Ampere or newer) and sets ``ACCELERATE_MIXED_PRECISION`` for the whole process, even with
      ``use_cpu=True`` (rl.py, the mixed-precision block of the trainer's ``__init__``). ``_unsloth_forced_float32``
      is the stamp Unsloth's own loader puts on models that must stay in fp32.
    """
    if not hasattr(model, "for_training"):
        model.for_training = lambda use_gradient_checkpointing=None: model.train()
        model.for_inference = lambda: model.eval()
    if not (config.fp16 or config.bf16) and model.get_input_embeddings().weight.dtype == torch.float32:
        model._unsloth_forced_float32 = True


def enable_input_grads_for_checkpointing(model, config) -> None:
    """Make a LoRA model's inputs require grad when the run checkpoints, as TRL does from 0.27 on; TRL 0.22 checkpoints
    reentrantly and skips it for ``use_reentrant=False``, and then no gradient reaches the adapter (``peft_input_grads``
    in grpo_lite/machine/stack.py)."""
    if config.gradient_checkpointing and hasattr(model, "peft_config") and hasattr(model, "enable_input_require_grads"):
        model.enable_input_require_grads()


@contextlib.contextmanager
def generate_with_tokenizer(model, tokenizer, config):
    """While training, ``model.generate`` is given the tokenizer where the run stops at text (``generation_kwargs``'
    ``stop_strings``, from ``vllm_sampling_params``' ``stop``): transformers' generate refuses stop strings without
    it, and TRL's GRPOTrainer passes none. A completion that stops at text is padded with the end-of-sequence token,
    where TRL's completion mask ends, as vLLM's completions end at the stop string; padded with the pad token, which
    need not be one, its padding would be trained on as the completion's and the completion counted as cut off.
    Nothing changes on vLLM or without stop strings."""
    kwargs = getattr(config, "generation_kwargs", None) or {}
    if getattr(config, "use_vllm", False) or "stop_strings" not in kwargs or "generate" in vars(model):
        yield
        return
    model.generate = functools.partial(model.generate, tokenizer=tokenizer, pad_token_id=tokenizer.eos_token_id)
    try:
        yield
    finally:
        del model.generate


def template_kwargs_field(chat_template_kwargs: dict) -> dict:
    """The GRPOConfig field that hands the run's ``chat_template_kwargs`` to TRL, where the installed GRPOConfig has it
    (``chat_template_kwargs`` in grpo_lite/machine/stack.py); :func:`render_with_template_kwargs` covers the rest."""
    return {"chat_template_kwargs": chat_template_kwargs} if chat_template_kwargs and stack.has_config_field("chat_template_kwargs") else {}


@contextlib.contextmanager
def render_with_template_kwargs(tokenizer, chat_template_kwargs: dict):
    """While training, the tokenizer's chat template gets the run's ``chat_template_kwargs`` where the installed TRL
    has no field to take them: before TRL 0.25 the trainer renders each prompt with ``tokenizer.apply_chat_template``
    and no keywords (trl/data_utils.py, maybe_apply_chat_template), so they are bound on this tokenizer for the run,
    and the prompts it trains on are the ones grpo-lite renders (grpo_lite.data.prompts). Keywords a caller passes
    still win. Nothing changes where GRPOConfig takes them."""
    if not chat_template_kwargs or template_kwargs_field(chat_template_kwargs) or "apply_chat_template" in vars(tokenizer):
        yield
        return
    tokenizer.apply_chat_template = functools.partial(tokenizer.apply_chat_template, **chat_template_kwargs)
    try:
        yield
    finally:
        del tokenizer.apply_chat_template


def cut_prompts_on_the_left(trainer, max_prompt_length: int) -> None:
    """Give every prompt ``trainer`` generates from and scores its last ``max_prompt_length`` tokens, as TRL 0.22-0.27
    cut them (trl 0.22.2, trl/trainer/grpo_trainer.py, _generate_and_score_completions: truncate_with_protected_tokens).

    TRL 1.15 renders and tokenizes each batch's prompts in ``_tokenize_prompts`` and both its generation paths
    (transformers and vLLM, ``_generate_single_turn``) and its log-probability pass take those ids (``_generate`` returns
    them to ``_generate_and_score_completions``): the ids are cut as they come back, whatever rendered them. Unsloth's
    generated trainer keeps both (unsloth/models/rl.py, _patch_trl_rl_trainers: no rl_replacements.py edit touches
    ``_tokenize_prompts``, and ``grpo_trainer__generate`` only guards vLLM's weight sync in ``_generate``, keeping its
    call). Only text prompts reach here: train() refuses a dataset with images before a cut."""
    tokenize = trainer._tokenize_prompts

    @functools.wraps(tokenize)
    def tokenize_and_cut(prompts):
        prompt_ids, images, multimodal_fields = tokenize(prompts)
        return [list(ids)[-max_prompt_length:] for ids in prompt_ids], images, multimodal_fields

    trainer._tokenize_prompts = tokenize_and_cut
