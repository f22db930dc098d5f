"""Reward functions made from the kinds of return value and behaviour a user's reward has, not from a list of cases.

Each input is one to three reward functions, each built from a drawn spec: the score it gives each row (a float, a
whole number, a flag, None, NaN, infinity, numpy and torch scalars, text), how it returns them (a list, a tuple, a numpy
array, a torch tensor, a generator; one short, one too many, one number, nothing), and how it behaves (raising on some
rows, changing its inputs: the completions, the prompts inside, a column, the token ids; sleeping a few milliseconds;
``async def``). They go through the reward lab, ``rewards.check_rewards(...)``, on rows of text and chat prompts and
completions, and a few through ``train()`` with the session's tiny model for one real step.

The lab's oracle: a function that raised is reported as an ``exception`` on exactly the rows it raised on; one that
returned the wrong number of scores as ``wrong_length``; a score that is no finite number as ``not_a_number`` on its row;
every other score read as the number it is (None as None); ``report.ok`` is False exactly when one of those was found.
Every function receives the rows as given, whatever the functions before it did to theirs, and the rows handed to the lab
are left as they were. In training: the run ends its step, each function that failed its call is counted as failing
once (the guard scores its batch None) and the others not at all, and every function receives the same prompts,
completions, token ids and columns, the columns as the dataset holds them.
"""

import asyncio
import copy
import functools
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
from generated import TRAININGS, bounded, judge
from hypothesis import given
from hypothesis import strategies as st

from grpo_lite import load_model, prepare_dataset, read_metrics, train
from rewards import check_rewards
from rewards.extract import completion_text

N_ROWS = 6
# Classes of input that fail today, each with what it does now; an entry goes when its fix is in.
KNOWN_DEFECTS: dict[str, str] = {}

SCORES = {
    "float": st.floats(-10, 10), "whole number": st.integers(-5, 5), "flag": st.booleans(), "None": st.none(),
    "NaN": st.just(math.nan), "infinity": st.sampled_from([math.inf, -math.inf]),
    "numpy scalar": st.one_of(st.floats(-1, 1).map(np.float64), st.floats(-1, 1, width=32).map(np.float32),
                              st.integers(-5, 5).map(np.int64), st.booleans().map(np.bool_)),
    "torch scalar": st.floats(-1, 1).map(torch.tensor), "text": st.sampled_from(["1.0", "one", ""]),
}
CONTAINERS = ("list", "tuple", "numpy array", "torch tensor", "generator")
LENGTHS = ("one per completion", "one short", "one too many", "one number", "nothing")
MUTATIONS = ("none", "appends a completion", "replaces a completion", "changes a completion's message in place",
             "empties a completion's messages", "changes a prompt's message", "changes a column", "changes the token ids")


@dataclass
class Spec:
    """What one generated reward does: its score for each row, how it returns them, and how it behaves."""

    name: str
    scores: list
    container: str = "list"
    length: str = "one per completion"
    raises_on: frozenset = frozenset()
    mutation: str = "none"
    sleep: float = 0.0
    is_async: bool = False
    received: list = field(default_factory=list)  # a copy of each call's arguments, taken as the call begins
    returned: list = field(default_factory=list)  # each call's scores, as the rows it was called with give them


def _returned(spec: Spec, scores: list):
    if spec.length == "one short":
        scores = scores[:-1]
    elif spec.length == "one too many":
        scores = [*scores, 0.0]
    elif spec.length == "one number":
        return scores[0] if scores else 0.0
    elif spec.length == "nothing":
        return None
    numbers = all(isinstance(s, (int, float, np.generic)) or torch.is_tensor(s) for s in scores)
    if spec.container == "tuple":
        return tuple(scores)
    if spec.container == "numpy array":
        return np.array(scores, dtype=float if numbers else object)
    if spec.container == "torch tensor" and numbers:
        return torch.tensor([float(s) for s in scores])
    if spec.container == "generator":
        return (s for s in scores)
    return scores


def _mutate(spec: Spec, prompts, completions, completion_ids, kwargs) -> None:
    if spec.mutation == "appends a completion":
        completions.append("changed")
    elif spec.mutation == "replaces a completion" and completions:
        completions[0] = "changed"
    elif spec.mutation == "changes a completion's message in place" and completions and isinstance(completions[-1], list):
        completions[-1][0]["content"] = "changed"
    elif spec.mutation == "empties a completion's messages" and completions and isinstance(completions[0], list):
        completions[0].clear()
    elif spec.mutation == "changes a prompt's message" and prompts and isinstance(prompts[0], list):
        prompts[0][0]["content"] = "changed"
    elif spec.mutation == "changes a column" and kwargs.get("answer"):
        kwargs["answer"][0] = "changed"
    elif spec.mutation == "changes the token ids" and completion_ids:
        completion_ids[0].append(0)


