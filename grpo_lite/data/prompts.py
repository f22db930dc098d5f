"""Chat messages -> the prompt the model is asked: the one renderer every path goes through.

TRL's GRPOTrainer renders a dataset's chat prompts itself: the tokenizer's chat template, ``add_generation_prompt=True``
and GRPOConfig's ``chat_template_kwargs`` (trl/trainer/grpo_trainer.py, ``_tokenize_prompts``). :func:`render_prompt`
renders the same way, and every other path that asks the model something renders through it: prepare_dataset's
length report and filter, train()'s length checks, generate, evaluate, preview, held-out evaluation; the format
warm-up gives TRL's SFTTrainer the same messages and keyword arguments. :func:`fit_dataset` hands TRL the messages
rendered here, so a model is asked in every path the prompt it trained on, with the run's ``chat_template_kwargs``
(Qwen3's ``enable_thinking=False``) in each.

Content given as a list of parts (``[{"type": "text", "text": ...}]``, the OpenAI / transformers multimodal shape) is
rendered as the text of its parts (:func:`text_messages`): of the real templates in tests/data/chat_templates only Gemma
3's takes parts; Llama 3.2's and Gemma 2's render Python's repr of the list into the prompt, the others fail on it. A
prompt with images is the same prompt with ``{"type": "image"}`` parts where its images go (the images themselves in
the row's image column, grpo_lite.data.images): its content stays parts, as vision chat templates take them, and a
vision model's processor renders and counts it (:func:`prompt_token_ids`). A text prompt is a prompt with no image.

A prompt that ends in an assistant message (a prefill: the start of the answer) is continued, not closed: rendered with
``continue_final_message``, as TRL 0.22-0.24 render it (trl/data_utils.py, ``maybe_apply_chat_template``). TRL 0.25 and
later render every training prompt with a new assistant turn after it instead (trl/trainer/grpo_trainer.py,
``add_generation_prompt=True``), so a run cannot train on a prefill alike on both ends of the supported range:
:func:`grpo_lite.data.prepare.check_prompts` refuses such rows before training.

A system prompt is kept, folded or refused, never dropped. What the template does with a system turn is asked of the
template, not read from the text: the prompt is rendered with a marker in place of each system text. Where the marker
shows, the turn is kept as the template renders it, changed or not (SmolLM3's takes ``/no_think`` out and turns
thinking off; others trim it or put a heading before it). Where the template rejects a system turn (Gemma 2: "System
role not supported"; Mistral v0.1: "Conversation roles must alternate") or renders none (Phi-3-mini's first
template), the system text is folded into the first user turn, as Gemma 3's own template does, and that is said once
per tokenizer; with ``fold_system_prompt=False`` the prompt is refused with a :class:`DatasetError` naming the
template's rule and the fix. A template that writes a system text of its own into a prompt without one (SmolLM2's
and SmolLM3's default instructions, Qwen2.5's "You are Qwen"), where a system prompt given would take its place, is
said once per tokenizer, with that text.

A dataset column the chat template reads (gpt-oss's ``reasoning_effort``: "low" in one row, "high" in the next) is that
row's setting: :func:`row_template_kwargs` gives each row the run's ``chat_template_kwargs`` with the row's values over
them, and every path renders the row with its own (training through grpo_lite/training/trl_compat.py, the length checks,
generate, evaluate, preview, samples.jsonl), as Unsloth's trainer renders each row with its columns.
"""

from __future__ import annotations

import functools
import json
import os
import re
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import UserError
from ..log import logger

SYSTEM_MARKER = "\u27e6grpo-lite system prompt {}\u27e7"  # in place of a system text, to see what a template does with it
_GENERATION_TAG = re.compile(r"\{%-?\s*(end)?generation\s*-?%\}")  # transformers' assistant-mask tags
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


# Never a row's setting: the columns TRL gives meaning to (the names Unsloth's trainer skips too,
# unsloth/models/rl_replacements.py, "per-sample chat_template_kwargs") and what apply_chat_template gives the template
# itself: its arguments, the special tokens and its functions (transformers/utils/chat_template_utils.py).
NOT_SETTINGS = frozenset({"prompt", "chosen", "rejected", "completion", "messages", "label", "images", "image", "videos",
                          "video", "audios", "audio", "tools", "documents", "add_generation_prompt", "continue_final_message",
                          "bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token",
                          "raise_exception", "strftime_now"})


