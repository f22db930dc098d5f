"""Held-out evaluation: how often the model is right, well formatted, and what each reward says.

``evaluate`` generates one greedy completion per row (accuracy, format rate, mean rewards) and, with
``heldout_samples=k``, k sampled completions per row for pass@k; with ``tools``, each is an episode that runs the tool
calls the model writes, as training does (:mod:`grpo_lite.evaluation.played`). ``score`` does the arithmetic on given
completions, so a report can be checked by hand. ``compare`` puts a base and a trained report side by side.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import comb
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table

from rewards import resolve_rewards
from rewards.calling import as_trl_completion, call_reward, check_columns
from rewards.combine import distinct_names
from rewards.diagnoses import is_correct
from rewards.display import RichReport

from ..data.images import images_of
from ..data.prepare import DatasetError, as_dataset
from ..guards.user_code import environment_reward, guard, guard_rollouts
from ..machine import stack
from ..model.inference import prompt_texts, sample
from ..run.settings import OPTION_RANGES, REWARD_TIMEOUT, TOOL_TIMEOUT, ConfigError, Heldout, declared, refuse_lacking_options
from ..shapes import Declared, Whole, check
from .played import Episode, play_episodes

EXAMPLES_SHOWN = 3


def _default_correctness():
    from rewards import exact_match_reward, numeric_correctness_reward

    def numeric_or_exact_match(prompts=None, completions=(), answer=None, **kwargs):
        """numeric_correctness_reward where the gold is a number, else exact_match_reward: a word answer ("red") is
        otherwise scored None, never correct."""
        numeric = numeric_correctness_reward(prompts, completions, answer, **kwargs)
        exact = exact_match_reward(prompts, completions, answer, **kwargs)
        return [e if n is None else n for n, e in zip(numeric, exact)]

    return numeric_or_exact_match


def _default_format():
    from rewards import soft_xml_format_reward

    return soft_xml_format_reward


def pass_at_k(samples: int, num_correct: int, k: int) -> float:
    """Chance that at least one of k completions drawn from ``samples`` (``num_correct`` right) is right.

    The unbiased estimator 1 - C(n-c, k) / C(n, k) of Chen et al. (2021), "Evaluating Large Language Models
    Trained on Code".
    """
    if k > samples:
        raise ConfigError(f"pass@{k} needs at least {k} samples per row; raise heldout_samples to {k}")
    return 1.0 - comb(samples - num_correct, k) / comb(samples, k)


def powers_of_two(samples: int) -> list[int]:
    """1, 2, 4, ... up to samples, and samples itself."""
    ks = [k for k in (2**i for i in range(samples.bit_length())) if k <= samples]
    return sorted({*ks, samples})


@dataclass
class EvalReport(RichReport):
    """What ``evaluate`` found; ``print(report)`` shows a table."""

    n: int
    accuracy: float
    format_rate: float
    mean_rewards: dict[str, float]
    pass_at_k: dict[int, float] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Numbers only (no examples), ready for JSON."""
        return {
            "n": self.n,
            "accuracy": self.accuracy,
            "format_rate": self.format_rate,
            "mean_rewards": dict(self.mean_rewards),
            "pass_at_k": {str(k): v for k, v in self.pass_at_k.items()},
        }

    def rows(self) -> list[tuple[str, float]]:
        """(label, value) pairs in the order the table shows them."""
        rows = [("accuracy", self.accuracy), ("format rate", self.format_rate)]
        rows += [(f"pass@{k}", v) for k, v in self.pass_at_k.items()]
        rows += [(f"mean {name}", v) for name, v in self.mean_rewards.items()]
        return rows

    def __rich__(self) -> Table:
        table = Table(title=f"evaluation on {self.n} rows")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for label, value in self.rows():
            table.add_row(label, f"{value:.3f}")
        return table


def _mean(values: Sequence[float | None]) -> float:
    """Mean over the completions a reward applies to (``None`` means it does not, as in TRL)."""
    scored = [v for v in values if v is not None]
    return sum(scored) / len(scored) if scored else float("nan")


