"""Users' own reward functions score the same in the lab, in preview() and in train() as called directly, are
logged under TRL's names, and the run ends normally: trl.rewards as installed, and functions of the shapes in
TRL's docs, open-r1, Unsloth's GRPO notebooks and the recipe (tests/compat_rewards.py)."""

import functools

import compat_rewards as ext
import pytest
import trl.rewards
from datasets import Dataset
from stacks import newer_only

from grpo_lite import preview, read_metrics, train
from grpo_lite.monitor.samples import prompts_as_given
from grpo_lite.run.callbacks import RunCallback
from rewards import check_rewards
from rewards.calling import as_trl_completion, call_reward, is_async_reward
from rewards.combine import distinct, distinct_names, reward_name

SYSTEM = {"role": "system", "content": "Answer in <reasoning> and <answer> tags."}

CHAT_REWARDS = [
    # TRL's docs
    ext.token_count_reward, ext.think_answer_format_reward, ext.math_task_reward, ext.coding_task_reward,
    ext.async_nonempty_reward, ext.curriculum_reward,
    # trl.rewards, as installed (TRL before 0.24 has only the format and overlong rewards: grpo_lite/machine/stack.py)
    *[getattr(trl.rewards, name) for name in ("accuracy_reward", "think_format_reward") if hasattr(trl.rewards, name)],
    trl.rewards.get_soft_overlong_punishment(max_completion_len=8, soft_punish_cache=4),
    *([trl.rewards.get_repetition_penalty_reward(ngram_size=2, max_penalty=-1.0)] if hasattr(trl.rewards, "get_repetition_penalty_reward") else []),
    # open-r1
    ext.accuracy_reward, ext.len_reward, ext.get_cosine_scaled_reward(), ext.format_reward, ext.tag_count_reward,
    ext.reasoning_steps_reward,
    # Unsloth's notebooks
    ext.correctness_reward_func, ext.int_reward_func, ext.strict_format_reward_func, ext.soft_format_reward_func,
    ext.xmlcount_reward_func, ext.match_format_exactly, ext.match_format_approximately, ext.check_answer,
    ext.check_numbers,
    # the recipe
    ext.incremental_format_reward_func, ext.format_reward_func, ext.recipe_correctness_reward_func,
]
PLAIN_REWARDS = [ext.token_count_reward, ext.char_count_reward, ext.boxed_reference_reward, ext.async_nonempty_reward,
                 ext.logging_reference_reward, functools.partial(ext.boxed_reference_reward)]
OPEN_R1_MATH = [ext.accuracy_reward, ext.len_reward, ext.get_cosine_scaled_reward()]


def columns(i):
    return {"answer": str(2 * i), "solution": f"${2 * i}$", "ground_truth": str(2 * i), "task": ("math", "coding")[i % 2]}


def chat_dataset(n=8):
    return Dataset.from_list([{"prompt": [SYSTEM, {"role": "user", "content": f"What is {i} + {i}?"}], **columns(i)}
                              for i in range(n)])


def plain_dataset(n=8):
    return Dataset.from_list([{"prompt": f"What is {i} + {i}? ", **columns(i)} for i in range(n)])


WRITTEN = [  # completions a policy might write, right and wrong, well and badly formed
    "<reasoning>\n1 + 1 = 2\n</reasoning>\n<answer>\n2\n</answer>\n",
    "<think>\nStep 1: add\n</think>\n<answer>\n$\\boxed{2}$\n</answer>",
    "<think>1+1</think><answer>3</answer>",
    f"{ext.REASONING_END}{ext.SOLUTION_START}2{ext.SOLUTION_END}",
    "the the the answer is 2, def f(): pass",
    "",
]


def lab_rows(chat):
    rows = []
    for i, text in enumerate(WRITTEN * 2):
        q = i % 3
        prompt = [SYSTEM, {"role": "user", "content": f"What is {q} + {q}?"}] if chat else f"What is {q} + {q}? "
        rows.append({"prompt": prompt, "completion": [{"role": "assistant", "content": text}] if chat else text,
                     "completion_ids": list(range(len(text) % 11)), **columns(q)})
    return rows


