"""The user-code contract (grpo_lite/guards/user_code.py, docs/errors.md) shown through real runs: a tool that sleeps
forever is cut at its limit and the run goes on; an environment's get_reward returning NaN is named as a reward returning
NaN is; a game server killed mid-run ends the run as one grpo-lite line, and the run resumes from its folder once the
server is back; a reward's error names its row under ``grpo-lite train``. And what is knowable before the model loads is
refused then, from Python and from run YAMLs alike: a ``reset`` needing a column the rows lack, two tools of one name, an
undocumented tool, an environment with nothing to call, held-out rows that evaluation cannot judge.
"""

import gc
import re
import threading
from pathlib import Path

import pytest
import yaml
from families import TOOL_CALLING
from games import EPISODE_STEPS, NumberGuess, calls_reward, guess
from stacks import newer_only

from grpo_lite import evaluate, load_model, prepare_dataset, preview, read_metrics, train
from grpo_lite.data.prepare import DatasetError
from grpo_lite.errors import UserError
from grpo_lite.guards.user_code import UserCodeError
from grpo_lite.launch.cli import main
from grpo_lite.launch.recipe import read_recipe, run_recipe
from grpo_lite.machine import stack
from grpo_lite.monitor.samples import read_samples
from grpo_lite.run.settings import ConfigError
from rewards import check_rewards

STEPS = dict(preset="cpu-smoke", max_steps=2, num_generations=4, per_device_train_batch_size=4, max_completion_length=192,
             dashboard=False)


def game_rows(n: int = 8, **more):
    return prepare_dataset([{"question": f"Find my number from 1 to {9 - i % 3}.", "answer": "5", **more} for i in range(n)],
                           system_prompt=None)


@pytest.fixture
def tools_template(tiny_model):
    """The session's tiny model, its chat template Qwen2.5's, which renders tools (TRL reads its tool calls)."""
    model, tokenizer = tiny_model
    tokenizer.chat_template = TOOL_CALLING.chat_template()
    return model, tokenizer


@pytest.mark.slow
@newer_only("tools")
def test_a_tool_that_sleeps_forever_is_cut_at_its_limit_the_episode_and_the_log_say_so_and_the_run_goes_on(
        tool_caller, tmp_path, capsys):
    calls = []

    def sleepy_guess(number: int) -> str:
        """Guess the secret number.

        Args:
            number: The number guessed, from 1 to 9.
        """
        calls.append(number)
        if len(calls) == 1:
            threading.Event().wait()  # forever: nothing sets it
        return guess(number)

    sleepy_guess.__name__ = "guess"  # the name the model was taught to call
    model, tokenizer = load_model(str(tool_caller), lora_rank=8)
    train(model, tokenizer, game_rows(), [calls_reward], output_dir=tmp_path, tools=[sleepy_guess], tool_timeout=1,
          max_tool_calling_iterations=1, **STEPS)
    assert [record["step"] for record in read_metrics(tmp_path)] == [1, 2]  # the run went on
    err = capsys.readouterr().err
    assert "time limits: 600 s a reward call (a batch) (reward_timeout), 1 s a tool call or environment reset (tool_timeout)" in err
    assert re.search(r"grpo-lite warning: tool 'guess' failed \(guess\(number=\d\)\): it did not return within "
                     r"tool_timeout=1 s; the model is told the call failed and the episode goes on\. .*raise tool_timeout", err)
    assert "in sleepy_guess" in err and "threading.Event().wait()" in err  # where it was stuck
    told = [row for row in read_samples(tmp_path) if any(turn.get("result") == "{'error': 'guess did not return within "
                                                         "tool_timeout=1 s'}" for turn in row["episode"])]
    assert len(told) == 1 and told[0]["ended"] == "tool error", [row["episode"] for row in read_samples(tmp_path)]
    assert len(calls) > 1  # the calls after it were answered


