"""Chat messages -> the prompt the model is asked: the one renderer every path goes through.

TRL's GRPOTrainer renders a dataset's chat prompts itself: the tokenizer's chat template, ``add_generation_prompt=True``
and GRPOConfig's ``chat_template_kwargs`` (trl/trainer/grpo_trainer.py, ``_tokenize_prompts``). :func:`render_prompt`
renders the same way, and every other path that asks the model something renders through it: prepare_dataset's
length report and filter, train()'s length checks, generate, evaluate, preview, held-out evaluation; the format
warm-up gives TRL's SFTTrainer the same messages and keyword arguments. :func:`fit_dataset` hands TRL the messages
rendered here, so a model is asked in every path the prompt it trained on, with the run's ``chat_template_kwargs``
(Qwen3's ``enable_thinking=False``) in each.

A system prompt is kept, folded or refused, never dropped. A prompt with a system turn is rendered and its system text
looked for. Where the template rejects a system turn (Gemma 2: "System role not supported"; Mistral v0.1:
"Conversation roles must alternate") or renders none (Phi-3-mini's first template), the system text is folded into
the first user turn, as Gemma 3's own template does, and that is said once per tokenizer; with
``fold_system_prompt=False`` the prompt is refused with a :class:`DatasetError` naming the template's rule and the fix.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import UserError
from ..log import logger

FOLD_SEPARATOR = "\n\n"  # between the system text and the first user turn, as Gemma 3's template joins them

_RUN_KWARGS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> chat_template_kwargs of its last run
_RULES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> {conversation shape: what its template does}
_SAID: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> the template rules already said


class DatasetError(UserError, ValueError):
    """The data cannot become GRPO prompts; the message names the row and column and how to fix it."""


def is_chat(prompt: Any) -> bool:
    """Whether ``prompt`` is a list of chat messages (``role`` and ``content`` each), not text."""
    return isinstance(prompt, (list, tuple)) and all(isinstance(m, Mapping) and "role" in m for m in prompt)


def remember_template_kwargs(tokenizer, chat_template_kwargs: Mapping[str, Any] | None) -> None:
    """What ``train()`` rendered its prompts with, for generate, evaluate and preview with this tokenizer to render
    the same unless given their own."""
    try:
        _RUN_KWARGS[tokenizer] = dict(chat_template_kwargs or {})
    except TypeError:  # not weak-referenceable: nothing to remember it on
        pass


def template_kwargs(tokenizer, chat_template_kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The chat template's keyword arguments to render with: those given, else those the last ``train()`` with this
    tokenizer used, else none."""
    if chat_template_kwargs is not None:
        return dict(chat_template_kwargs)
    try:
        return dict(_RUN_KWARGS.get(tokenizer) or {})
    except TypeError:
        return {}


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "".join(part.get("text") or "" for part in content if isinstance(part, Mapping) and part.get("type") == "text")
    return "" if content is None else str(content)


def _leading_system(messages: Sequence[Mapping[str, Any]]) -> int:
    count = 0
    while count < len(messages) and messages[count].get("role") == "system":
        count += 1
    return count


def fold_system(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The leading system turn's text put before the first user turn's, a blank line between, as Gemma 3's template does.

    >>> fold_system([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}])
    [{'role': 'user', 'content': 'Be brief.\\n\\n2+2?'}]
    """
    count = _leading_system(messages)
    rest = [dict(m) for m in messages[count:]]
    if not rest or rest[0].get("role") != "user":
        raise DatasetError("a prompt's system turn is followed by no user turn, so it cannot be folded into one: start each "
                           "prompt with a system and a user message")
    system = FOLD_SEPARATOR.join(_text(m.get("content")) for m in messages[:count])
    content = rest[0].get("content")
    if isinstance(content, (list, tuple)):
        rest[0]["content"] = [{"type": "text", "text": system + FOLD_SEPARATOR}, *content]
    else:
        rest[0]["content"] = system + FOLD_SEPARATOR + _text(content)
    return rest


def _name(tokenizer) -> str:
    return getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__


def _render(tokenizer, messages: Sequence[Mapping[str, Any]], kwargs: dict[str, Any]) -> str:
    """The chat template's text for ``messages``, ready for the assistant's turn, as TRL renders it."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise DatasetError(f"the tokenizer of {_name(tokenizer)} has no chat template, so chat prompts cannot be rendered: "
                           "load the model with load_model(..., chat_template=...) or give prompts as text")
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True, **kwargs)


