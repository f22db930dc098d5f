"""Code rewards grade in the parent, from the row's own tests, and train a model through GRPOTrainer."""

import functools
import json

import pytest

import rewards
from rewards import code_execution_reward, code_generation_reward
from rewards.code import AsyncCodeExecutionReward, CodeExecutionReward

SQUARE = "```python\ndef solution(x):\n    return x * x\n```"
ASSERTS = [{"assert": "solution(3) == 9"}, {"assert": "solution(-2) == 4"}, {"assert": "solution(5) == 26"}]
ECHO_SUM = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
IO = [{"input": "2 3\n", "output": "5"}, {"input": "1 1\n", "output": "2\n"}]


def test_asserts_and_stdin_tests_with_partial_credit():
    partial = CodeExecutionReward(partial_credit=True)
    assert partial(completions=[SQUARE, ECHO_SUM], test_cases=[ASSERTS, IO]) == [pytest.approx(4 / 3), 2.0]
    assert code_execution_reward(completions=[SQUARE, ECHO_SUM], test_cases=[ASSERTS, json.dumps(IO)]) == [0.0, 2.0]


def test_cheating_programs_get_no_credit():
    prints_expected = "```python\nprint('5')\nprint('solution(3) == 9 pass')\n```"
    exits_early = "```python\nimport sys\nsys.exit(0)\ndef solution(x):\n    return x * x\n```"
    overrides_assert = "```python\nimport builtins\nprint('0 pass')\n```"
    scores = code_execution_reward(completions=[prints_expected, exits_early, overrides_assert], test_cases=[ASSERTS[:1]] * 3)
    assert scores == [0.0, 0.0, 0.0]


def test_forged_reports_and_objects_equal_to_anything_get_no_credit():
    reads_its_source = (
        "```python\nimport re\nfor token in set(re.findall(r\"'([0-9a-f]{32})'\", open(__file__).read())):\n"
        "    for i in range(3):\n        print(token, i, 'pass')\n        print(token, i, 'value 9')\nraise SystemExit(0)\n```"
    )
    equals_anything = (
        "```python\nclass Anything:\n    def __eq__(self, other):\n        return True\n"
        "def solution(x):\n    return Anything()\n```"
    )
    reports_twice = (
        "```python\nimport atexit, re\ntoken = re.findall(r\"'([0-9a-f]{32})'\", open(__file__).read())[0]\n"
        "atexit.register(print, token, 0, 'value', 9)\ndef solution(x):\n    return 0\n```"
    )
    scores = code_execution_reward(completions=[reads_its_source, equals_anything, reports_twice], test_cases=[ASSERTS[:1]] * 3)
    assert scores == [0.0, 0.0, 0.0]
    in_process = [{"assert": "solution(3) > 8"}, {"assert": "assert solution(2) == 4"}]
    assert code_execution_reward(completions=[SQUARE], test_cases=[in_process]) == [2.0]


def test_stop_at_first_failure_and_rows_without_tests():
    stop = CodeExecutionReward(partial_credit=True, stop_at_first_failure=True)
    failing_first = [{"assert": "solution(3) == 0"}, {"assert": "solution(3) == 9"}]
    assert stop(completions=[SQUARE], test_cases=[failing_first]) == [0.0]
    assert code_execution_reward(completions=[SQUARE, "no code at all"], test_cases=[None, ASSERTS]) == [None, 0.0]
    with pytest.raises(ValueError, match="neither 'assert' nor 'output'"):
        code_execution_reward(completions=[SQUARE], test_cases=[[{"expected": 1}]])


def test_combined_code_reward_and_async_variant():
    assert code_generation_reward(completions=[SQUARE, "```python\ndef f(:\n```"], test_cases=[ASSERTS[:2]] * 2) == [2.7, 0.5]
    import asyncio

    from rewards.calling import is_async_reward  # TRL's is_async_callable where TRL has it (tests/test_reward_compat.py)

    concurrent = AsyncCodeExecutionReward()
    assert is_async_reward(concurrent) and concurrent.__name__ == "code_execution_reward"
    assert asyncio.run(concurrent(completions=[SQUARE, ECHO_SUM], test_cases=[ASSERTS[:2], IO])) == [2.0, 2.0]


def test_grpo_trainer_runs_with_code_execution_on_the_builtin_coding_set(tiny_model, tmp_path):
    from grpo_lite import load_builtin, prepare_dataset, read_metrics, train

    model, tokenizer = tiny_model
    tasks = prepare_dataset(load_builtin("code_tasks"), answer=None, system_prompt=None)
    assert len(tasks) == 20 and "test_cases" in tasks.column_names
    train(model, tokenizer, tasks, rewards.CODE_GENERATION_REWARDS, output_dir=tmp_path, preset="cpu-smoke",
          max_steps=2, num_generations=4, per_device_train_batch_size=4, max_completion_length=16)
    records = read_metrics(tmp_path)
    assert [r["step"] for r in records] == [1, 2]
    assert all(r["rewards/code_execution_reward/mean"] == 0.0 for r in records)  # a random model writes no passing code