@newer_only("environment_factory")
def test_an_environment_whose_get_reward_returns_nan_is_named_as_a_reward_returning_nan_is(tools_template, tmp_path, capsys):
    class Drifting(NumberGuess):
        def get_reward(self) -> float:
            return float("nan")

    def nan_reward(completions, **kwargs):
        return [float("nan")] * len(completions)

    model, tokenizer = tools_template
    train(model, tokenizer, game_rows(4, secret=5), [calls_reward], output_dir=tmp_path, environment_factory=Drifting,
          **{**STEPS, "max_steps": 1, "max_completion_length": 8})
    err = capsys.readouterr().err
    said = re.search(r"grpo-lite warning: environment Drifting's get_reward failed at step 1 on a batch of 4 completions "
                     r"\(the first: [^\n]*\); this batch scores None\.\nenvironment Drifting's get_reward returned nan for the "
                     r"episode of the row 'Find my number from 1 to \d\.' \([^)]*secret 5[^)]*\); (return a finite float)", err)
    assert said, err
    lab = check_rewards([nan_reward], [{"completion": "a"}])  # the lab's words for a reward that returns NaN
    assert "returned nan for completion 0; return a finite float" in lab.problems[0].message
    assert read_metrics(tmp_path)[0]["rewards/Drifting/mean"] is None  # the batch scored None: TRL skipped it


@pytest.mark.slow
@newer_only("environment_factory")
def test_a_game_server_killed_mid_run_ends_the_run_as_one_grpo_lite_line_and_it_resumes_once_the_server_is_back(
        tmp_path, monkeypatch, capsys):
    from test_http_environment import started

    servers = started(4, lives=1)  # each serves the first reset of its rollout, then dies with the next
    ports = [server.server_address[1] for server in servers]
    (tmp_path / "served.py").write_text(
        "from grpo_lite.environments.http_env import http_environment\n\n"
        f"Game = http_environment({[server.url for server in servers]!r}, action_field='number', name='NumberServer', "
        "timeout_s=5)\n")
    model = TOOL_CALLING.build(tmp_path)
    recipe = {"model": str(model), "load": {"lora_rank": 8}, "dataset": {"path": "rows.jsonl", "prepared": True},
              "rewards": ["games:called_act"], "environment_factory": "served.py:Game", "preset": "cpu-smoke",
              "overrides": {key: EPISODE_STEPS[key] for key in ("num_generations", "per_device_train_batch_size",
                                                                 "max_tool_calling_iterations")}
              | {"max_steps": 3, "max_completion_length": 16, "save_steps": 1}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(recipe))
    game_rows(4).to_json(str(tmp_path / "rows.jsonl"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # games.py, for the reward

    assert main(["train", "run.yaml", "--output-dir", "out"]) == 1
    lines = capsys.readouterr().err.rstrip().splitlines()
    assert lines[-2] == "grpo-lite: saved the adapter and tokenizer to out", lines[-6:]
    assert re.fullmatch(r"grpo-lite: environment NumberServer's reset failed 3 calls in a row; training stopped at step 2 "
                        r"and a checkpoint was saved in out: fix it \(start a server it calls\), then resume from there .*"
                        r"Last error: environment NumberServer's reset failed on the row [^\n]*: ServerFailure: "
                        r"(no answer from|http://127\.0\.0\.1:\d+/reset broke off)[^\n]*http://127\.0\.0\.1:\d+/reset[^\n]*",
                        lines[-1]), lines[-1]
    assert not any("Traceback" in line for line in lines)
    assert (tmp_path / "out" / "checkpoint-2").is_dir() and [r["step"] for r in read_metrics(tmp_path / "out")] == [1, 2]

    gc.collect()  # the first run's environments give their servers back
    back = started(4, ports=ports)
    try:
        assert main(["train", "run.yaml", "--output-dir", "out", "--resume"]) == 0
    finally:
        for server in back:
            server.shutdown()
            server.server_close()
    assert [r["step"] for r in read_metrics(tmp_path / "out")] == [1, 2, 3]
    assert sum(server.resets for server in back) == 4  # step 3's rollouts, each on a server of its own


def test_a_rewards_error_under_grpo_lite_train_names_its_row(tmp_path, monkeypatch, capsys):
    (tmp_path / "picky.py").write_text("def picky_reward(completions, answer, **kwargs):\n"
                                       "    return [1.0 / (int(a) - 4) for a in answer]\n")
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(1, 3)]
    prepare_dataset(rows, system_prompt=None).to_json(str(tmp_path / "rows.jsonl"))
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({
        "model": "tiny", "dataset": {"path": "rows.jsonl", "prepared": True}, "rewards": ["picky:picky_reward"],
        "preset": "cpu-smoke", "overrides": {"max_steps": 1, "num_generations": 2, "per_device_train_batch_size": 4,
                                            "max_completion_length": 4}}))
    monkeypatch.chdir(tmp_path)
    assert main(["train", "run.yaml", "--output-dir", "out"]) == 0  # one failure: the batch scored None, the run went on
    err = capsys.readouterr().err
    # rows 2 + 2 (answer 4) and 1 + 1, two completions each, in the order TRL sampled them: the row is the one answering 4
    assert re.search(r"grpo-lite warning: reward function 'picky_reward' failed at step 1 on completion [0-3] of 4, the row "
                     r"'What is 2 \+ 2\?' \([^)]*answer '4'[^)]*\); this batch scores None\.\nTraceback[^\n]*\n  File [^\n]*picky\.py",
                     err), err
    assert "ZeroDivisionError: float division by zero" in err


