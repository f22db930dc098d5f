"""Each reward scores its own copy of what it is given: an edit one reward makes to the completions, the prompts or a
column reaches no other reward, no score, no log (samples.jsonl) and no row of the reward lab.

TRL hands every reward the same lists and logs them after the rewards ran (trl/trainer/grpo_trainer.py,
``_calculate_rewards`` and ``_logs``); the reward guard (training) and ``call_reward`` (the lab, evaluation, preview)
give each call a copy (rewards.calling.reward_arguments).
"""

import asyncio
import copy
import inspect
import json

import pytest

from grpo_lite import prepare_dataset, train
from grpo_lite.guards.user_code import guard
from rewards import check_rewards
from rewards.calling import private_copy


def _edit_content(a):
    a["completions"][0][0]["content"] = "x"


def _clear_completions(a):
    a["completions"].clear()


def _append_completion(a):
    a["completions"].append([{"role": "assistant", "content": "extra"}])


def _replace_message(a):
    a["completions"][1][0] = {"role": "assistant", "content": "replaced"}


def _edit_prompt(a):
    a["prompts"][0][-1]["content"] = "edited"


def _drop_system(a):
    a["prompts"][0].pop(0)


def _edit_column(a):
    a["answer"][0] = "edited"


def _clear_column(a):
    a["answer"].clear()


def _edit_nested_column(a):
    a["test_cases"][0][0]["output"] = "edited"


def _edit_token_ids(a):
    a["completion_ids"][0].append(-1)


EDITS = [_edit_content, _clear_completions, _append_completion, _replace_message, _edit_prompt, _drop_system, _edit_column,
         _clear_column, _edit_nested_column, _edit_token_ids]
IDS = [edit.__name__.strip("_") for edit in EDITS]


def batch():
    """A batch as TRL hands it to rewards: chat prompts and completions, token ids, columns repeated per completion."""
    prompts = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"What is {i} + {i}?"}] for i in (1, 1, 2)]
    return dict(prompts=prompts, completions=[[{"role": "assistant", "content": c}] for c in ("2", "3", "4")],
                completion_ids=[[50], [51], [52]], answer=["2", "2", "4"],
                test_cases=[[{"input": "1", "output": "2"}], [{"input": "1", "output": "2"}], [{"input": "2", "output": "4"}]])


def vandal_and_witness(edit, seen):
    """A reward that makes ``edit`` to its arguments and scores, and one after it that records what it was given."""

    def vandal(**arguments):
        edit(arguments)
        return [0.0] * 3

    def witness(**arguments):
        seen.append({key: arguments[key] for key in batch()})
        return [1.0] * len(arguments["completions"])

    return vandal, witness


@pytest.mark.parametrize("edit", EDITS, ids=IDS)
def test_in_training_an_edit_reaches_neither_the_next_reward_nor_the_batch_trl_logs(edit):
    seen = []
    vandal, witness = vandal_and_witness(edit, seen)
    given = batch()
    assert guard(vandal)(**given) == [0.0] * 3
    assert guard(witness)(**given) == [1.0] * 3
    assert seen == [batch()] and given == batch()


@pytest.mark.parametrize("edit", EDITS, ids=IDS)
def test_async_rewards_run_together_each_on_its_own_copy(edit):
    seen = []
    vandal, witness = vandal_and_witness(edit, seen)

    async def async_vandal(**arguments):
        return vandal(**arguments)

    async def async_witness(**arguments):
        await asyncio.sleep(0)  # the vandal runs in between, as TRL gathers them
        return witness(**arguments)

    given = batch()

    async def called(reward):  # awaited where the installed TRL awaits the guard, else run to its end by it
        scores = guard(reward)(**given)
        return await scores if inspect.isawaitable(scores) else scores

    async def both():
        return await asyncio.gather(called(async_witness), called(async_vandal))

    assert asyncio.run(both()) == [[1.0] * 3, [0.0] * 3]
    assert seen == [batch()] and given == batch()


@pytest.mark.parametrize("edit", EDITS, ids=IDS)
def test_in_the_reward_lab_an_edit_reaches_neither_the_next_reward_nor_the_rows(edit):
    seen = []
    vandal, witness = vandal_and_witness(edit, seen)
    given = batch()
    rows = [{"prompt": p, "completion": c, "completion_ids": i, "answer": a, "test_cases": t}
            for p, c, i, a, t in zip(*given.values())]
    kept = copy.deepcopy(rows)
    report = check_rewards([vandal, witness], rows)
    assert report.ok and report.scores("witness") == [1.0] * 3
    assert seen == [batch()] and rows == kept
    assert [row["completion"] for row in report.rows] == ["2", "3", "4"]


def test_a_copy_shares_nothing_that_can_change_and_keeps_every_value():
    value = {"a": [1, "x", None, 2.5, (3, [4])], "b": ({"c": b"d"},), "e": [[True], []]}
    copied = private_copy(value)
    assert copied == value
    assert copied["a"] is not value["a"] and copied["a"][4][1] is not value["a"][4][1]
    assert copied["b"][0] is not value["b"][0] and copied["e"][0] is not value["e"][0]
    assert type(copied["a"][4]) is tuple  # each container keeps its type


def test_a_run_logs_and_scores_what_the_model_wrote_whatever_a_reward_edits(tiny_model, tmp_path):
    """Through the real GRPOTrainer: a reward that rewrites the completions, the prompts and a column (one row's gold
    answer missing, as pandas reads an empty cell) comes first; the reward after it and samples.jsonl see the batch as
    the model and the data gave it, the missing gold as None."""
    pandas = pytest.importorskip("pandas")
    model, tokenizer = tiny_model
    golds = {"What is 0 + 0?": "0", "What is 1 + 1?": None, "What is 2 + 2?": "4", "What is 3 + 3?": "6"}
    frame = pandas.DataFrame({"question": list(golds), "answer": ["0", float("nan"), "4", "6"]})
    dataset = prepare_dataset(frame, system_prompt=None)
    seen = []

    def vandal(completions, prompts, answer, **kwargs):
        for completion in completions:
            completion[0]["content"] = "edited"
        prompts[0].clear()
        answer[:] = ["edited"] * len(answer)
        return [0.0] * len(completions)

    def witness(completions, prompts, answer, **kwargs):
        seen.append(([c[0]["content"] for c in completions], private_copy(prompts), list(answer)))
        return [float(len(c[0]["content"])) for c in completions]

    # one step of 4 prompts x 2 completions: every row is in the batch
    result = train(model, tokenizer, dataset, [vandal, witness], output_dir=tmp_path, preset="cpu-smoke", max_steps=1,
                   num_generations=2, per_device_train_batch_size=8, max_completion_length=6, beta=0.0, dashboard=False)
    assert [r.failures for r in result.rewards] == [0, 0] and len(seen) == 1
    texts, prompts, answers = seen[0]
    assert "edited" not in texts and sorted({p[-1]["content"] for p in prompts}) == sorted(golds)
    assert [golds[p[-1]["content"]] for p in prompts] == answers  # "1 + 1" has None, not "nan"
    samples = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert [s["completion"] for s in samples] == texts
    assert [s["prompt"] for s in samples] == prompts
    assert [s["rewards"]["witness"] for s in samples] == [float(len(t)) for t in texts]