def direct(func, rows, **extra):
    """What the function returns called by hand on these rows, as TRL would call it."""
    keys = [k for k in rows[0] if k not in ("prompt", "completion", "completion_ids")]
    return call_reward(func, prompts=[r["prompt"] for r in rows], completions=[r["completion"] for r in rows],
                       completion_ids=[r["completion_ids"] for r in rows], **{k: [r[k] for r in rows] for k in keys},
                       **extra)


def same(scores, expected):
    return [None if s is None else round(float(s), 6) for s in scores] == [None if s is None else round(float(s), 6) for s in expected]


@newer_only("async_reward_objects")
def test_the_calling_convention_agrees_with_trl_on_names_and_async():
    from trl.trainer.utils import get_callable_name, is_async_callable

    for func in CHAT_REWARDS + PLAIN_REWARDS:
        assert reward_name(func) == get_callable_name(func)
        assert is_async_reward(func) == is_async_callable(func), reward_name(func)


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "plain"])
def test_the_lab_scores_each_function_as_a_direct_call(chat, capsys):
    funcs = CHAT_REWARDS if chat else PLAIN_REWARDS
    rows = lab_rows(chat)
    report = check_rewards(funcs, rows)
    assert not [p for p in report.problems if p.kind in ("exception", "wrong_length", "not_a_number")], report.problems
    # TRL's name for each (reward_name: get_callable_name or __name__, by the installed TRL), the second of one name
    # numbered on, as train() logs them
    assert report.functions == distinct_names(funcs) == distinct([reward_name(f) for f in funcs])
    assert len(set(report.functions)) == len(funcs)
    if chat and hasattr(trl.rewards, "accuracy_reward"):  # TRL's accuracy_reward (TRL 0.24 on) and open-r1's share a name
        assert len(funcs) > len({reward_name(f) for f in funcs})
    from transformers import TrainerState

    for func, name in zip(funcs, report.functions):
        expected = direct(func, rows, trainer_state=TrainerState(), log_metric=lambda *a: None, log_extra=lambda *a: None)
        assert same(report.scores(name), expected), name
    if not chat:
        assert report.logged_metrics["accuracy"] and report.logged_columns["golden_answer"][:3] == ["0", "2", "4"]


class BatchLog(RunCallback):
    """Each step's batch as TRL scored it: its prompts, completions and each reward's scores (``trainer._logs``)."""

    def __init__(self):
        self.batches = []

    def attach(self, trainer):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        logs = self.trainer._logs
        prompts = prompts_as_given(self.trainer, list(logs["prompt"]))  # TRL before 1.15 logs texts
        completions = [as_trl_completion(p, c) if isinstance(c, str) else c for p, c in zip(prompts, logs["completion"])]
        self.batches.append({"prompts": prompts, "completions": completions,
                             "rewards": {name: list(v) for name, v in logs["rewards"].items()}})


def batch_rows(batch, dataset):
    """The batch's completions with their dataset row's columns, found by prompt."""
    by_prompt = {str(row["prompt"]): row for row in dataset}
    rows = []
    for prompt, completion in zip(batch["prompts"], batch["completions"]):
        row = by_prompt[str(prompt)]
        rows.append({**{k: v for k, v in row.items() if k != "prompt"}, "prompt": prompt, "completion": completion,
                     "completion_ids": None})
    return rows


RUN = dict(preset="cpu-smoke", num_generations=4, per_device_train_batch_size=4, max_completion_length=8,
           max_steps=3, dashboard=False)
READS_TOKEN_IDS = {"token_count_reward", "soft_overlong_punishment_reward", "repetition_penalty_reward"}  # TRL's log keeps no token ids
READS_STEP = {"curriculum_reward"}  # scored at the step it ran


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "plain"])
def test_train_logs_each_function_under_a_name_of_its_own_with_the_scores_of_a_direct_call(chat, tiny_model, tmp_path):
    model, tokenizer = tiny_model
    funcs = CHAT_REWARDS if chat else PLAIN_REWARDS
    dataset = chat_dataset() if chat else plain_dataset()
    batches = BatchLog()
    train(model, tokenizer, dataset, funcs, output_dir=tmp_path, callbacks=[batches], **RUN)  # default reward_timeout

    records = read_metrics(tmp_path)
    assert [r["step"] for r in records] == [1, 2, 3]
    names = distinct([reward_name(f) for f in funcs])  # TRL's names; two of one name apart, each with its curve
    assert all(f"rewards/{name}/mean" in records[-1] for name in names)
    assert set(batches.batches[0]["rewards"]) == set(names)
    for batch in batches.batches:
        rows = batch_rows(batch, dataset)
        for func, name in zip(funcs, names):
            if name in READS_TOKEN_IDS | READS_STEP:
                continue
            logged = [None if s != s else s for s in batch["rewards"][name]]  # TRL keeps None as NaN
            expected = direct(func, rows, log_metric=lambda *a: None, log_extra=lambda *a: None)
            assert same(logged, expected), name


