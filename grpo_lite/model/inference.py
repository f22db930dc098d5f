"""Text in, text out: batched generation from a (LoRA) model, for trying a model and for evaluation.

Unsloth models loaded with ``fast_inference`` carry a vLLM engine as ``model.vllm_engine``; it is used when
present because it is many times faster than transformers' ``generate``. Otherwise prompts are left-padded
(decoder-only models continue from the right edge) and generated in batches.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..data.images import images_of, seen_images
from ..data.prompts import DatasetError, check_processor_for_images, is_chat, render_prompt, row_settings, template_kwargs
from ..machine import stack
from ..run.settings import ConfigError


def text_tokenizer(processing_class):
    """The tokenizer of a vision model's processor, or the tokenizer itself: what pads, decodes and knows the ids."""
    return getattr(processing_class, "tokenizer", processing_class)


def tool_call_parser(tokenizer):
    """The tokenizer TRL's ``parse_response`` reads a reply's tool calls with: ``tokenizer`` where it has its own
    ``response_template``/``response_schema``, else a copy given the schema TRL adds for the chat templates it knows, as
    GRPOTrainer adds it (trl/chat_template_utils.py, add_response_schema), the caller's tokenizer left as it was.
    TRL's ValueError for a template it does not know goes through."""
    from trl.chat_template_utils import add_response_schema

    if getattr(tokenizer, "response_template", None) is not None or getattr(tokenizer, "response_schema", None) is not None:
        return tokenizer
    return add_response_schema(copy.copy(tokenizer))


def tool_templates() -> dict[str, str]:
    """The chat templates the installed TRL reads tool calls out of, by file in trl/chat_templates: those TRL's own
    add_response_schema recognises, by their exact text (trl/chat_template_utils.py)."""
    from pathlib import Path
    from types import SimpleNamespace

    import trl
    from trl.chat_template_utils import add_response_schema

    known = {}
    for file in sorted((Path(trl.__file__).parent / "chat_templates").glob("*.jinja")):
        try:
            add_response_schema(SimpleNamespace(chat_template=file.read_text()))
        except ValueError:  # a training template, or one this transformers cannot parse replies of
            continue
        known[file.name] = file.read_text()
    return known


def tool_template_advice(tokenizer) -> str:
    """What to give a tokenizer whose chat template TRL does not read tool calls out of, in words: the revision TRL knows
    of the template this one is another revision of, and where to get it; else the templates TRL knows, none of which
    is the tokenizer's own."""
    import difflib

    template = getattr(text_tokenizer(tokenizer), "chat_template", None) or ""
    known = tool_templates()
    similarity = {name: difflib.SequenceMatcher(None, template, text, autojunk=False).ratio() for name, text in known.items()}
    closest = max(similarity, key=similarity.get, default=None)
    version = stack.installed("trl")
    if closest is not None and similarity[closest] >= 0.8:
        return (f"TRL {version} recognises a chat template by its exact text (trl/chat_template_utils.py, "
                f"add_response_schema), and this one is another revision of the template it knows as {closest}: give the "
                "tokenizer that revision, which ships with TRL: tokenizer.chat_template = "
                f"(pathlib.Path(trl.__file__).parent / 'chat_templates' / '{closest}').read_text()")
    names = ", ".join(name.removesuffix(".jinja") for name in known)
    return (f"TRL {version} reads tool calls out of these chat templates only, by their exact text "
            f"(trl/chat_template_utils.py, add_response_schema): {names}. Give the tokenizer one of them (their files are in "
            "trl/chat_templates), or set its response_schema (transformers' response parsing)")


def prompt_texts(tokenizer, prompts_or_rows: Sequence[Any], chat_template_kwargs: dict[str, Any] | None) -> list[str]:
    """Chat message lists rendered as training renders them (grpo_lite.data.prompts), ready for the assistant's turn;
    strings stay as they are. A dataset row (a mapping with a ``prompt``) is rendered with its own values of the columns
    the chat template reads over ``chat_template_kwargs``, as training renders it; its images (``images_of``) go with
    it to the processor."""
    kwargs = template_kwargs(tokenizer, chat_template_kwargs)
    own = iter(row_settings(tokenizer, [item for item in prompts_or_rows if isinstance(item, Mapping)]))
    texts = []
    for i, item in enumerate(prompts_or_rows):
        if isinstance(item, Mapping) and "prompt" in item:
            texts.append(render_prompt(tokenizer, item["prompt"], {**kwargs, **next(own)}))
        elif isinstance(item, str) or is_chat(item):
            texts.append(render_prompt(tokenizer, item, kwargs))
        else:
            raise DatasetError(
                f"generate: prompt {i} is a {type(item).__name__}{' with no prompt' if isinstance(item, Mapping) else ''}; "
                "pass a string, a list of chat messages like [{'role': 'user', 'content': '...'}], or dataset rows "
                "with a 'prompt'"
            )
    return texts


