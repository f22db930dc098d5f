"""Make TRL 1.15's GRPOTrainer run where Triton cannot (a CPU), and Unsloth's trainer run any model.

TRL 1.15 (the newest release Unsloth 2026.10.9 accepts) computes per-token log-probabilities with a Triton kernel,
chosen by whether Triton imports, not by where the tensors are (trl/trainer/utils.py, add_fused_lm_head:
``_ChunkedLogProbFunction``; ``fused_lm_head`` in grpo_lite/machine/stack.py). Without Triton (torch's CPU wheel) it calls ``None.apply`` on the
first training step; with it (torch's CUDA build, what pip installs on Linux) on a machine without a GPU, the kernel is
launched on CPU tensors and fails ("0 active drivers"). :func:`enable_cpu_logprobs` gives tensors on a CPU the
equivalent plain-PyTorch function and leaves those on a GPU to TRL's kernel, on the devices TRL's own kernel check
names (``_supports_trl_loss_kernel``: cuda, xpu). TRL 1.16 computes them with torch operations off those devices
itself (``cpu_logprobs`` in grpo_lite/machine/stack.py), and is left as it is.

Once Unsloth is imported, ``trl.GRPOTrainer`` is Unsloth's generated trainer for the whole process, and it calls
``model.for_training()`` on every step and picks mixed precision itself: :func:`prepare_for_unsloth_trainer` gives
a model not loaded by Unsloth (the demo, ``backend="transformers"`` or ``"cpu"``) the two methods Unsloth's
loaders attach, and keeps an fp32 run in fp32.

TRL 0.28 removed ``max_prompt_length``; :func:`cut_prompts_on_the_left` cuts a ported one where TRL cut it before.
From TRL 0.24 on, Unsloth's trainer scores rows with images on text; :func:`image_rewards_as_text` does the same
without it.
"""

from __future__ import annotations

import contextlib
import functools
import re
from typing import Any

import torch

from ..data.prompts import DatasetError, row_settings, template_columns
from ..machine import stack
from ..monitor.samples import note_row_settings


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


KERNEL_DEVICES = ("cuda", "xpu")  # trl/trainer/utils.py, _supports_trl_loss_kernel: where TRL's Triton kernels run


class LogProbsByDevice:
    """TRL's Triton log-prob kernel for tensors on a GPU, :class:`TorchLogProbFunction` for the rest."""

    def __init__(self, kernel):
        self.kernel = kernel

    def apply(self, hidden: torch.Tensor, *args):
        chosen = self.kernel if hidden.device.type in KERNEL_DEVICES else TorchLogProbFunction
        return chosen.apply(hidden, *args)


def enable_cpu_logprobs() -> bool:
    """Let TRL's fused LM head compute log-probabilities on a CPU: :class:`TorchLogProbFunction` in place of TRL's
    Triton kernel where Triton is missing, and beside it (:class:`LogProbsByDevice`) where Triton imports.

    Returns True when tensors on a CPU take a plain-PyTorch path, TRL's own from TRL 1.16 (``cpu_logprobs``), False
    where TRL has no fused head (before TRL 1.x). Idempotent; imports trl, so call it only after a possible Unsloth
    import.
    """
    import trl.trainer.utils as trl_utils

    current = getattr(trl_utils, "_ChunkedLogProbFunction", NotImplemented)
    if current is NotImplemented:
        return False
    if stack.newer("cpu_logprobs"):
        return True
    if current is None:
        trl_utils._ChunkedLogProbFunction = TorchLogProbFunction
    elif current is not TorchLogProbFunction and not isinstance(current, LogProbsByDevice):
        trl_utils._ChunkedLogProbFunction = LogProbsByDevice(current)
    return True


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


_CPU_WITH_INDEX = re.compile(r"cpu:\d+")


@functools.cache
def restore_cpu_storages_by_index() -> None:
    """Let ``torch.load`` read a checkpoint onto ``cpu:N``, the device accelerate gives each process of a run on several
    CPU processes (accelerate/state.py, ``set_device``: ``torch.device("cpu", local_process_index % 1)``). The Trainer
    loads the optimizer state there when resuming a run on more than one process (transformers/trainer.py,
    ``_load_optimizer_and_scheduler``: ``map_location=self.args.device``), and torch restores a storage only to the
    location ``"cpu"`` (torch/serialization.py, ``_cpu_deserialize``): the resume failed with "don't know how to restore
    data location ... (tagged with cpu:0)". A storage is read into CPU memory before it is restored, so ``cpu:N`` takes
    it as it is. Registered once per process, through torch's own registry of locations (``register_package``)."""
    torch.serialization.register_package(11, lambda storage: None,
                                         lambda storage, location: storage if _CPU_WITH_INDEX.fullmatch(location) else None)