def build(spec: Spec):
    """The reward function ``spec`` describes, named after it; the rows it is called with come from its ``row`` column."""
    def score(prompts, completions, completion_ids, **kwargs):
        spec.received.append(copy.deepcopy({"prompts": prompts, "completions": completions,
                                            "completion_ids": completion_ids, **_columns(kwargs)}))
        time.sleep(spec.sleep)
        rows = list(kwargs["row"])
        if spec.raises_on & set(rows):
            raise ValueError(f"{spec.name} cannot score row {sorted(spec.raises_on & set(rows))[0]}")
        scores = [spec.scores[row] for row in rows]
        spec.returned.append(scores)
        _mutate(spec, prompts, completions, completion_ids, kwargs)
        return _returned(spec, scores)

    if spec.is_async:
        async def reward(prompts, completions, completion_ids, **kwargs):
            await asyncio.sleep(0)
            return score(prompts, completions, completion_ids, **kwargs)
    else:
        def reward(prompts, completions, completion_ids, **kwargs):
            return score(prompts, completions, completion_ids, **kwargs)
    reward.__name__ = reward.__qualname__ = spec.name
    return reward


def _columns(kwargs) -> dict:
    """The dataset's columns among a reward's keyword arguments (not the trainer's state or its loggers)."""
    return {k: v for k, v in kwargs.items() if k not in ("trainer_state", "log_metric", "log_extra")}


@st.composite
def spec(draw, name: str, behaves: bool, returns: bool, rows: int = N_ROWS):
    """A reward's spec: drawn returns (``returns``: of every kind, in every container and length) and behaviours
    (``behaves``: raising on some rows, changing its inputs, sleeping, async); else plain floats and no behaviour."""
    kinds = st.sampled_from(list(SCORES)).flatmap(lambda kind: SCORES[kind]) if returns else SCORES["float"]
    drawn = Spec(name=name, scores=draw(st.lists(kinds, min_size=rows, max_size=rows)))
    if returns:
        drawn.container, drawn.length = draw(st.sampled_from(CONTAINERS)), draw(st.sampled_from(LENGTHS))
    if behaves:
        drawn.raises_on = frozenset(draw(st.sets(st.integers(0, rows - 1), max_size=2)))
        drawn.mutation = draw(st.sampled_from(MUTATIONS))
        drawn.sleep = draw(st.sampled_from([0.0, 0.0, 0.005, 0.02]))
        drawn.is_async = draw(st.booleans())
    return drawn


def specs(behaves: bool, returns: bool, rows: int = N_ROWS):
    """One to three specs, named reward_0, reward_1, ... in the order they are called."""
    return st.integers(1, 3).flatmap(lambda n: st.tuples(*(spec(f"reward_{i}", behaves, returns, rows) for i in range(n))))


def classes_of(drawn) -> set[str]:
    """The KNOWN_DEFECTS classes the rewards of ``drawn`` belong to."""
    return {"a reward that changes its inputs"} if any(s.mutation != "none" for s in drawn) else set()


# --- the reward lab --------------------------------------------------------------------------------------------------

TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=10)