@newer_only("rollout_func")
def test_preview_with_a_rollout_function_that_returns_no_batch_is_refused_naming_what_it_lacks(tools_template):
    def play(prompts, trainer):
        return {"prompt_ids": [[5, 6]] * len(prompts)}

    model, tokenizer = tools_template
    with pytest.raises(UserCodeError, match=r"^preview: rollout function 'play' failed on a batch of 2 prompts \(the first: "
                                            r"'Find my number from 1 to 9\.'\): its dict has no 'completion_ids', 'logprobs' "
                                            r"\(it has 'prompt_ids'\)\. Fix the rollout function\.$"):
        preview(model, tokenizer, game_rows(1), [calls_reward], rollout_func=play, n_prompts=1, num_generations=2,
                preset="cpu-smoke", max_completion_length=8)


# --- what is knowable before the model loads --------------------------------------------------------------------------

class Keyed(NumberGuess):
    def reset(self, secret, **row) -> None:
        self.secret = int(secret)


class Silent:
    """A game with nothing for the model to call."""

    def reset(self, **row) -> None:
        return None

    def get_reward(self) -> float:
        return 0.0


def same_name(number: int) -> str:
    """Guess too.

    Args:
        number: The guess.
    """
    return "lower"


same_name.__name__ = "guess"


@newer_only("environment_per_row")
@pytest.mark.parametrize("given, refusal", [
    ({"environment_factory": Keyed}, r"environment_factory makes a Keyed, whose reset\(secret, \*\*row\) needs column 'secret', "
                                     r"which the dataset lacks \(its columns: [a-z, ]*\): TRL calls reset\(\*\*row\)"),
    ({"environment_factory": {"numbers": Keyed}, "with_environment_column": True},
     r"environment_factory\['numbers'\] makes a Keyed, whose reset\(secret, \*\*row\) needs column 'secret'"),
    ({"tools": [guess, same_name]}, r"tools\[0\] and tools\[1\] share the name 'guess': TRL calls a tool by its name"),
    ({"tools": [same_name], "environment_factory": NumberGuess}, r"tools\[0\] and NumberGuess.guess share the name 'guess'"),
    ({"environment_factory": Silent}, r"makes a Silent, which has no public method for the model to call"),
], ids=["a reset column the rows lack", "the same in a dict of environments", "two tools of one name",
        "a tool named as an environment's", "an environment with no tool"])
def test_what_trl_would_meet_inside_its_trainer_is_refused_before_it(given, refusal, tools_template, tmp_path):
    model, tokenizer = tools_template
    given = dict(given)
    rows = game_rows(4, environment="numbers") if given.pop("with_environment_column", False) else game_rows(4)
    with pytest.raises(ConfigError, match=refusal):
        train(model, tokenizer, rows, [calls_reward], output_dir=tmp_path / "run", **given, **STEPS)
    assert not (tmp_path / "run").exists()