def _text(completion) -> str:
    return getattr(completion, "text", completion)


def _as_completion(prompt: Any, completion) -> Any:
    """A completion as training's rewards get it: an episode's messages, or the text in the prompt's format."""
    return completion.messages if isinstance(completion, Episode) else as_trl_completion(prompt, _text(completion))


def _environments(completions: Sequence[Any]) -> dict[str, list[Any]]:
    """Each episode's environment, as TRL hands the rewards ``environments``; nothing where none was played in one."""
    environments = [getattr(c, "environment", None) for c in completions]
    return {"environments": environments} if any(e is not None for e in environments) else {}


def _environment_rewards(score_with, completions: Sequence[Any], timeout: float | None) -> dict[str, float]:
    """The mean of each environment class's ``get_reward()`` over its episodes, under the class's name, as training logs
    it (trl/trainer/grpo_trainer.py: one reward per environment class that defines get_reward), guarded as there.
    ``score_with(func)``: ``func``'s scores of the completions."""
    kinds = dict.fromkeys(type(e) for e in _environments(completions).get("environments", ())
                          if callable(getattr(e, "get_reward", None)))
    return {kind.__name__: _mean(score_with(guard(environment_reward(kind), timeout, name=kind.__name__,
                                                  label=f"environment {kind.__name__}'s get_reward"))) for kind in kinds}


def _scores_episodes(environment_factory: Any) -> bool:
    """Whether the environments ``environment_factory`` makes score their episodes (a ``get_reward`` method)."""
    factories = environment_factory.values() if isinstance(environment_factory, dict) else [environment_factory]
    return any(callable(getattr(factory if inspect.isclass(factory) else factory(), "get_reward", None))
               for factory in factories if factory is not None)


def _environment_correctness():
    def environment_pays(completions, environments, **kwargs):
        """1 for an episode whose environment paid it a positive reward (its get_reward()), else 0: accuracy for rows
        without an answer, played in environments that score them."""
        paid = [e.get_reward() if callable(getattr(e, "get_reward", None)) else None for e in environments]
        return [None if reward is None else float(reward > 0) for reward in paid]

    return environment_pays


def rows_problem(columns: Sequence[str], *, correctness: Callable | None = None, environment_factory: Any = None,
                 rows: str = "evaluate: the dataset") -> str | None:
    """What evaluation rows with ``columns`` lack: a prompt, and, unless ``correctness`` is given or the episodes'
    environments score them, a gold ``answer``; None when nothing is. ``rows`` names them in the message."""
    if "prompt" not in columns:
        return f"{rows} has no 'prompt' column (columns: {', '.join(columns)}); build it with grpo_lite.prepare_dataset"
    if correctness is None and "answer" not in columns and not (environment_factory is not None
                                                                and _scores_episodes(environment_factory)):
        return (f"{rows} has no 'answer' column (columns: {', '.join(columns)}), which accuracy is judged by: "
                "prepare it with prepare_dataset(..., answer=...), pass correctness=<a reward function>, or play the rows in "
                "an environment_factory whose get_reward() scores them")
    return None


def _columns(rows: Sequence[dict[str, Any]], repeat: int) -> dict[str, list[Any]]:
    """Dataset columns as reward keywords (as TRL passes them), each value repeated once per completion."""
    names = [c for c in rows[0] if c not in ("prompt", "completion")]
    return {c: [row[c] for row in rows for _ in range(repeat)] for c in names}