def enable_input_grads_for_checkpointing(model, config) -> None:
    """Make a LoRA model's inputs require grad when the run checkpoints, as TRL does from 0.27 on; TRL 0.22 checkpoints
    reentrantly and skips it for ``use_reentrant=False``, and then no gradient reaches the adapter (``peft_input_grads``
    in grpo_lite/machine/stack.py)."""
    if getattr(config, stack.field_name("gradient_checkpointing")) and hasattr(model, "peft_config") and hasattr(model, "enable_input_require_grads"):
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


class _BatchRows:
    """The prompts of the batch the trainer is generating for, each with its row's settings (the values of the columns
    the chat template reads), found again by the conversations the trainer renders."""

    def __init__(self, prompts: list, settings: list[dict[str, Any]]):
        self.prompts = prompts
        self.settings = settings
        self.next = 0

    def settings_for(self, conversations: list) -> list[dict[str, Any]] | None:
        """Each conversation's row settings, the rows taken in batch order from where the last render stopped: TRL
        renders the batch at once (1.x) or one prompt after the other (0.22); None when one is no prompt of the batch."""
        found, position, count = [], self.next, len(self.prompts)
        for conversation in conversations:
            index = next((i % count for i in range(position, position + count) if self.prompts[i % count] == conversation), None)
            if index is None:
                return None
            found.append(self.settings[index])
            position = index + 1
        self.next = position % count
        return found


def _render_rows(render, conversations: list, settings: list[dict[str, Any]], args, kwargs):
    """``render`` (the tokenizer's apply_chat_template) of a batch of conversations, each with its row's settings over
    ``kwargs``: the rows of one setting rendered together, their outputs (texts, or ``input_ids`` and the other per-row
    lists) put back in batch order."""
    from transformers import BatchEncoding

    groups: list[tuple[dict[str, Any], list[int]]] = []
    for index, own in enumerate(settings):
        group = next((g for g in groups if g[0] == own), None)
        if group is None:
            groups.append(group := (own, []))
        group[1].append(index)
    if len(groups) == 1:
        return render(conversations, *args, **{**kwargs, **groups[0][0]})
    placed: dict[str, list] | list = [None] * len(conversations)
    for own, indices in groups:
        output = render([conversations[i] for i in indices], *args, **{**kwargs, **own})
        if isinstance(output, list):
            for i, value in zip(indices, output):
                placed[i] = value
            continue
        if isinstance(placed, list):
            placed = {}
        for key, values in output.items():
            if not isinstance(values, list) or len(values) != len(indices):
                raise DatasetError(f"the dataset's columns the chat template reads are rendered per row for text prompts "
                                   f"returned as lists; this render returns {key} as a {type(values).__name__}")
            column = placed.setdefault(key, [None] * len(conversations))
            for i, value in zip(indices, values):
                column[i] = value
    return placed if isinstance(placed, list) else BatchEncoding(placed)


@contextlib.contextmanager
def render_with_template_kwargs(trainer, tokenizer, chat_template_kwargs: dict):
    """While training, every prompt the trainer renders gets its row's values of the columns the chat template reads
    (:func:`grpo_lite.data.prompts.row_settings`), over the run's ``chat_template_kwargs``, as Unsloth's trainer renders each row with its columns
    (unsloth/models/rl_replacements.py, "per-sample chat_template_kwargs").

    The trainer keeps only each row's prompt once it renders (TRL 1.15 renders the batch with one set of keywords,
    trl/trainer/grpo_trainer.py ``_tokenize_prompts``; TRL 0.22 each prompt with none, trl/data_utils.py
    ``maybe_apply_chat_template``), so the rows are taken where the batch still has its columns (the trainer's
    ``_generate_and_score_completions``) and the tokenizer's ``apply_chat_template`` renders each of their conversations
    with its row's values. A row's values win over the keywords the trainer passes: TRL 1.15 passes the run's
    ``chat_template_kwargs``, Unsloth's trainer on TRL 0.22 the same row values. Unsloth's on TRL 1.15 takes them from the
    rows but renders the batch with TRL's one set, so here they are applied once in every case. The rows' values are
    noted for samples.jsonl (:func:`grpo_lite.monitor.samples.note_row_settings`).

    Where GRPOConfig has no ``chat_template_kwargs`` field (before TRL 0.25) the run's are bound on the tokenizer too, and
    the prompts it trains on are the ones grpo-lite renders (grpo_lite.data.prompts); keywords a caller passes win over
    them."""
    bound = chat_template_kwargs if chat_template_kwargs and not template_kwargs_field(chat_template_kwargs) else {}
    columns = template_columns(tokenizer, trainer.train_dataset.column_names)
    if not (bound or columns) or "apply_chat_template" in vars(tokenizer):
        yield
        return
    from accelerate.utils import gather_object

    render = tokenizer.apply_chat_template
    generating = trainer._generate_and_score_completions
    batch: list[_BatchRows] = []  # the batch being generated for, while it is

    def apply_chat_template(conversation, *args, **kwargs):
        kwargs = {**bound, **kwargs}
        batched = isinstance(conversation, (list, tuple)) and bool(conversation) and isinstance(conversation[0], (list, tuple))
        settings = batch[0].settings_for(list(conversation) if batched else [conversation]) if batch else None
        if not settings or not any(settings):
            return render(conversation, *args, **kwargs)
        if not batched:
            return render(conversation, *args, **{**kwargs, **settings[0]})
        return _render_rows(render, list(conversation), settings, args, kwargs)

    def generate_and_score(inputs, *args, **kwargs):
        settings = row_settings(tokenizer, inputs)
        batch.append(_BatchRows([row.get("prompt") for row in inputs], settings))
        try:
            output = generating(inputs, *args, **kwargs)
        finally:
            batch.clear()
        note_row_settings(trainer, gather_object(settings))  # gathered as the trainer gathers the prompts it logs
        return output

    tokenizer.apply_chat_template = apply_chat_template
    wrapped = vars(trainer).get("_generate_and_score_completions")  # another wrapper of the run's (samples.py), kept
    if columns:
        trainer._generate_and_score_completions = generate_and_score
    try:
        yield
    finally:
        del tokenizer.apply_chat_template
        if columns:
            if wrapped is None:
                del trainer._generate_and_score_completions
            else:
                trainer._generate_and_score_completions = wrapped