@st.composite
def samples(draw):
    """Rows the lab scores: text or chat prompts (two completions share each), text or chat completions, a gold answer,
    and each row's number, which tells the generated rewards the row."""
    chat = draw(st.booleans())
    rows = []
    for row in range(N_ROWS):
        prompt = f"What is {row // 2} + {row // 2}?"
        text = draw(TEXTS)
        rows.append({"prompt": [{"role": "user", "content": prompt}] if chat else prompt,
                     "completion": [{"role": "assistant", "content": text}] if chat else text,
                     "answer": str(row // 2 * 2), "row": row})
    return rows


def expected_problems(spec: Spec, rows: int) -> tuple[dict[str, set], list]:
    """The problems the lab must report for ``spec`` (kind -> rows; None for the whole call) and the scores it must
    read."""
    if spec.raises_on:
        return {"exception": set(spec.raises_on)}, [None] * rows
    if spec.length != "one per completion":
        return {"wrong_length": {None}}, [None] * rows
    read, bad = [], set()
    for row, score in enumerate(spec.scores):
        value = score.item() if hasattr(score, "item") else score
        if value is None:
            read.append(None)
        elif isinstance(value, (int, float)) and math.isfinite(value):
            read.append(float(value))
        else:
            read.append(None)
            bad.add(row)
    return ({"not_a_number": bad} if bad else {}), read


ERRORS = ("exception", "wrong_length", "not_a_number")


def lab_ends(drawn, rows) -> str:
    """``check_rewards`` on ``rows`` with the rewards ``drawn`` builds: ``accepted`` once the report says what each did."""
    given = copy.deepcopy(rows)
    report = check_rewards([build(s) for s in drawn], rows)
    assert rows == given, f"the lab changed the rows it was handed: {rows!r}"
    assert [row["completion"] for row in report.rows] == [completion_text(row["completion"]) for row in given], \
        "the report shows completions other than the rows'"
    failing = False
    for s in drawn:
        problems, scores = expected_problems(s, len(rows))
        found: dict[str, set] = {}
        for problem in report.problems:
            if problem.function == s.name and problem.kind in ERRORS:
                found.setdefault(problem.kind, set()).add(problem.row)
        assert found == problems, f"{s}: the lab found {found}, not {problems}"
        assert report.scores(s.name) == scores, f"{s}: scored {report.scores(s.name)}, not {scores}"
        failing |= bool(problems)
        for call in s.received:
            _assert_received_as_given(s, call, given)
    assert report.ok == (not failing), f"report.ok is {report.ok}: {[str(p) for p in report.problems]}"
    return "accepted"


def _assert_received_as_given(s: Spec, call: dict, given: list) -> None:
    """One call's arguments were the rows it was called with, as they were given to the lab."""
    by_row = {row["row"]: row for row in given}
    called = [by_row[row] for row in call["row"]]
    assert call["completions"] == [row["completion"] for row in called], f"{s.name} received {call['completions']!r}"
    assert call["prompts"] == [row["prompt"] for row in called], f"{s.name} received {call['prompts']!r}"
    assert call["answer"] == [row["answer"] for row in called], f"{s.name} received {call['answer']!r}"


@bounded()
@given(drawn=specs(behaves=False, returns=True), rows=samples())
def test_the_lab_reads_a_reward_return_of_any_kind_or_names_what_is_wrong(drawn, rows, generated_inputs):
    judge(generated_inputs, "reward returns", lambda: lab_ends(drawn, rows), classes_of(drawn), KNOWN_DEFECTS)


@bounded()
@given(drawn=specs(behaves=True, returns=False), rows=samples())
def test_the_lab_reports_a_reward_that_raises_changes_its_inputs_or_is_slow_and_keeps_the_rows(drawn, rows,
                                                                                             generated_inputs):
    judge(generated_inputs, "reward behaviours", lambda: lab_ends(drawn, rows), classes_of(drawn), KNOWN_DEFECTS)


# --- a real step of training ------------------------------------------------------------------------------------------

TRAIN_ROWS = [{"question": f"What is {i} + {i}?", "answer": str(2 * i), "row": i} for i in range(4)]
STEP = dict(preset="cpu-smoke", max_steps=1, num_generations=4, per_device_train_batch_size=4, max_completion_length=6,
            dashboard=False, reward_timeout=1.0)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return load_model(str(tiny_model_dir), lora_rank=8)


def _failed_its_call(spec: Spec, rows: list) -> bool:
    """Whether ``spec``'s reward fails a call on ``rows``: it raises there, returns the wrong number of scores, or a
    score that is no finite number."""
    if spec.raises_on & set(rows) or spec.length != "one per completion":
        return True
    _, scores = expected_problems(spec, len(spec.scores))
    return any(scores[row] is None and spec.scores[row] is not None for row in rows)


def training_ends(tiny, drawn) -> str:
    """One real step of ``train()`` with the rewards ``drawn`` builds: ``accepted`` once the step is logged, each reward
    was called once with the arguments every other got, and the guard counted exactly the failing calls."""
    model, tokenizer = tiny
    dataset = prepare_dataset(TRAIN_ROWS, system_prompt=None)
    with tempfile.TemporaryDirectory() as folder:
        result = train(model, tokenizer, dataset, [build(s) for s in drawn], output_dir=Path(folder, "run"), **STEP)
        metrics = read_metrics(Path(folder, "run"))
    assert [m["step"] for m in metrics] == [1], f"the step was not logged: {metrics}"
    first = drawn[0].received[0]
    for s, guarded in zip(drawn, result.rewards):
        assert len(s.received) == 1, f"{s.name} was called {len(s.received)} times in one step"
        call = s.received[0]
        assert call == first, f"{s.name} received other arguments than {drawn[0].name}: {call} != {first}"
        assert call["answer"] == [TRAIN_ROWS[row]["answer"] for row in call["row"]], f"{s.name} received {call['answer']}"
        assert guarded.failures == _failed_its_call(s, call["row"]), f"{s.name}: {guarded.failures} failures"
    return "accepted"


@bounded(TRAININGS)
@given(drawn=specs(behaves=True, returns=True, rows=len(TRAIN_ROWS)))
def test_a_real_step_survives_any_reward_counts_its_failures_and_gives_every_reward_the_same_rows(drawn, tiny,
                                                                                                 generated_inputs):
    judge(generated_inputs, "rewards in training", functools.partial(training_ends, tiny, drawn), classes_of(drawn),
          KNOWN_DEFECTS)

