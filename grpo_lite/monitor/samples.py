"""samples.jsonl: what the model wrote, with each reward's score and the advantage it got.

One line per completion of each logged step, from GRPOTrainer's own record of the batch: ``step``, ``prompt`` (as the
trainer got it: chat messages or a string), ``completion`` (its text), ``episode`` and ``ended`` (:func:`episode`: the
rollout turn by turn, one model turn for a plain reply; a rollout function's by :func:`rollout_episode`), ``rewards``
(name -> score, null where a reward did not apply), ``total`` and ``advantage``; in a run whose dataset has columns the
chat template reads (gpt-oss's ``reasoning_effort``), ``template_columns``: the row's values the prompt was rendered
with; in a run with images, ``images``: the prompt's images as thumbnails in the run folder
(``sample_images/<hash>.png``, one file per distinct image), referred to, not embedded. The file is bounded: past
``max_rows`` it keeps the newest half.

In a run with tools (TRL logs ``tools/call_frequency`` then) or a rollout function, each logged step's record also gets
what its batch's episodes did (:func:`episode_metrics`): ``episodes/model_turns`` (the model's turns per episode),
``episodes/turn_limit`` and ``episodes/tool_error`` (the share that ended so); :class:`SampleLog` adds them to the
step's logs, so it comes before MetricsLog.

A row is a copy of the batch as scored, taken when the step is logged: the rewards scored copies of their own
(grpo_lite.guards.user_code), and nothing that reads or edits a row afterwards (a callback, the dashboard) reaches the
trainer's record or another row.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import itertools
import json
import math
import sys
import weakref
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewards.calling import private_copy
from rewards.combine import weighted_total

from ..machine import stack
from ..run.callbacks import RunCallback
from ..run.files import SAMPLE_IMAGES, SAMPLES_FILE, append_jsonl, in_run, read_jsonl, write_jsonl

THUMBNAIL_PX = 160  # the longest side of a sample's thumbnail: enough to tell images apart, small beside the run


def _text(value: Any) -> str:
    """Completion text from TRL's log (strings or chat message lists)."""
    if isinstance(value, list):
        messages = [m for m in value if isinstance(m, dict)]
        if len(messages) == 1:
            return str(messages[0].get("content", ""))
        return "\n".join(f"{m.get('role', '')}: {m.get('content', '')}" for m in messages)
    return str(value)


def episode(completion: Any) -> tuple[list[dict[str, Any]], str]:
    """A completion as TRL logs it (text, chat messages, or with tools the rollout's messages: the model's replies, their
    ``tool_calls``, each call's ``tool`` result, trl/trainer/grpo_trainer.py ``_tool_call_loop``) as turns, and where
    it ended: ``"done"`` (the model's last turn calls no tool), ``"tool error"`` (the last tool result is an error, which
    TRL writes as ``{'error': ...}``) or ``"turn limit"`` (its last calls were left unanswered: max_tool_calling_iterations
    or the completion's length reached). A model turn is ``{"turn": "model", "text", "calls": [{"tool", "arguments"}]}``,
    a result ``{"turn": "tool", "tool", "result"}``, its result the tool message's content as the model was shown it
    (:func:`tool_result`).

    >>> episode("4")
    ([{'turn': 'model', 'text': '4', 'calls': []}], 'done')
    >>> call = {"type": "function", "function": {"name": "guess", "arguments": {"number": 5}}}
    >>> turns, ended = episode([{"role": "assistant", "content": "", "tool_calls": [call]},
    ...                         {"role": "tool", "name": "guess", "content": "higher"}, {"role": "assistant", "content": "7"}])
    >>> [turn["turn"] for turn in turns], turns[0]["calls"], ended
    (['model', 'tool', 'model'], [{'tool': 'guess', 'arguments': {'number': 5}}], 'done')
    >>> episode([{"role": "assistant", "content": "", "tool_calls": [call]},
    ...          {"role": "tool", "name": "guess", "content": "{'error': 'Tool guess not found.'}"}])[1]
    'tool error'
    >>> episode([{"role": "assistant", "content": "", "tool_calls": [call]}])[1]
    'turn limit'
    """
    messages = completion if isinstance(completion, list) else [{"role": "assistant", "content": completion}]
    turns: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool":
            turns.append({"turn": "tool", "tool": str(message.get("name", "")), "result": tool_result(message.get("content"))})
        else:
            turns.append(_model_turn(message))
    results = [turn for turn in turns if turn["turn"] == "tool"]
    if results and is_tool_error(results[-1]["result"]):
        return turns, "tool error"
    return turns, _ended(turns)