def followed_by_square(execution, completions, **kwargs):
    """``execution`` on each completion with a correct squaring solution appended: a random model never
    writes code itself, so this is what makes programs really run inside the trainer's reward step."""
    from rewards.extract import completion_text

    return execution(completions=[completion_text(c) + "\n" + SQUARE for c in completions], **kwargs)


async def followed_by_square_async(execution, completions, **kwargs):
    from rewards.extract import completion_text

    return await execution(completions=[completion_text(c) + "\n" + SQUARE for c in completions], **kwargs)


@pytest.mark.parametrize(
    "reward",
    [functools.partial(followed_by_square, code_execution_reward), functools.partial(followed_by_square_async, AsyncCodeExecutionReward())],
    ids=["sync", "async"],
)
def test_programs_run_and_pass_inside_the_trainer(reward, tiny_model, tmp_path):
    from grpo_lite import load_builtin, prepare_dataset, read_metrics, train

    model, tokenizer = tiny_model
    square_task = load_builtin("code_tasks")[0]
    assert "squared" in square_task["question"]
    tasks = prepare_dataset([square_task] * 4, answer=None, system_prompt=None)
    train(model, tokenizer, tasks, [reward], output_dir=tmp_path, preset="cpu-smoke",
          max_steps=1, num_generations=4, per_device_train_batch_size=4, max_completion_length=8)
    name = reward.func.__name__
    assert read_metrics(tmp_path)[0][f"rewards/{name}/mean"] == 2.0


CHECKS_OF_EVERY_SHAPE = [
    {"assert": "set(solution([3, 1, 3])) == set([1, 3])"},
    {"assert": "solution([2, 2]) == [2]"},
    {"assert": "collections.Counter(solution([5, 5, 4])) == collections.Counter({4: 1, 5: 1})"},
    {"assert": "solution([10]) != [bin(10)]"},
    {"assert": "all(solution([i, i]) == [i] for i in range(4))"},
    {"assert": "list(Dedup().unique_sorted([3, 3])) == [3]"},
    {"assert": "list(pairs(3)) == [(0, 1), (1, 2)]"},
    {"assert": "isinstance(solution([1]), list) and LIMIT == 10"},
    {"assert": "assert solution([1, 1]) == [1], 'duplicates are removed'"},
]
DEDUP = """```python
LIMIT = 10
def solution(xs):
    return sorted(set(xs))
class Dedup:
    def unique_sorted(self, xs):
        yield from solution(xs)
def pairs(n):
    for i in range(n - 1):
        yield (i, i + 1)
```"""


def test_checks_of_every_shape_run_in_the_grader_with_the_programs_values():
    """Comprehensions, the grader's own builtins and modules, a class's methods, generators, the program's
    constants and an assert statement with its message: each check passes for a right program, and a wrong one
    (no deduplication, another constant) fails exactly the checks its mistakes reach."""
    assert code_execution_reward(completions=[DEDUP], test_cases=[CHECKS_OF_EVERY_SHAPE]) == [2.0]
    wrong = DEDUP.replace("return sorted(set(xs))", "return list(xs)").replace("LIMIT = 10", "LIMIT = 9")
    scores = CodeExecutionReward(partial_credit=True)(completions=[wrong] * len(CHECKS_OF_EVERY_SHAPE),
                                                      test_cases=[[case] for case in CHECKS_OF_EVERY_SHAPE])
    assert scores == [2.0, 0.0, 0.0, 2.0, 0.0, 0.0, 2.0, 0.0, 0.0]


def test_a_program_cannot_shadow_the_graders_builtins_nor_answer_with_objects():
    """The program's ``sorted`` and ``set`` stay in its process: the check uses the grader's. A value that is not
    plain data (an object equal to everything, an int subclass) can't be compared, so the check fails."""
    shadows = "```python\ndef sorted(xs):\n    return [1, 3]\nset = lambda xs: {1, 3}\ndef solution(xs):\n    return xs\n```"
    int_subclass = "```python\nclass Nine(int):\n    def __eq__(self, other):\n        return True\ndef solution(x):\n    return Nine(0)\n```"
    checks = [{"assert": "sorted(solution([3, 2])) == [1, 3]"}, {"assert": "set(solution([2])) == {1, 3}"}]
    assert code_execution_reward(completions=[shadows, int_subclass], test_cases=[checks, ASSERTS[:1]]) == [0.0, 0.0]