def _system_rule(tokenizer, messages: Sequence[Mapping[str, Any]], kwargs: dict[str, Any]) -> tuple[str | None, bool]:
    """What ``tokenizer``'s template does to the system turn of ``messages``, found by rendering the prompt and looking
    for the system text: the rule in words (None: the text survives), and whether the text survives folded into the
    first user turn. Found once per conversation shape."""
    from jinja2 import TemplateError

    system = [_text(m.get("content")).strip() for m in messages[:_leading_system(messages)]]
    key = (str(tokenizer.chat_template), json.dumps(kwargs, sort_keys=True, default=str), tuple(system),
           tuple(m.get("role") for m in messages))
    rules = _RULES.setdefault(tokenizer, {})
    if key not in rules:
        try:
            rendered = _render(tokenizer, messages, kwargs)
            rule = None if all(text in rendered for text in system) else "renders no system turn (the system text is " \
                                                                         "missing from the prompt)"
        except TemplateError as error:
            rule = f"rejects a system turn ({str(error)!r})"
        survives = True
        if rule is not None:
            try:
                folded = _render(tokenizer, fold_system(messages), kwargs)
                survives = all(text in folded for text in system)
            except TemplateError:  # the folded prompt's own fault, which rendering it reports
                pass
        rules[key] = (rule, survives)
    return rules[key]


def chat_messages(tokenizer, messages: Sequence[Mapping[str, Any]], chat_template_kwargs: Mapping[str, Any] | None = None, *,
                  fold_system_prompt: bool = True) -> list[dict[str, Any]]:
    """``messages`` as ``tokenizer``'s chat template takes them with the system text kept: as they are where the
    template renders their system turn, else with it folded into the first user turn (said once), or refused with
    ``fold_system_prompt=False``."""
    messages = [dict(m) for m in messages]
    if not any(_text(m.get("content")).strip() for m in messages[:_leading_system(messages)]):
        return messages
    rule, survives = _system_rule(tokenizer, messages, template_kwargs(tokenizer, chat_template_kwargs))
    if rule is None:
        return messages
    if not fold_system_prompt:
        raise DatasetError(f"the chat template of {_name(tokenizer)} {rule}, and fold_system_prompt=False: pass "
                           "fold_system_prompt=True to fold the system prompt into the first user turn (as Gemma 3's template "
                           "does), or system_prompt=None with the instructions in the question")
    if not survives:
        raise DatasetError(f"the chat template of {_name(tokenizer)} {rule}, and drops the system text folded into the first "
                           "user turn too: give the model a chat template that renders it (load_model(..., chat_template=...))")
    said = _SAID.setdefault(tokenizer, set())
    if rule not in said:
        said.add(rule)
        logger.info(f"the chat template of {_name(tokenizer)} {rule}: the system prompt is folded into the first user "
                    "turn, as Gemma 3's template does (fold_system_prompt=False refuses instead)")
    return fold_system(messages)


def render_prompt(tokenizer, prompt: str | Sequence[Mapping[str, Any]], chat_template_kwargs: Mapping[str, Any] | None = None,
                  *, fold_system_prompt: bool = True) -> str:
    """The text the model is asked for ``prompt``: chat messages through the chat template, ready for the assistant's
    turn (:func:`chat_messages` keeps their system text), with ``chat_template_kwargs`` (:func:`template_kwargs`);
    text as it is."""
    from jinja2 import TemplateError

    if isinstance(prompt, str):
        return prompt
    kwargs = template_kwargs(tokenizer, chat_template_kwargs)
    messages = chat_messages(tokenizer, prompt, kwargs, fold_system_prompt=fold_system_prompt)
    try:
        return _render(tokenizer, messages, kwargs)
    except TemplateError as error:
        raise DatasetError(f"the chat template of {_name(tokenizer)} refuses a prompt ({error}): "
                           f"{[m.get('role') for m in messages]} turns; give each prompt the turns the template takes") from None


def prompt_token_ids(tokenizer, prompt: str | Sequence[Mapping[str, Any]], chat_template_kwargs: Mapping[str, Any] | None = None,
                     *, fold_system_prompt: bool = True) -> list[int]:
    """The token ids of :func:`render_prompt`'s text, as TRL tokenizes a rendered chat (no special tokens added: the
    template writes its own)."""
    text = render_prompt(tokenizer, prompt, chat_template_kwargs, fold_system_prompt=fold_system_prompt)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def fit_dataset(dataset, tokenizer, chat_template_kwargs: Mapping[str, Any] | None = None, *, fold_system_prompt: bool = True):
    """``dataset`` with each chat prompt as :func:`chat_messages` gives it, for a trainer that renders the ``prompt``
    column itself (TRL's): a system turn the template cannot render is folded (said) or refused, never dropped."""
    if "prompt" not in dataset.column_names:
        return dataset
    prompts = list(dataset["prompt"])
    fitted = [chat_messages(tokenizer, p, chat_template_kwargs, fold_system_prompt=fold_system_prompt) if is_chat(p) else p
              for p in prompts]
    if fitted == prompts:
        return dataset
    return dataset.map(lambda row, index: {"prompt": fitted[index]}, with_indices=True)