def test_open_r1_math_rewards_train_with_the_default_time_limit_and_score_as_plain_trl(tiny_model, tmp_path, recwarn):
    # open-r1's rewards call math-verify's parse/verify with their default timeouts, which use signal.alarm
    # (math_verify/utils.py): moved off the main thread they raise, and the run stopped with RewardFailure.
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = tiny_model
    dataset = chat_dataset()
    batches = BatchLog()
    train(model, tokenizer, dataset, OPEN_R1_MATH, output_dir=tmp_path, callbacks=[batches], **RUN)
    assert not [w for w in recwarn if "threaded environment" in str(w.message)]

    plain = GRPOTrainer(model=model, reward_funcs=OPEN_R1_MATH, train_dataset=dataset, processing_class=tokenizer,
                        args=GRPOConfig(output_dir=str(tmp_path / "plain"), use_cpu=True, bf16=False, report_to="none",
                                        num_generations=4, per_device_train_batch_size=4))
    names = [reward_name(f) for f in OPEN_R1_MATH]
    for batch in batches.batches:
        rows = batch_rows(batch, dataset)
        inputs = [{k: v for k, v in row.items() if k not in ("completion", "completion_ids")} for row in rows]
        trl_scores = plain._calculate_rewards(inputs, batch["prompts"], batch["completions"], [[0]] * len(rows))
        for i, name in enumerate(names):
            logged = [None if s != s else s for s in batch["rewards"][name]]
            assert same(logged, [None if s != s else s for s in trl_scores[:, i].tolist()]), name


def test_preview_scores_each_function_as_a_direct_call(tiny_model):
    model, tokenizer = tiny_model
    report = preview(model, tokenizer, chat_dataset(4), CHAT_REWARDS, n_prompts=2, num_generations=4, max_completion_length=8,
                     greedy=False)
    from transformers import TrainerState

    for func, name in zip(CHAT_REWARDS, distinct_names(CHAT_REWARDS)):
        expected = direct(func, report.rows, trainer_state=TrainerState(), log_metric=lambda *a: None,
                          log_extra=lambda *a: None)
        assert same(report.lab.scores(name), expected), name


def test_off_the_main_thread_rewards_run_unchanged_without_a_limit_and_the_run_says_so_once(tiny_model, tmp_path, caplog):
    # A Python signal handler runs on the main thread only, so a reward there cannot be cut off in place; moving it
    # would break math-verify's signal timeouts. Unchanged wins: the run trains, and says so once, at the start.
    import threading

    model, tokenizer = tiny_model
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(
        train(model, tokenizer, chat_dataset(), [ext.format_reward, ext.async_nonempty_reward], output_dir=tmp_path, **RUN)))
    with caplog.at_level("WARNING", logger="grpo_lite"):
        worker.start()
        worker.join()
    said = [r.getMessage() for r in caplog.records if "reward_timeout does not apply" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("reward_timeout does not apply to 'format_reward': it is called off the main thread")
    assert outcome and [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 3]


def test_grpo_lite_score_awaits_an_async_reward_named_by_module_path(tmp_path, capsys, monkeypatch):
    import json

    from grpo_lite.launch.cli import main

    rows = lab_rows(chat=False)
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.chdir(tmp_path)
    names = "compat_rewards:async_nonempty_reward,compat_rewards:boxed_reference_reward"
    assert main(["score", "--rewards", names, "--data", "samples.jsonl"]) == 0  # report.ok: no crash, only scores
    out = capsys.readouterr().out
    assert "Reward lab: 12 rows x 2 functions" in out and "coroutine" not in out and "wrong_length" not in out