def test_a_run_yamls_undocumented_or_clashing_tool_is_refused_before_the_model_loads(tmp_path):
    (tmp_path / "tools.py").write_text(
        "def undocumented(number: int) -> str:\n    return str(number)\n\n\n"
        "def guess(number: int) -> str:\n    \"\"\"Guess.\n\n    Args:\n        number: The guess.\n    \"\"\"\n    return ''\n")
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({
        "model": "tiny", "dataset": {"builtin": "arithmetic"}, "rewards": ["exact_match_reward"], "preset": "cpu-smoke",
        "tools": ["tools.py:undocumented", "tools.py:guess", "tools.py:guess"]}))
    settings = read_recipe(tmp_path / "run.yaml")
    if (lacking := stack.lacking("tools")) is not None:  # the T4 stack: refused naming the stack that has tools
        assert [p for p in settings.problems() if "tools" in p] == [f"{lacking}: train on the latest stack (requirements/"
                                                                   f"lock.txt: TRL {stack.pinned(stack.LOCK_STACK)['trl']}, transformers "
                                                                   f"{stack.pinned(stack.LOCK_STACK)['transformers']})"]
    else:
        assert settings.problems() == [
            "tools[0] (undocumented) cannot be described to the model: Cannot generate JSON schema for undocumented because "
            "it has no docstring! Give every argument a type hint and the function a Google-style docstring with an 'Args:' "
            "line for each argument (transformers' get_json_schema reads them)",
            "tools[1] and tools[2] share the name 'guess': TRL calls a tool by its name and keeps the last of one name, so "
            "the model could never call the others; give each tool a name of its own"]
    with pytest.raises(ConfigError, match=r"^the run: tools"):
        run_recipe(settings, output_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()  # nothing was written, the tiny model not even built


class Unscored(NumberGuess):
    get_reward = None  # TRL reads get_reward among the class's functions: this class has none


def test_evaluate_refuses_rows_it_cannot_judge_before_playing_any(tmp_path):
    rows = game_rows(2).remove_columns("answer")
    unjudged = (r"^evaluate: the dataset has no 'answer' column \(columns: [a-z, ]*\), which accuracy is judged by: .*pass "
                r"correctness=.*get_reward\(\) scores them")
    with pytest.raises(DatasetError, match=unjudged):
        evaluate(None, None, rows, progress=None)  # no model: had anything been generated, this would be an AttributeError
    with pytest.raises(UserError) as refused:
        evaluate(None, None, rows, environment_factory=Unscored, progress=None)
    if (lacking := stack.lacking("environment_factory")) is not None:  # the T4 stack: no environments, said first
        assert str(refused.value).startswith(f"{lacking}: train on the latest stack")
    else:  # episodes played in environments that do not score them cannot be judged either
        assert re.match(unjudged, str(refused.value)), str(refused.value)
    with pytest.raises(UserError) as refused:
        evaluate(None, None, rows, [calls_reward, "soft_xml_format_reward"], environment_factory=NumberGuess,
                 correctness=lambda completions, solution, **kwargs: [0.0] * len(completions), progress=None)
    if (lacking := stack.lacking("environment_factory")) is not None:  # the T4 stack: no environments, said first
        assert str(refused.value).startswith(f"{lacking}: train on the latest stack")
    else:  # a correctness reading a column the rows lack: refused before any episode
        assert "needs column 'solution', which the dataset lacks" in str(refused.value)


@newer_only("environment_factory")
def test_evaluate_judges_rows_without_an_answer_by_what_their_environment_pays(tools_template):
    model, tokenizer = tools_template
    report = evaluate(model, tokenizer, game_rows(2).remove_columns("answer"), [], environment_factory=NumberGuess,
                      max_completion_length=8, progress=None)
    # the untaught model never guesses: no environment pays, and none failed
    assert (report.n, report.accuracy, report.mean_rewards) == (2, 0.0, {"NumberGuess": 0.0})