def reply_parser(tokenizer):
    """What TRL reads a reply's tool calls with (grpo_lite.model.inference.tool_call_parser); None for a chat template
    TRL cannot read tool calls out of, whose replies are read as text."""
    from ..model.inference import tool_call_parser

    try:
        return tool_call_parser(tokenizer)
    except ValueError:
        return None


def rollout_episode(tokenizer, parser, prompt_ids: Sequence[int], completion_ids: Sequence[int],
                    env_mask: Sequence[int]) -> tuple[list[dict[str, Any]], str]:
    """A rollout function's completion as turns: each run of tokens the model wrote (``env_mask`` 1) a model turn, read
    as TRL reads a reply, after all that came before it (its tool calls too, trl/chat_template_utils.py
    ``parse_response``, with ``parser``: :func:`reply_parser`'s, made once per trainer), and each run its environment
    added (0) an ``{"turn": "environment", "text"}`` turn; it ended ``"turn limit"`` where the model had not answered
    the environment's last turn or its last call, else ``"done"``."""
    from trl.chat_template_utils import parse_response

    turns, before = [], list(prompt_ids)
    for wrote, run in itertools.groupby(zip(completion_ids, env_mask), key=lambda token: bool(token[1])):
        ids = [token for token, _ in run]
        if not wrote:
            turns.append({"turn": "environment", "text": tokenizer.decode(ids, skip_special_tokens=True).strip()})
        elif parser is not None:
            turns.append(_model_turn(parse_response(parser, ids, prefix=before)))
        else:
            turns.append(_model_turn({"content": tokenizer.decode(ids, skip_special_tokens=True)}))
        before += ids
    return turns, _ended(turns)


def _model_turn(message: dict[str, Any]) -> dict[str, Any]:
    calls = [call.get("function", call) for call in message.get("tool_calls") or () if isinstance(call, dict)]
    return {"turn": "model", "text": _content_text(message.get("content")),
            "calls": [{"tool": str(call.get("name", "")), "arguments": call.get("arguments")} for call in calls]}


def _ended(turns: list[dict[str, Any]]) -> str:
    if turns and (turns[-1]["turn"] == "environment" or turns[-1]["turn"] == "model" and turns[-1]["calls"]):
        return "turn limit"
    return "done"


EPISODE_METRICS = ("episodes/model_turns", "episodes/turn_limit", "episodes/tool_error")


def episode_metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    """What a batch's episodes did (samples.jsonl rows): the model's turns per episode, and the share that ended at the
    turn limit and in a tool error; nothing for no rows.

    >>> episode_metrics([{"episode": [{"turn": "model"}, {"turn": "tool"}, {"turn": "model"}], "ended": "done"},
    ...                  {"episode": [{"turn": "model"}], "ended": "turn limit"}])
    {'episodes/model_turns': 1.5, 'episodes/turn_limit': 0.5, 'episodes/tool_error': 0.0}
    """
    if not rows:
        return {}
    turns = [sum(turn["turn"] == "model" for turn in row["episode"]) for row in rows]
    return dict(zip(EPISODE_METRICS, (sum(turns) / len(rows), sum(row["ended"] == "turn limit" for row in rows) / len(rows),
                                      sum(row["ended"] == "tool error" for row in rows) / len(rows))))


def tool_result(content: Any) -> Any:
    """A tool's result as the model was shown it: the content of the tool message TRL 1.15 builds from what the tool
    returned (trl/trainer/grpo_trainer.py, ``_tool_call_loop``: a list as it is, content parts with images among them,
    which the chat template renders; anything else as its ``str``, a dict or a number too). Text stays text; a list is
    kept item by item, JSON's own values as they are, an image as itself (:class:`SampleLog` names it by the thumbnail
    it stores), anything else as the text Python shows it by, as a template shows a list.

    >>> tool_result("higher"), tool_result([3, "a", {"x": 1.5}])
    ('higher', [3, 'a', {'x': 1.5}])
    >>> tool_result([{"type": "text", "text": "found"}, (1, 2)])
    [{'type': 'text', 'text': 'found'}, [1, 2]]
    """
    if content is None:
        return ""
    return content if isinstance(content, str) else _recorded(content)