def cut_prompts_on_the_left(trainer, max_prompt_length: int) -> None:
    """Give every prompt ``trainer`` generates from and scores its last ``max_prompt_length`` tokens, as TRL 0.22-0.27
    cut them (trl 0.22.2, trl/trainer/grpo_trainer.py, _generate_and_score_completions: truncate_with_protected_tokens).

    TRL 1.15 renders and tokenizes each batch's prompts in ``_tokenize_prompts`` and both its generation paths
    (transformers and vLLM, ``_generate_single_turn``) and its log-probability pass take those ids (``_generate`` returns
    them to ``_generate_and_score_completions``): the ids are cut as they come back, whatever rendered them. Unsloth's
    generated trainer keeps both (unsloth/models/rl.py, _patch_trl_rl_trainers: no rl_replacements.py edit touches
    ``_tokenize_prompts``, and ``grpo_trainer__generate`` only guards vLLM's weight sync in ``_generate``, keeping its
    call). Only text prompts are cut here: the log-probability pass renders a prompt with images again, uncut
    (``_generate_and_score_completions``: ``self.processing_class(images=..., text=...)``), so train() refuses a cut of
    one (``_say_cut_prompts``)."""
    tokenize = trainer._tokenize_prompts

    @functools.wraps(tokenize)
    def tokenize_and_cut(prompts):
        prompt_ids, images, multimodal_fields = tokenize(prompts)
        return [list(ids)[-max_prompt_length:] for ids in prompt_ids], images, multimodal_fields

    trainer._tokenize_prompts = tokenize_and_cut


@contextlib.contextmanager
def image_rewards_as_text(trainer):
    """While training, rewards scoring rows with images get the prompts rendered and the completions decoded, as text,
    as Unsloth's trainer hands them from TRL 0.24 on (``image_rewards_as_text`` in grpo_lite/machine/stack.py;
    unsloth/models/rl_replacements.py, ``_calculate_rewards(inputs, prompts_text, completions_text, ...)``): the reward
    functions of Unsloth's vision notebooks read text (``re.findall(pattern, completion)``) on every TRL, and a run
    here scores them alike on every backend. A prompt is rendered as the trainer renders it for generation (TRL's
    ``apply_chat_template`` with the run's ``chat_template_kwargs``), a completion decoded from its ids without special
    tokens. Where Unsloth's trainer has done so already, or on a batch without images, nothing changes; nor before TRL
    0.24, where a chat prompt's completions are chat messages under Unsloth too."""
    if not stack.newer("image_rewards_as_text") or "_calculate_rewards" in vars(trainer):
        yield
        return
    from trl.data_utils import apply_chat_template

    calculate = trainer._calculate_rewards
    processor = trainer.processing_class

    @functools.wraps(calculate)
    def calculate_on_text(inputs, prompts, completions, completion_ids_list):
        if any(row.get("image") is not None or row.get("images") for row in inputs) and any(
                not isinstance(completion, str) for completion in completions):
            keywords = getattr(trainer, "chat_template_kwargs", None) or {}
            prompts = [prompt if isinstance(prompt, str) else
                       apply_chat_template({"prompt": prompt}, processor, **keywords)["prompt"] for prompt in prompts]
            completions = processor.batch_decode(completion_ids_list, skip_special_tokens=True)
        return calculate(inputs, prompts, completions, completion_ids_list)

    trainer._calculate_rewards = calculate_on_text
    try:
        yield
    finally:
        del trainer._calculate_rewards