def template_variables(tokenizer) -> frozenset[str]:
    """The variables ``tokenizer``'s chat template reads without setting them, asked of the template itself (jinja2's
    ``meta.find_undeclared_variables``), parsed as transformers compiles it: with loop controls, and the
    ``{% generation %}`` tags that mark the assistant's text (transformers/utils/chat_template_utils.py,
    ``AssistantTracker``) read nothing. A template jinja2 cannot parse so is asked as Unsloth's trainer asks it: every
    identifier in its text."""
    template = getattr(tokenizer, "chat_template", None)
    texts = list(template.values()) if isinstance(template, Mapping) else [template] if isinstance(template, str) else []
    return frozenset(name for text in texts for name in _variables(text))


@functools.lru_cache(maxsize=32)
def _variables(text: str) -> frozenset[str]:
    from jinja2 import TemplateSyntaxError, meta
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    try:
        return frozenset(meta.find_undeclared_variables(environment.parse(_GENERATION_TAG.sub("", text))))
    except TemplateSyntaxError:
        return frozenset(re.findall(r"[A-Za-z_]\w*", text))


def template_columns(tokenizer, column_names: Sequence[str]) -> list[str]:
    """The columns of a dataset that ``tokenizer``'s chat template reads: each row's value goes to the template with that
    row. Unsloth's trainer passes the string columns whose name appears anywhere in the template's text; those of them
    the template does not read render nothing, so both render a row alike, but for a string column named as one of
    :data:`NOT_SETTINGS` beyond the ones Unsloth skips (``tools``, ``bos_token``), which Unsloth's trainer on TRL 0.22
    would hand the template and grpo-lite never does."""
    variables = template_variables(tokenizer)
    return [name for name in column_names if name in variables and name not in NOT_SETTINGS]


def row_settings(tokenizer, rows) -> list[dict[str, Any]]:
    """Each row's values of the columns the chat template reads (a row's missing value, None, is no setting): ``rows`` a
    dataset or a list of row mappings."""
    names = list(rows.column_names) if hasattr(rows, "column_names") else list(dict.fromkeys(k for row in rows for k in row))
    columns = template_columns(tokenizer, names)
    if not columns:
        return [{} for _ in range(len(rows))]
    values = {c: list(rows[c]) for c in columns} if hasattr(rows, "column_names") else {c: [r.get(c) for r in rows] for c in columns}
    return [{c: values[c][i] for c in columns if values[c][i] is not None} for i in range(len(rows))]