def has_vllm_engine(model) -> bool:
    """Whether generation can go through vLLM. Unsloth sets ``model.fast_generate`` on every model it loads,
    as a guard around transformers' ``generate`` that refuses vLLM arguments when ``fast_inference=False``;
    only a model loaded with it has ``model.vllm_engine`` (unsloth/models/llama.py, from_pretrained)."""
    return getattr(model, "vllm_engine", None) is not None


@dataclass(frozen=True)
class Completion:
    """One generated completion: its text, its token ids (an end-of-turn token included when it stopped on
    one), and whether it hit the token limit instead."""

    text: str
    token_ids: tuple[int, ...]
    truncated: bool


def vllm_sampling_options(*, max_completion_length, do_sample, num_return_sequences, temperature, top_p, top_k, min_p,
                          repetition_penalty, seed) -> dict[str, Any]:
    """:func:`sample`'s options under vLLM's ``SamplingParams`` names and conventions."""
    return dict(
        max_tokens=max_completion_length,
        temperature=temperature if do_sample else 0.0,  # vLLM is greedy at temperature 0, and has no do_sample
        top_p=top_p,
        top_k=top_k if top_k else -1,  # vLLM's "no top-k" is -1, TRL's and transformers' is 0
        min_p=min_p or 0.0,
        repetition_penalty=repetition_penalty,
        n=num_return_sequences,
        seed=seed,
    )


def _vllm_sample(model, texts, images, *, progress, adapter, **options) -> list[Completion]:
    from vllm import SamplingParams

    params = SamplingParams(**vllm_sampling_options(**options))
    # the base model is vLLM's own weights: no lora_request, as Unsloth's notebooks generate "before" (lora_request=None)
    lora = model.load_lora("grpo_lite_generate", load_tensors=True) if adapter and hasattr(model, "load_lora") else None
    # a prompt with images goes as Unsloth's vision notebooks give it (nb/Qwen2_5_7B_VL_GRPO.ipynb: multi_modal_data),
    # one image alone, several as a list (vllm/multimodal/inputs.py, MultiModalDataDict)
    prompts = [{"prompt": text, "multi_modal_data": {"image": row[0] if len(row) == 1 else row}} if row else text
               for text, row in zip(texts, images)]
    outputs = model.fast_generate(prompts, sampling_params=params, lora_request=lora, use_tqdm=progress is not None)
    return [Completion(choice.text, tuple(choice.token_ids), choice.finish_reason == "length")
            for output in outputs for choice in output.outputs]


def _transformers_sample(model, tokenizer, texts, images, *, progress, max_completion_length, do_sample, num_return_sequences,
                         temperature, top_p, top_k, min_p, repetition_penalty, seed, adapter, batch_size) -> list[Completion]:
    from tqdm.auto import tqdm

    text_only = text_tokenizer(tokenizer)
    padding_side = text_only.padding_side
    text_only.padding_side = "left"
    pad_token_id = text_only.pad_token_id if text_only.pad_token_id is not None else text_only.eos_token_id
    if do_sample:
        sampling = dict(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p)
    else:
        sampling = dict(temperature=None, top_p=None, top_k=None)
    stops = {text_only.eos_token_id, pad_token_id}
    was_training = model.training
    model.eval()
    completions: list[Completion] = []
    bar = tqdm(total=len(texts), desc=progress, unit="prompt", disable=progress is None)
    # PEFT's disable_adapter() runs the base weights alone; Unsloth's LoRA kernels read the same flag
    # (unsloth/kernels/utils.py, get_lora_parameters: "For DPO or disabled adapters")
    without_adapter = model.disable_adapter() if not adapter else contextlib.nullcontext()
    seeded = torch.random.fork_rng(devices=_seeded_devices(model)) if seed is not None else contextlib.nullcontext()
    try:
        with without_adapter, seeded:
            if seed is not None:
                torch.manual_seed(seed)
            _generate_batches(model, tokenizer, texts, images, completions, bar, batch_size=batch_size, pad_token_id=pad_token_id,
                              stops=stops, max_completion_length=max_completion_length, do_sample=do_sample,
                              num_return_sequences=num_return_sequences, repetition_penalty=repetition_penalty, sampling=sampling)
    finally:
        bar.close()
        text_only.padding_side = padding_side
        model.train(was_training)
    return completions


def _seeded_devices(model) -> list:
    device = getattr(model, "device", None)
    return [device.index or 0] if getattr(device, "type", "cpu") == "cuda" else []  # the CPU's generator is always forked