def _recorded(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool, int, float)) or is_image(value):
        return value
    if isinstance(value, (list, tuple)):
        return [_recorded(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _recorded(item) for key, item in value.items()}
    return repr(value)


def is_image(value: Any) -> bool:
    """Whether ``value`` is a PIL image (looked for only where PIL is imported: no image exists unless it is)."""
    image = sys.modules.get("PIL.Image")
    return image is not None and isinstance(value, image.Image)


def result_text(result: Any) -> str:
    """A recorded tool result (:func:`tool_result`) as one line of text for a view: text as it is; content parts as their
    text, each image as ``[image <name>]``; any other list as JSON.

    >>> result_text([{"type": "image", "image": "sample_images/ab.png"}, {"type": "text", "text": "a cat"}])
    '[image sample_images/ab.png] a cat'
    >>> result_text([1, 2])
    '[1, 2]'
    """
    if isinstance(result, str):
        return result
    if isinstance(result, list) and all(isinstance(part, dict) and part.get("type") in ("text", "image") for part in result):
        return " ".join(str(part.get("text", "")) if part["type"] == "text" else f"[image {part.get('image', '')}]"
                        for part in result)
    return json.dumps(result, ensure_ascii=False, default=str)


def _content_text(content: Any) -> str:
    if isinstance(content, list):  # content parts: their text
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict) and part.get("type") == "text")
    return "" if content is None else str(content)


def is_tool_error(result: Any) -> bool:
    """Whether a tool result is TRL's record of a call that raised or named no tool: ``str({"error": message})``."""
    try:
        value = ast.literal_eval(result) if isinstance(result, str) and result.startswith("{'error'") else None
    except (ValueError, SyntaxError):
        return False
    return isinstance(value, dict) and set(value) == {"error"}


def question_of(prompt: Any) -> str:
    """The question a prompt asks: its last user message. Takes a prompt as samples.jsonl keeps it (chat
    messages or a string) and the ``role: content`` lines older samples.jsonl files flattened chat prompts to.

    >>> question_of([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}])
    '2+2?'
    >>> question_of("system: Be brief.\\nuser: 2+2?")
    '2+2?'
    >>> question_of([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "How many?"}]}])
    'How many?'
    """
    if isinstance(prompt, (list, tuple)):
        users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        question = users[-1] if users else ""
        if isinstance(question, list):  # content parts: the text beside the images
            return " ".join(str(part.get("text", "")) for part in question if isinstance(part, dict) and part.get("type") == "text")
        return str(question)
    return str(prompt).rsplit("user: ", 1)[-1]


def _images(logs: dict, n: int) -> list[list[Any]]:
    """Each of the batch's last ``n`` samples' images, from TRL's log: ``images`` (a list per sample, or None) from
    TRL 0.25, ``image`` (one per sample, or None) in TRL 0.22 (trl/trainer/grpo_trainer.py, ``self._logs``); none for a
    batch without images."""
    if logs.get("images"):
        return [list(images or []) for images in list(logs["images"])[-n:]]
    if logs.get("image"):
        return [[] if image is None else [image] for image in list(logs["image"])[-n:]]
    return []


def thumbnail_png(image) -> bytes:
    """A PNG of ``image`` (a PIL image) no larger than THUMBNAIL_PX a side, in RGB."""
    small = image.convert("RGB")
    small.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
    out = io.BytesIO()
    small.save(out, format="PNG")
    return out.getvalue()


def _placeholders_only(prompt: Any) -> Any:
    """``prompt`` with each image part as the placeholder the dataset gave (TRL 1.15 logs the prompt with the images
    filled in, trl/trainer/grpo_trainer.py, prepare_multimodal_messages): the row's ``images`` carry them."""
    if not isinstance(prompt, list):
        return prompt
    return [{**m, "content": [{"type": "image"} if isinstance(part, dict) and part.get("type") == "image" else part
                              for part in m["content"]]} if isinstance(m, dict) and isinstance(m.get("content"), list) else m
            for m in prompt]