def row_template_kwargs(tokenizer, rows, chat_template_kwargs: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The chat template's keyword arguments for each row: :func:`template_kwargs`, with the row's own values of the
    columns the template reads over them (:func:`row_settings`)."""
    run = template_kwargs(tokenizer, chat_template_kwargs)
    return [{**run, **own} for own in row_settings(tokenizer, rows)]


def describe_row_settings(tokenizer, rows, chat_template_kwargs: Mapping[str, Any] | None = None) -> str | None:
    """One line naming the columns the chat template reads per row and how many rows hold each value (None: no such
    column), and which of the run's ``chat_template_kwargs`` they override.

    Counted over a dataset whose ``reasoning_effort`` is "low" in 1000 rows: ``reasoning_effort (low: 1000 rows)``."""
    settings = row_settings(tokenizer, rows)
    columns = list(dict.fromkeys(c for own in settings for c in own))
    if not columns:
        return None
    parts = []
    for column in columns:
        counts: dict[str, int] = {}
        for own in settings:
            if column in own:
                value = own[column] if isinstance(own[column], str) else repr(own[column])
                counts[value] = counts.get(value, 0) + 1
        parts.append(f"{column} ({', '.join(f'{value}: {n} row' + 's' * (n > 1) for value, n in counts.items())})")
    line = f"the chat template reads the dataset's {', '.join(parts)}: each row is rendered with its own value"
    overridden = [c for c in columns if c in (chat_template_kwargs or {})]
    if overridden:
        line += (f", over chat_template_kwargs' {', '.join(f'{c}={chat_template_kwargs[c]!r}' for c in overridden)} "
                 "(which holds for the rows without one)")
    return line


def _is_image(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "image"


def image_count(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many image placeholders (``{"type": "image"}`` parts) a chat prompt holds: the images its row must give."""
    return sum(_is_image(part) for m in messages if isinstance(m.get("content"), (list, tuple)) for part in m["content"])


def _part(part: Any, index: int, role: Any) -> dict[str, Any]:
    """A content part as the chat templates take it: text, or an image placeholder (the image itself comes from the row's
    image column, as TRL fills it in); Arrow's None for a key another part has is not part of it."""
    if isinstance(part, Mapping):
        given = {key: value for key, value in part.items() if value is not None}
        if given.get("type") == "text" and isinstance(given.get("text"), str) and set(given) == {"type", "text"}:
            return {"type": "text", "text": given["text"]}
        if given == {"type": "image"}:
            return {"type": "image"}
        if given.get("type") == "image":
            raise DatasetError(f"message {index} ({role}) holds an image part with the image in it ({sorted(given)}): "
                               "give the image in the dataset's image column and {'type': 'image'} where it goes in the "
                               "prompt (prepare_dataset(..., image_column=...) puts it there)")
    kind = f"a {part.get('type')!r} part" if isinstance(part, Mapping) and part.get("type") else f"{part!r:.60}"
    raise DatasetError(f"message {index} ({role}) holds {kind} in its content: give the content as text, or as parts "
                       "{'type': 'text', 'text': ...} and {'type': 'image'} (the image in the row's image column)")


def text_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` in the one shape every path renders. A prompt without images has each content as text: a list of
    text parts becomes the text of its parts, joined as written (Gemma 3's template, which takes parts, renders the same
    text). A prompt with images (``{"type": "image"}`` parts) has each content as a list of parts, text as
    ``{"type": "text", "text": ...}``: the shape vision chat templates and TRL's ``prepare_multimodal_messages`` read, and
    one Arrow stores. A part of another kind is a :class:`DatasetError` naming the message.

    >>> text_messages([{"role": "user", "content": [{"type": "text", "text": "What is "}, {"type": "text", "text": "2+2?"}]}])
    [{'role': 'user', 'content': 'What is 2+2?'}]
    >>> text_messages([{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "image"}]}])[0]
    {'role': 'system', 'content': [{'type': 'text', 'text': 'Be brief.'}]}
    """
    parts = []
    for index, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, (list, tuple)):
            content = [_part(part, index, message.get("role")) for part in content]
        parts.append(content)
    with_images = any(isinstance(c, list) and any(_is_image(p) for p in c) for c in parts)
    plain = []
    for message, content in zip(messages, parts):
        message = dict(message)
        if with_images and isinstance(content, str):
            message["content"] = [{"type": "text", "text": content}]
        elif not with_images and isinstance(content, list):
            message["content"] = "".join(part["text"] for part in content)
        elif isinstance(content, list):
            message["content"] = content
        plain.append(message)
    return plain


def content_text(content: Any) -> str:
    """A message's text: its text parts joined where it is given as parts."""
    if isinstance(content, (list, tuple)):
        return "".join(part["text"] for part in content if isinstance(part, Mapping) and part.get("type") == "text")
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
    messages = text_messages(messages)
    count = _leading_system(messages)
    rest = messages[count:]
    if not rest or rest[0].get("role") != "user":
        raise DatasetError("a prompt's system turn is followed by no user turn, so it cannot be folded into one: start each "
                           "prompt with a system and a user message")
    system = FOLD_SEPARATOR.join(content_text(m.get("content")) for m in messages[:count]) + FOLD_SEPARATOR
    content = rest[0].get("content")
    if isinstance(content, list):  # a prompt with images: the system text goes before the user's parts, images included
        rest[0]["content"] = [{"type": "text", "text": system}, *content]
    else:
        rest[0]["content"] = system + content_text(content)
    return rest


def _name(tokenizer) -> str:
    return getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__


def ends_in_prefill(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a chat prompt ends in an assistant message: the start of the answer, for the model to continue."""
    return bool(messages) and messages[-1].get("role") == "assistant"


def _render(tokenizer, messages: Sequence[Mapping[str, Any]], kwargs: dict[str, Any]) -> str:
    """The chat template's text for ``messages``, ready for the assistant's turn, as TRL renders it: after a new
    assistant turn's header, or inside the assistant turn the prompt ends in (a prefill, continued)."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise DatasetError(f"the tokenizer of {_name(tokenizer)} has no chat template, so chat prompts cannot be rendered: "
                           "load the model with load_model(..., chat_template=...) or give prompts as text")
    prefill = ends_in_prefill(messages)
    try:
        return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=not prefill,
                                             continue_final_message=prefill, **kwargs)
    except ValueError:  # transformers continues a prefill only where the template renders it as written
        if not prefill:
            raise
        raise DatasetError(f"the chat template of {_name(tokenizer)} does not render the prompt's last (assistant) message "
                           "as written, so it cannot be continued (Qwen3's moves a closed <think> block out of it): end the "
                           "prefill before such a block, or drop it") from None


def _markers(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each leading system turn's text replaced by a marker of its own: text a template has no
    directive in, case or padding to change, so whether it shows in the render says what the template does with the
    turn, whatever the user's text holds."""
    count = _leading_system(messages)

    def marker(message: Mapping[str, Any], i: int) -> Any:
        text = SYSTEM_MARKER.format(i)
        return [{"type": "text", "text": text}] if isinstance(message.get("content"), list) else text

    return [{**m, "content": marker(m, i)} for i, m in enumerate(messages[:count])] + list(messages[count:])


def _system_rule(tokenizer, messages: Sequence[Mapping[str, Any]], kwargs: dict[str, Any]) -> tuple[str | None, bool]:
    """What ``tokenizer``'s template does to the system turn of ``messages``, asked of the template: the prompt is
    rendered with a marker as each system text (:func:`_markers`), so a template that reads a directive out of the
    text (SmolLM3's ``/no_think``), trims it or prefixes it still keeps it, and one that rejects the turn or renders
    none of it does not. Returns the rule in words (None: the template renders the system turn), and whether the text
    survives folded into the first user turn. Found once per conversation shape."""
    from jinja2 import TemplateError

    key = (str(tokenizer.chat_template), json.dumps(kwargs, sort_keys=True, default=str), tuple(m.get("role") for m in messages))
    rules = _RULES.setdefault(tokenizer, {})
    if key not in rules:
        marked = _markers(messages)
        markers = [content_text(m["content"]) for m in marked[:_leading_system(marked)]]
        try:
            rendered = _render(tokenizer, marked, kwargs)
            rule = None if all(marker in rendered for marker in markers) else "renders no system turn (the system text is " \
                                                                             "missing from the prompt)"
        except TemplateError as error:
            rule = f"rejects a system turn ({str(error)!r})"
        survives = True
        if rule is not None:
            try:
                folded = _render(tokenizer, fold_system(marked), kwargs)
                survives = all(marker in folded for marker in markers)
            except TemplateError:  # the folded prompt's own fault, which rendering it reports
                pass
        rules[key] = (rule, survives)
    return rules[key]


def _own_system_text(tokenizer, messages: Sequence[Mapping[str, Any]], kwargs: dict[str, Any]) -> str | None:
    """The system text ``tokenizer``'s template writes into a prompt that has no system turn, where a system prompt
    given takes its place (Qwen2.5's "You are Qwen, ...", SmolLM3's default instructions): what the render of the
    prompt holds where the render with a system turn (:func:`_markers`) holds the marker. None where it writes none, or
    the template takes no system turn. Found once per conversation shape."""
    from jinja2 import TemplateError

    key = ("own", str(tokenizer.chat_template), json.dumps(kwargs, sort_keys=True, default=str),
           tuple(m.get("role") for m in messages))
    rules = _RULES.setdefault(tokenizer, {})
    if key not in rules:
        marker = SYSTEM_MARKER.format(0)
        try:
            bare = _render(tokenizer, messages, kwargs)
            given = _render(tokenizer, _markers([{"role": "system", "content": ""}, *messages]), kwargs)
        except (TemplateError, DatasetError):  # rendering the prompt itself reports it
            given = ""
        own = None
        if marker in given:
            before, after = given.split(marker, 1)
            head = len(os.path.commonprefix([before, bare]))
            tail = len(os.path.commonprefix([after[::-1], bare[head:][::-1]]))
            text = bare[head:len(bare) - tail].strip()
            words = text
            for token in getattr(tokenizer, "all_special_tokens", ()):
                words = words.replace(token, "")
            own = text if words.strip() else None  # a turn's own tokens are no system text
        rules[key] = own
    return rules[key]


def _say_own_system_text(tokenizer, messages: Sequence[Mapping[str, Any]], kwargs: dict[str, Any]) -> None:
    own = _own_system_text(tokenizer, messages, kwargs)
    said = _SAID.setdefault(tokenizer, set())
    if own is not None and own not in said:
        said.add(own)
        shown = f"{own[:200]!r}{'...' if len(own) > 200 else ''}"
        logger.info(f"the chat template of {_name(tokenizer)} writes a system turn of its own into prompts that have none: "
                    f"{shown}; give your own system prompt (prepare_dataset(..., system_prompt=...) or a system turn in "
                    "the data) to ask the model with yours instead")


def chat_messages(tokenizer, messages: Sequence[Mapping[str, Any]], chat_template_kwargs: Mapping[str, Any] | None = None, *,
                  fold_system_prompt: bool = True) -> list[dict[str, Any]]:
    """``messages`` as ``tokenizer``'s chat template takes them, content as text (:func:`text_messages`) and the system
    text kept: as they are where the template renders their system turn, else with it folded into the first user turn
    (said once), or refused with ``fold_system_prompt=False``. Without a system turn, a system text the template writes
    of its own is said once."""
    messages = text_messages(messages)
    kwargs = template_kwargs(tokenizer, chat_template_kwargs)
    if not _leading_system(messages):
        _say_own_system_text(tokenizer, messages, kwargs)
        return messages
    if not any(content_text(m.get("content")).strip() for m in messages[:_leading_system(messages)]):
        return messages
    rule, survives = _system_rule(tokenizer, messages, kwargs)
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


def is_processor(tokenizer) -> bool:
    """Whether ``tokenizer`` is a vision model's processor (it has an ``image_processor``), not a text tokenizer."""
    return getattr(tokenizer, "image_processor", None) is not None


def check_processor_for_images(tokenizer, which_images: str) -> None:
    """Refuse images beside a text tokenizer: only a vision model's processor renders each image's placeholder and
    counts the tokens it becomes. ``which_images`` names them for the message ("the rows have images (column 'image')")."""
    if not is_processor(tokenizer):
        raise DatasetError(f"{which_images}, and {type(tokenizer).__name__} is a text tokenizer: pass the vision model's "
                           "processor (transformers.AutoProcessor), as load_model returns it with the model, to render each "
                           "image's placeholder and count the tokens it becomes")


def prompt_token_ids(tokenizer, prompt: str | Sequence[Mapping[str, Any]], chat_template_kwargs: Mapping[str, Any] | None = None,
                     *, fold_system_prompt: bool = True, images: Sequence[Any] = ()) -> list[int]:
    """The token ids of :func:`render_prompt`'s text, as TRL tokenizes a rendered chat (no special tokens added: the
    template writes its own). ``tokenizer`` may be a vision model's processor (it has an ``image_processor``): the text
    and the row's ``images`` then go through it together, as TRL gives them, so each image counts the tokens the
    processor makes of it (Qwen2-VL's one ``<|image_pad|>`` becomes one per patch group of that image)."""
    text = render_prompt(tokenizer, prompt, chat_template_kwargs, fold_system_prompt=fold_system_prompt)
    if images:
        check_processor_for_images(tokenizer, f"the prompt has {len(images)} image(s)")
    if not is_processor(tokenizer):
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    ids = tokenizer(text=[text], images=list(images) or None, add_special_tokens=False)["input_ids"][0]
    return [int(i) for i in ids]


def fit_dataset(dataset, tokenizer, chat_template_kwargs: Mapping[str, Any] | None = None, *, fold_system_prompt: bool = True):
    """``dataset`` with each chat prompt as :func:`chat_messages` gives it, for a trainer that renders the ``prompt``
    column itself (TRL's): a system turn the template cannot render is folded (said) or refused, never dropped. Each row is
    judged as it is rendered, with its own settings (:func:`row_template_kwargs`)."""
    if "prompt" not in dataset.column_names:
        return dataset
    prompts = list(dataset["prompt"])
    fitted = [chat_messages(tokenizer, p, kwargs, fold_system_prompt=fold_system_prompt) if is_chat(p) else p
              for p, kwargs in zip(prompts, row_template_kwargs(tokenizer, dataset, chat_template_kwargs))]
    if fitted == prompts:
        return dataset
    return dataset.map(lambda row, index: {"prompt": fitted[index]}, with_indices=True)