def _generate_batches(model, tokenizer, texts, images, completions, bar, *, batch_size, pad_token_id, stops, max_completion_length,
                      do_sample, num_return_sequences, repetition_penalty, sampling) -> None:
    for start in range(0, len(texts), batch_size):
        batch_images = images[start : start + batch_size]
        # a processor takes each prompt's images beside its text, as TRL gives them
        with_images = dict(images=batch_images) if any(batch_images) else {}
        batch = tokenizer(text=texts[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False,
                          **with_images)
        batch = batch.to(model.device)
        with torch.no_grad():
            output = model.generate(
                **stack.generate_inputs(batch),
                max_new_tokens=max_completion_length,  # transformers' name for it
                do_sample=do_sample,
                num_return_sequences=num_return_sequences,
                pad_token_id=pad_token_id,
                repetition_penalty=repetition_penalty,
                **sampling,
            )
        for row in output[:, batch["input_ids"].shape[1] :].tolist():
            end = next((i for i, token in enumerate(row) if token in stops), None)
            tokens = row if end is None else row[:end]
            completions.append(Completion(text_tokenizer(tokenizer).decode(tokens, skip_special_tokens=True),
                                          tuple(row if end is None else row[: end + 1]), end is None and len(row) >= max_completion_length))
        bar.update(len(batch["input_ids"]))


def sample(
    model,
    tokenizer,
    prompts_or_messages: str | Sequence[Any],
    *,
    max_completion_length: int = 128,
    do_sample: bool = False,
    num_return_sequences: int = 1,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    min_p: float | None = None,
    repetition_penalty: float = 1.0,
    seed: int | None = None,
    adapter: bool = True,
    batch_size: int = 16,
    progress: str | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> list[Completion]:
    """:func:`generate`, with each completion's token ids and whether it hit ``max_completion_length``.

    The sampling options are GRPOConfig's, with its defaults (``top_k=0`` means no top-k). ``progress``: a
    label to show a progress bar over the prompts under.
    """
    if isinstance(prompts_or_messages, str):
        prompts_or_messages = [prompts_or_messages]
    elif hasattr(prompts_or_messages, "column_names"):  # a dataset: its rows
        prompts_or_messages = list(prompts_or_messages)
    if num_return_sequences > 1 and not do_sample:
        raise ConfigError("generate: num_return_sequences > 1 gives identical greedy copies; pass do_sample=True")
    if adapter not in (True, False):
        raise ConfigError(f"generate: adapter={adapter!r}; use True (the LoRA adapter on) or False (the base model alone)")
    vllm = has_vllm_engine(model)
    if not adapter and not vllm and not hasattr(model, "disable_adapter"):
        raise ConfigError(f"generate: adapter=False, but this {type(model).__name__} has no LoRA adapter to turn off (a merged or "
                         "fully trained model has no base model left in it)")
    texts = prompt_texts(tokenizer, prompts_or_messages, chat_template_kwargs)
    images = seen_images([images_of(item) for item in prompts_or_messages], "generate")
    if any(images):
        check_processor_for_images(tokenizer, "generate: the rows have images")
    options = dict(max_completion_length=max_completion_length, do_sample=do_sample, num_return_sequences=num_return_sequences,
                   temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, repetition_penalty=repetition_penalty,
                   seed=seed, adapter=adapter, progress=progress)
    if vllm:
        return _vllm_sample(model, texts, images, **options)
    return _transformers_sample(model, tokenizer, texts, images, batch_size=batch_size, **options)


def generate(
    model,
    tokenizer,
    prompts_or_messages: str | Sequence[Any],
    *,
    max_completion_length: int = 128,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    min_p: float | None = None,
    repetition_penalty: float = 1.0,
    seed: int | None = None,
    adapter: bool = True,
    num_return_sequences: int = 1,
    batch_size: int = 16,
    progress: str | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> list[str]:
    """The completions of each prompt, ``num_return_sequences`` per prompt in prompt order.

    Example::

        generate(model, tokenizer, [[{"role": "user", "content": "What is 2 + 2?"}]], max_completion_length=32)
        # ['<reasoning>2 + 2 = 4</reasoning><answer>4</answer>']

    Greedy by default (``do_sample=False``), so the same model gives the same text: what evaluation wants.
    With ``do_sample=True``, ``temperature``, ``top_p``, ``top_k`` (0: none), ``min_p`` and ``repetition_penalty``
    shape the sampling (on a vLLM engine, as its ``SamplingParams``), and ``seed`` makes it repeatable without
    touching the global random state. ``adapter=False`` generates with the LoRA adapter turned off, the base
    model alone (PEFT's ``disable_adapter()``; on vLLM, no ``lora_request``): the same prompt before and after
    training::

        before = generate(model, tokenizer, prompts, adapter=False)
        after = generate(model, tokenizer, prompts)

    ``progress``: a label to show a progress bar over the prompts under. Chat prompts are rendered as training renders
    them (grpo_lite.data.prompts): a system turn the template cannot render is folded into the first user turn, and
    ``chat_template_kwargs`` (Qwen3's ``{"enable_thinking": False}``) go to the chat template; ``None``: those the last
    ``train()`` with this tokenizer used, so the model is asked what it trained on. Dataset rows (a dataset, or mappings
    with a ``prompt``) are rendered each with its own values of the columns the chat template reads over those, as
    training renders them (gpt-oss's ``reasoning_effort`` per row)::

        generate(model, tokenizer, dataset.select(range(4)))
    """
    completions = sample(model, tokenizer, prompts_or_messages, max_completion_length=max_completion_length, do_sample=do_sample,
                         temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, repetition_penalty=repetition_penalty,
                         seed=seed, adapter=adapter, num_return_sequences=num_return_sequences,
                         batch_size=batch_size, progress=progress, chat_template_kwargs=chat_template_kwargs)
    return [completion.text for completion in completions]