def _score(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


_GIVEN_PROMPTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trainer -> its batches' prompts as given


def keep_prompts_as_given(trainer) -> None:
    """Before TRL 1.15 the trainer logs each prompt as the text it generated from (``logged_prompts_as_given`` in
    grpo_lite/machine/stack.py): beside that log, keep each generation batch's prompts as the dataset gave them, in the
    order TRL logs their texts (gathered from every process as TRL gathers them, kept as many as it keeps). A row is
    known by its place in the batch, not by its text: a template that renders differently from one call to the next
    (today's date in Llama 3.2's and SmolLM3's) renders no text twice alike."""
    logged = getattr(trainer, "_logs", {}).get("prompt")
    if stack.newer("logged_prompts_as_given") or trainer in _GIVEN_PROMPTS or not isinstance(logged, deque):
        return
    from accelerate.utils import gather_object

    given: deque = deque(maxlen=logged.maxlen)
    generate_and_score = trainer._generate_and_score_completions

    def generate_and_score_keeping_prompts(inputs, *args, **kwargs):
        prompts = [row.get("prompt") for row in inputs]
        output = generate_and_score(inputs, *args, **kwargs)
        given.extend(gather_object(prompts))  # after the batch's own gathers, in the same order on every process
        return output

    trainer._generate_and_score_completions = generate_and_score_keeping_prompts
    _GIVEN_PROMPTS[trainer] = given

_ROLLOUT_EPISODES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trainer -> its rollout function's episodes


def keep_rollout_episodes(trainer) -> None:
    """TRL logs a rollout function's completion decoded as one reply, its environment's tokens inside: it reads
    ``env_mask`` for the loss alone (trl/trainer/grpo_trainer.py, ``_generate``). Where the trainer has a rollout
    function, keep each completion beside that log as its turns (:func:`rollout_episode`), gathered from every process
    in the order TRL gathers its log, kept as many as it keeps."""
    rollout_func = getattr(trainer, "rollout_func", None)
    logged = getattr(trainer, "_logs", {}).get("completion")
    if rollout_func is None or trainer in _ROLLOUT_EPISODES or not isinstance(logged, deque):
        return
    from accelerate.utils import gather_object

    kept: deque = deque(maxlen=logged.maxlen)
    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    parser = reply_parser(tokenizer)

    @functools.wraps(rollout_func)
    def rollout_keeping_episodes(prompts, trainer):
        output = rollout_func(prompts, trainer)
        ids = [list(each) for each in output.get("completion_ids", ())]
        masks = [list(mask) for mask in output.get("env_mask") or [[1] * len(each) for each in ids]]
        kept.extend(gather_object([rollout_episode(tokenizer, parser, prompt, each, mask)
                                   for prompt, each, mask in zip(output.get("prompt_ids", ()), ids, masks)]))
        return output

    trainer.rollout_func = rollout_keeping_episodes
    _ROLLOUT_EPISODES[trainer] = kept


_ROW_SETTINGS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trainer -> the settings of its logged prompts


def note_row_settings(trainer, settings: list[dict[str, Any]]) -> None:
    """The values of the columns the chat template reads that each prompt of the trainer's latest generation batch was
    rendered with, in the order the trainer logs the prompts (``trainer._logs``, kept for one generation batch)."""
    logged = getattr(trainer, "_logs", {}).get("prompt")
    _ROW_SETTINGS.setdefault(trainer, deque(maxlen=getattr(logged, "maxlen", None))).extend(settings)


def _kept(table: weakref.WeakKeyDictionary, trainer) -> Any:
    """What ``table`` keeps for ``trainer``; nothing for a trainer that cannot be weakly referenced (a stand-in of
    TRL's, as benchmarks/long_run.py drives the callbacks with), for which nothing was kept."""
    try:
        return table.get(trainer, ())
    except TypeError:
        return ()


def prompts_as_given(trainer, logged: list) -> list:
    """The trainer's logged prompts as the dataset gave them: as logged from TRL 1.15, else the prompts
    :func:`keep_prompts_as_given` kept for them, by place."""
    given = list(_kept(_GIVEN_PROMPTS, trainer))
    if stack.newer("logged_prompts_as_given") or len(given) < len(logged):
        return logged
    return given[len(given) - len(logged):]


def batch_samples(trainer, step: int) -> list[dict[str, Any]]:
    """The latest generation batch's samples, from GRPOTrainer's ``_logs`` (it keeps one batch)."""
    logs = getattr(trainer, "_logs", None)
    if not logs or not logs.get("completion"):
        return []
    n = len(logs["completion"])
    prompts, completions = prompts_as_given(trainer, list(logs["prompt"])[-n:]), list(logs["completion"])[-n:]
    advantages = list(logs["advantages"])[-n:]
    scores = {name: list(values)[-n:] for name, values in logs["rewards"].items()}
    weights = getattr(trainer, "reward_weights", None)
    weights = [float(w) for w in weights] if weights is not None else [1.0] * len(scores)
    settings = list(_kept(_ROW_SETTINGS, trainer))[-n:]
    images = _images(logs, n)
    played = list(_kept(_ROLLOUT_EPISODES, trainer))[-n:]
    rows = []
    for i in range(n):
        rewards = {name: _score(values[i]) for name, values in scores.items()}
        turns, ended = private_copy(played[i]) if len(played) == n else episode(private_copy(completions[i]))
        rows.append({
            "step": step,
            "prompt": private_copy(_placeholders_only(prompts[i])),  # shared with TRL's record and, before TRL 1.15, other rows
            "completion": _text(completions[i]),
            "episode": turns,
            "ended": ended,
            "rewards": rewards,
            "total": weighted_total(list(rewards.values()), weights),
            "advantage": _score(advantages[i]) if i < len(advantages) else None,
        })
        if len(settings) == n:
            rows[-1]["template_columns"] = private_copy(settings[i])
        if len(images) == n:
            rows[-1]["images"] = images[i]  # the images themselves, until SampleLog.add stores them
    return rows


class SampleLog(RunCallback):
    """Appends each logged step's samples to ``samples.jsonl`` and keeps the newest in memory."""

    def __init__(self, output_dir: str | Path | None, *, trainer=None, max_rows: int = 5_000, keep_recent: int = 64):
        self.path = Path(output_dir) / SAMPLES_FILE if output_dir else None
        self.trainer = trainer
        self.max_rows = max_rows
        self.recent: deque[dict[str, Any]] = deque(maxlen=keep_recent)
        self._rows_on_disk = None
        self._last_batch: list[tuple[str, float | None]] = []
        self._thumbnails: dict[str, bytes] = {}  # the recent rows' images, by the name samples.jsonl refers to them by

    def attach(self, trainer) -> SampleLog:
        self.trainer = trainer
        keep_prompts_as_given(trainer)
        keep_rollout_episodes(trainer)
        return self

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.start(resume_step=state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "reward" not in logs:
            return
        rows = batch_samples(self.trainer, state.global_step)
        if "tools/call_frequency" in logs or getattr(self.trainer, "rollout_func", None):  # a run of episodes: their metrics,
            logs.update(episode_metrics(rows))  # recorded by MetricsLog after this
        batch = [(row["completion"], row["advantage"]) for row in rows]
        if batch != self._last_batch:  # one generation can feed several steps (steps_per_generation > 1)
            self._last_batch = batch
            self.add(rows)

    def start(self, resume_step: int) -> None:
        """Drop lines past ``resume_step`` (a resumed run writes those steps again)."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = [row for row in read_samples(self.path) if row.get("step", 0) <= resume_step]
        write_jsonl(self.path, kept)
        self._rows_on_disk = len(kept)

    def add(self, rows: list[dict[str, Any]]) -> None:
        rows = [{**row, "images": [self._store(image) for image in row["images"]]} if "images" in row else row for row in rows]
        rows = [{**row, "episode": self._named(row["episode"])} if "episode" in row else row for row in rows]
        self.recent.extend(rows)
        if len(self._thumbnails) > 4 * self.recent.maxlen:  # keep the images the recent rows show
            shown = {name for row in self.recent for name in row.get("images", ())}
            self._thumbnails = {name: png for name, png in self._thumbnails.items() if name in shown}
        if self.path is None or not rows:
            return
        if self._rows_on_disk is None:
            self.start(resume_step=rows[0]["step"] - 1)
        append_jsonl(self.path, rows)
        self._rows_on_disk += len(rows)
        if self._rows_on_disk > self.max_rows:
            kept = read_samples(self.path)[-self.max_rows // 2 :]
            write_jsonl(self.path, kept)
            self._rows_on_disk = len(kept)


    def _named(self, value: Any) -> Any:
        """``value`` (an episode's turns) with each image in it (a tool's result) named by its stored thumbnail."""
        if is_image(value):
            return self._store(value)
        if isinstance(value, list):
            return [self._named(item) for item in value]
        if isinstance(value, dict):
            return {key: self._named(item) for key, item in value.items()}
        return value

    def _store(self, image) -> str:
        """The name samples.jsonl gives ``image`` (a PIL image, or a name a row read back from a run holds already):
        its thumbnail's, written once into the run folder."""
        if isinstance(image, str):
            return image
        png = thumbnail_png(image)
        name = f"{SAMPLE_IMAGES}/{hashlib.sha256(png).hexdigest()[:16]}.png"
        if name not in self._thumbnails and self.path is not None:
            file = self.path.parent / name
            if not file.exists():
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_bytes(png)
        self._thumbnails[name] = png
        return name

    def thumbnail(self, name: str, folder: str | Path | None = None) -> bytes | None:
        """The PNG a sample's ``images`` entry names: kept from this run, else read from ``folder`` (a finished
        run's); None where neither has it."""
        if name in self._thumbnails:
            return self._thumbnails[name]
        base = folder if folder is not None else (self.path.parent if self.path else None)
        file = Path(base) / name if base is not None else None
        return file.read_bytes() if file is not None and file.is_file() else None


def read_samples(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a samples.jsonl (or of the one in a run folder); lines cut by a killed process are skipped."""
    return read_jsonl(in_run(path, SAMPLES_FILE))
