"""The demo's data: arithmetic word problems generated from a seed, and a held-out set none of them repeats.

``load_builtin("arithmetic")`` is :func:`arithmetic_problems` with seed 0; the demo model never trained on
the held-out questions (scripts/train_demo_model.py removes them from its data).
"""

from __future__ import annotations

import random

_WORD_PROBLEMS = [
    ("{name} has {a} apples and buys {b} more. How many apples does {name} have now?", lambda a, b: a + b),
    ("{name} had {a} marbles and gave away {b}. How many marbles are left?", lambda a, b: a - b),
    ("A box holds {a} pencils. How many pencils are in {b} boxes?", lambda a, b: a * b),
    ("{name} reads {a} pages a day for {b} days. How many pages is that?", lambda a, b: a * b),
    ("There are {a} birds on a tree and {b} fly away. How many birds stay?", lambda a, b: a - b),
    ("{name} saves {a} dollars in May and {b} dollars in June. How much did {name} save?", lambda a, b: a + b),
]
_NAMES = ["Ana", "Ben", "Chen", "Dara", "Eli", "Femi", "Gus", "Hana", "Ivo", "Jun"]


def arithmetic_problems(n: int = 200, *, seed: int = 0) -> list[dict[str, str]]:
    """Arithmetic word problems with GSM8K-style answers (``... #### 42``), generated from a seed.

    >>> arithmetic_problems(1, seed=1)[0].keys()
    dict_keys(['question', 'answer'])
    """
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        template, solve = rng.choice(_WORD_PROBLEMS)
        a, b = rng.randint(2, 30), rng.randint(2, 12)
        a, b = max(a, b), min(a, b)
        result = solve(a, b)
        question = template.format(name=rng.choice(_NAMES), a=a, b=b)
        rows.append({"question": question, "answer": f"The result is {result}.\n#### {result}"})
    return rows


def heldout_arithmetic_problems(n: int = 200, *, seed: int = 1) -> list[dict[str, str]]:
    """``n`` arithmetic problems whose questions are not in the built-in training set (``load_builtin("arithmetic")``).

    For measuring a model trained on ``load_builtin("arithmetic")`` on questions it has not seen.

    >>> train = {row["question"] for row in arithmetic_problems()}
    >>> any(row["question"] in train for row in heldout_arithmetic_problems(50))
    False
    """
    if seed == 0:
        raise ValueError("heldout_arithmetic_problems(seed=0) would replay the training set; use another seed")
    seen = {row["question"] for row in arithmetic_problems()}
    rows = []
    for row in arithmetic_problems(4 * n, seed=seed):
        if row["question"] not in seen:
            seen.add(row["question"])
            rows.append(row)
        if len(rows) == n:
            return rows
    raise ValueError(f"heldout_arithmetic_problems: found only {len(rows)} new questions; ask for fewer than {n}")
