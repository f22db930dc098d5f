"""What the generated-input tests (tests/test_generated_*.py) share: how many inputs a test makes, how an input's end is
judged and counted, and a run carried up to TRL's trainer without training.

Every generated input ends one of two ways: refused with a UserError that names the thing (the setting, the column and
row, the file, the reward function, the folder), or accepted with what was given reaching its destination as given.
Anything else fails the test: an exception of another kind (a traceback from a library), an accepted value that arrives
changed (:class:`SilentChange`), a check that fails (a refusal that does not say what to change, a file lost). An input of
a class a module lists in its ``KNOWN_DEFECTS`` (a defect found and not fixed yet) that ends otherwise is counted as a
known defect, not failed; the summary says how often each was met.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterable

import pytest
from hypothesis import HealthCheck, settings

from grpo_lite.training import trainer

# Inputs per test, the same ones each run (derived from the test and the project's modules loaded): the bound keeps the
# fast loop fast; GRPO_LITE_GENERATED_EXAMPLES=3000 GRPO_LITE_GENERATED_SEEDED=0 explores further, new inputs each run.
EXAMPLES = int(os.environ.get("GRPO_LITE_GENERATED_EXAMPLES", "100"))
# Inputs that train for real (one step of the tiny model, about a second each), per test that trains.
TRAININGS = int(os.environ.get("GRPO_LITE_GENERATED_TRAININGS", "4"))


def bounded(examples: int = EXAMPLES):
    """Hypothesis settings for a generated-input test: ``examples`` inputs, no deadline, nothing remembered between runs."""
    return settings(max_examples=max(examples, 1), deadline=None, database=None,
                    derandomize=os.environ.get("GRPO_LITE_GENERATED_SEEDED", "1") == "1",
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class SilentChange(AssertionError):
    """An accepted input that arrived as something other than what was given."""


def same(a, b) -> bool:
    """Equal and of one type, all the way down: True is not 1, 1 is not 1.0, NaN is NaN."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and (a == b or a != a and b != b)


def is_missing(value) -> bool:
    """A missing value in any of its spellings: None, NaN (float or numpy), pandas' NA and NaT."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    import pandas as pd

    return value is pd.NA or value is pd.NaT or (hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0 and pd.isna(value))


def judge(counts, kind: str, check: Callable[[], str], classes: Iterable[str] = (), known: dict[str, str] | None = None):
    """Run ``check`` (it returns ``"refused"`` or ``"accepted"``) and count how the input of ``kind`` ended. Anything
    else fails the test, unless the input is of a class in ``known`` (a module's KNOWN_DEFECTS): counted as that."""
    defects = sorted(set(classes) & set(known or {}))
    counts.count(kind, "generated")
    try:
        ended = check()
    except Exception as failure:
        if defects:
            counts.count(kind, "known defects")
            counts.met(defects)
            return "known defect"
        counts.count(kind, "silent changes" if isinstance(failure, SilentChange) else
                     "failed checks" if isinstance(failure, AssertionError) else "tracebacks")
        raise
    counts.count(kind, ended)
    return ended


def refused_naming(error: BaseException, *names: str) -> str:
    """``"refused"`` when ``error`` is a UserError whose message names one of ``names``; any other exception is raised
    again, a traceback."""
    from grpo_lite.errors import UserError

    if not isinstance(error, UserError):
        raise error
    assert any(str(name) in str(error) for name in names), f"refused without naming {' or '.join(map(repr, names))}: {error}"
    return "refused"


class Reached(Exception):
    """The run got as far as building TRL's trainer: every check passed, its GRPOConfig was built, run.yaml written."""


@contextlib.contextmanager
def up_to_the_trainer(captured: dict):
    """train() for real up to TRL's trainer, which is not built: what it would get (the model, its dataset, the guarded
    rewards, the GRPOConfig) goes into ``captured`` and :class:`Reached` is raised. The process's environment is put
    back afterwards: transformers 4's TrainingArguments writes accelerate's settings into it as it is built
    (transformers/training_args.py, ``ACCELERATE_DYNAMO_BACKEND`` from torch_compile_backend), and the next input's
    GRPOConfig would read them."""
    environment = dict(os.environ)

    def built(model, tokenizer, dataset, rewards, config, callbacks, **options):  # options: the time limit, tools, ...
        captured.update(model=model, dataset=dataset, rewards=rewards, config=config)
        raise Reached

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trainer, "grpo_trainer", built)
        try:
            yield patch
        finally:
            os.environ.clear()
            os.environ.update(environment)