def as_rewards_get(tokenizer, rows: list[dict[str, Any]], chat_template_kwargs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``rows`` as training's rewards get them: from TRL 0.24 on, a row with images has its prompt rendered as text, so
    its completions are text too, as Unsloth's trainer hands them and train() does on every backend
    (``image_rewards_as_text`` in grpo_lite/machine/stack.py); other rows as they are."""
    if not stack.newer("image_rewards_as_text") or not any(images_of(row) for row in rows):
        return rows
    texts = prompt_texts(tokenizer, rows, chat_template_kwargs)
    return [{**row, "prompt": text} if images_of(row) else row for row, text in zip(rows, texts)]


def score(
    rows: Sequence[dict[str, Any]],
    completions: Sequence[str],
    rewards: Any = None,
    *,
    sampled: Sequence[Sequence[str]] | None = None,
    correctness: Callable | None = None,
    format_reward: Callable | None = None,
    reward_timeout: float | None = REWARD_TIMEOUT,
) -> EvalReport:
    """The report for given completions: ``completions[i]`` answers ``rows[i]``; ``sampled[i]`` are k more.

    A completion is correct when ``correctness`` (default ``rewards.numeric_correctness_reward`` where the gold is a
    number, else ``rewards.exact_match_reward``) gives it a positive score; well formatted when ``format_reward``
    (default ``rewards.soft_xml_format_reward``) does.
    Completions are texts, :class:`~grpo_lite.model.inference.Completion` (whose token ids the rewards then get) or
    :class:`~grpo_lite.evaluation.played.Episode` (whose messages the rewards get, as in training);
    every function is called as training calls it (``rewards.calling.call_reward``: a chat message for a chat
    prompt, ``async`` ones awaited), guarded as training guards it (grpo_lite/guards/user_code.py): a call that fails or
    runs past ``reward_timeout`` seconds is said naming the row, and its scores are None. Rows without an ``answer``
    played in environments that score them are correct where the environment paid a positive reward.
    """
    if len(completions) != len(rows):
        raise DatasetError(f"score: {len(completions)} completions for {len(rows)} rows; pass one per row")
    if correctness is None and rows and "answer" not in rows[0]:
        if not any(callable(getattr(e, "get_reward", None)) for e in _environments(completions).get("environments", ())):
            raise DatasetError(rows_problem(list(rows[0]), rows="score: the dataset"))
        correctness = _environment_correctness()
    correctness = guard(correctness or _default_correctness(), reward_timeout)
    format_reward = guard(format_reward or _default_format(), reward_timeout)
    prompts = [row["prompt"] for row in rows]
    columns = _columns(rows, 1)

    def scores(func, prompts, completions, columns):
        return call_reward(func, prompts=prompts, completions=[_as_completion(p, c) for p, c in zip(prompts, completions)],
                           completion_ids=[list(getattr(c, "token_ids", ())) for c in completions], **columns)

    columns = {**columns, **_environments(completions)}
    correct = scores(correctness, prompts, completions, columns)
    formatted = scores(format_reward, prompts, completions, columns)
    extra = resolve_rewards(rewards)[0] if rewards not in (None, []) else []  # []: the environments' rewards alone
    mean_rewards = {name: _mean(scores(guard(f, reward_timeout, name=name), prompts, completions, columns))
                    for f, name in zip(extra, distinct_names(extra))}
    mean_rewards.update(_environment_rewards(lambda f: scores(f, prompts, completions, columns), completions, reward_timeout))

    pass_k: dict[int, float] = {}
    if sampled is not None:
        k = len(sampled[0])
        flat = [c for row_samples in sampled for c in row_samples]
        sample_scores = scores(correctness, [p for p in prompts for _ in range(k)], flat, {**_columns(rows, k), **_environments(flat)})
        num_correct = [sum(is_correct(s) for s in sample_scores[i * k : (i + 1) * k]) for i in range(len(rows))]
        pass_k = {j: sum(pass_at_k(k, c, j) for c in num_correct) / len(rows) for j in powers_of_two(k)}

    examples = [
        {"prompt": row["prompt"], "answer": row.get("answer"), "completion": _text(completion),
         "correct": is_correct(c), "formatted": bool(f and f > 0)}
        for row, completion, c, f in zip(rows, completions, correct, formatted)
    ]
    return EvalReport(
        n=len(rows),
        accuracy=sum(e["correct"] for e in examples) / len(rows),
        format_rate=sum(e["formatted"] for e in examples) / len(rows),
        mean_rewards=mean_rewards,
        pass_at_k=pass_k,
        examples=examples,
    )


# What evaluate()'s numbers may be: the held-out settings' shapes (heldout_n, heldout_samples) and GRPOConfig's ranges.
EVALUATE_ARGUMENTS = {
    "heldout_n": declared(Heldout)["n"], "heldout_samples": declared(Heldout)["samples"],
    "max_completion_length": OPTION_RANGES["max_completion_length"], "temperature": OPTION_RANGES["temperature"],
    "batch_size": Declared(Whole(low=1), "give the prompts generated at once, 1 or more"),
}


def evaluate(
    model,
    tokenizer,
    dataset,
    rewards: Any = None,
    *,
    heldout_n: int | None = None,
    heldout_samples: int = 1,
    max_completion_length: int = 128,
    temperature: float = 1.0,
    batch_size: int = 16,
    seed: int = 0,
    correctness: Callable | None = None,
    format_reward: Callable | None = None,
    progress: str | None = "evaluating",
    chat_template_kwargs: dict[str, Any] | None = None,
    tools: Sequence[Any] | None = None,
    max_tool_calling_iterations: int | None = None,
    environment_factory: Any = None,
    reward_timeout: float | None = REWARD_TIMEOUT,
    tool_timeout: float | None = TOOL_TIMEOUT,
) -> EvalReport:
    """Evaluate ``model`` on the first ``heldout_n`` rows of a ``prepare_dataset`` dataset (``prompt`` and ``answer``).

    Example::

        report = evaluate(model, tokenizer, test_set, rewards="gsm8k", heldout_n=200, heldout_samples=4)
        report.accuracy, report.pass_at_k[4]

    Accuracy and format rate use one greedy completion per row; ``heldout_samples > 1`` also draws that many
    completions at ``temperature`` (seeded by ``seed``) for pass@k. ``progress`` labels the progress bars over
    the prompts (None: no bars). Prompts are rendered as training renders them, with ``chat_template_kwargs`` (``None``:
    those the last ``train()`` with this tokenizer used; see :func:`grpo_lite.generate`) and each row's own values of
    the columns the chat template reads over them. With ``tools`` (functions, as :func:`grpo_lite.train` takes them),
    each completion is an episode: the tool calls the model writes are run and their results shown to it, at most
    ``max_tool_calling_iterations`` rounds, within ``max_completion_length`` tokens, as training plays a rollout. With
    ``environment_factory`` (as ``train`` takes it), each episode is played in an environment of its own, reset with its
    row; the rewards get it as ``environments``, and each environment class's ``get_reward()`` is reported among them;
    rows without an ``answer`` are then correct where their environment paid a positive reward. What the rows lack for
    this (a prompt; an answer, a ``correctness`` or an environment that scores; a column a reward needs) is refused
    before anything is generated. Every call of a reward, a tool or an environment is guarded as in training
    (``reward_timeout``, ``tool_timeout``: seconds a call; grpo_lite/guards/user_code.py): a failure is said naming it
    and the row, and scores None or answers the model's call with the error.
    """
    import torch

    check(dict(heldout_n=heldout_n, heldout_samples=heldout_samples, max_completion_length=max_completion_length,
               temperature=temperature, batch_size=batch_size), EVALUATE_ARGUMENTS, ConfigError, "evaluate")
    # the T4 stack's TRL has no tool loop to play episodes as training would
    refuse_lacking_options({name: value for name, value in (("tools", tools), ("environment_factory", environment_factory))
                            if value})
    dataset = as_dataset(dataset)
    rows = [dict(row) for row in (dataset.select(range(min(heldout_n, len(dataset)))) if heldout_n is not None else dataset)]
    if not rows:
        raise DatasetError("evaluate: the dataset is empty (or heldout_n=0); pass at least one row")
    if (problem := rows_problem(list(rows[0]), correctness=correctness, environment_factory=environment_factory)) is not None:
        raise DatasetError(problem)
    extra = resolve_rewards(rewards)[0] if rewards not in (None, []) else []
    given = [*rows[0], *(["environments"] if environment_factory is not None else [])]
    check_columns([f for f in (*extra, correctness, format_reward) if f is not None], given)  # before any generation
    options = dict(max_completion_length=max_completion_length, batch_size=batch_size, chat_template_kwargs=chat_template_kwargs)
    label = (lambda what: f"{progress}: {what}") if progress is not None else (lambda what: None)
    if tools or environment_factory is not None:
        played, _ = guard_rollouts({"tools": tools or [], "environment_factory": environment_factory}, tool_timeout=tool_timeout)

        def generate(rows, *, num_return_sequences=1, **more):  # an episode per row and sample, as training plays them
            return play_episodes(model, tokenizer, [row for row in rows for _ in range(num_return_sequences)],
                                 played["tools"], max_tool_calling_iterations=max_tool_calling_iterations,
                                 environment_factory=played["environment_factory"], **options, **more)
    else:
        def generate(rows, **more):
            return sample(model, tokenizer, rows, **options, **more)
    greedy = generate(rows, progress=label("greedy"))
    sampled = None
    if heldout_samples > 1:
        with torch.random.fork_rng():  # seeded, and the caller's random stream (a training run's) left as it was
            torch.manual_seed(seed)
            flat = generate(rows, do_sample=True, temperature=temperature, num_return_sequences=heldout_samples,
                            progress=label(f"{heldout_samples} samples each"))
        sampled = [flat[i * heldout_samples : (i + 1) * heldout_samples] for i in range(len(rows))]
    return score(as_rewards_get(tokenizer, rows, chat_template_kwargs), greedy, extra, sampled=sampled,
                 correctness=correctness, format_reward=format_reward, reward_timeout=reward_timeout)


def _verdict(example: dict[str, Any]) -> str:
    """'(right, formatted) <completion>', escaped so brackets in model output are not read as rich markup."""
    verdict = ("right" if example["correct"] else "wrong") + (", formatted" if example["formatted"] else "")
    return f"({verdict}) {escape(example['completion'])}"


@dataclass
class Comparison(RichReport):
    """Two reports side by side, with examples where the trained model's correctness changed."""

    base: EvalReport
    trained: EvalReport

    def changed_examples(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(base, trained) example pairs for the same row whose correctness or format differ."""
        return [
            (b, t)
            for b, t in zip(self.base.examples, self.trained.examples)
            if (b["correct"], b["formatted"]) != (t["correct"], t["formatted"])
        ]

    def __rich__(self) -> Group:
        table = Table(title=f"base vs trained on {self.trained.n} rows")
        for column in ("metric", "base", "trained", "change"):
            table.add_column(column, justify="left" if column == "metric" else "right")
        base = dict(self.base.rows())
        for label, value in self.trained.rows():
            before = base.get(label)
            table.add_row(label, "-" if before is None else f"{before:.3f}", f"{value:.3f}",
                          "" if before is None else f"{value - before:+.3f}")
        examples = Table(title="examples that changed", show_lines=True)
        for column in ("answer", "base", "trained"):
            examples.add_column(column, overflow="fold")
        for b, t in self.changed_examples()[:EXAMPLES_SHOWN]:
            examples.add_row(escape(str(b["answer"])), _verdict(b), _verdict(t))
        return Group(table, examples)


def compare(base_report: EvalReport, trained_report: EvalReport) -> Comparison:
    """Side by side: ``print(compare(evaluate(base, ...), evaluate(trained, ...)))``."""
    if base_report.n != trained_report.n:
        raise ConfigError(f"compare: the reports cover {base_report.n} and {trained_report.n} rows; evaluate both on the same rows")
    return Comparison(base_report, trained_report)
