"""Tools, environments and rollout functions through train() (grpo_lite/training/rollouts.py).

On a stack without one, train() refuses it before the trainer is built, naming the releases that have it; a definition
TRL could not run is refused by name, with the fix. On the latest stack a tiny model taught to call the game's tool
(tests/games.py) trains two steps with each, and samples.jsonl holds each rollout as an episode, turn by turn.
"""

import functools
import re
import shutil
from pathlib import Path

import pytest
import yaml
from families import TOOL_CALLING
from games import LetterGuess, NumberGuess, calls_reward, guess, play_number_guess
from packaging.version import Version
from stacks import newer_only

from grpo_lite import evaluate, load_model, prepare_dataset, preview, read_metrics, show_run, train
from grpo_lite.data.prepare import prompt_lengths
from grpo_lite.evaluation.episodes import episode_findings
from grpo_lite.launch.kit import write_launch_kit
from grpo_lite.launch.recipe import apply_settings, read_recipe, run_recipe
from grpo_lite.machine import stack
from grpo_lite.monitor.figure import ChartData, dashboard_figure
from grpo_lite.monitor.samples import episode_metrics, read_samples, reply_parser, rollout_episode
from grpo_lite.monitor.views import episode_lines, frame_html
from grpo_lite.run.record import read_run
from grpo_lite.run.settings import ConfigError
from grpo_lite.training.rollouts import rendered_tools, rollout_options

STEPS = dict(preset="cpu-smoke", max_steps=2, num_generations=4, per_device_train_batch_size=4, max_completion_length=192,
             dashboard=False)
FOUR_ROWS_A_STEP = {**STEPS, "num_generations": 2, "per_device_train_batch_size": 8}
ENVIRONMENTS = {"numbers": NumberGuess, "letters": LetterGuess}
OPTIONS = {"tools": ("tools", [guess]), "environment_factory": ("environment_factory", NumberGuess),
           "environment_factory (a dict)": ("environment_factory", ENVIRONMENTS), "rollout_func": ("rollout_func", play_number_guess)}


def game_rows(n: int = 8):
    rows = [{"question": f"Find my number from 1 to {9 - i % 3}.", "answer": "5", "secret": 5,
             "environment": "numbers" if i % 2 == 0 else "letters"} for i in range(n)]
    return prepare_dataset(rows, system_prompt=None)


@pytest.mark.parametrize("option", OPTIONS)
def test_each_rollout_option_is_refused_before_the_trainer_where_the_stack_lacks_it(option, tiny_model, tmp_path):
    model, tokenizer = tiny_model
    tokenizer.chat_template = TOOL_CALLING.chat_template()
    keyword, value = OPTIONS[option]
    needs = [stack.DIFFERENCES[name] for name in stack.OPTION_NEEDS[option]]
    if all(stack.installed(d.package) >= Version(d.since) for d in needs):
        assert rollout_options(tokenizer, game_rows(), **{keyword: value}) == {keyword: value}
        return
    wanted = " and ".join(f"{'TRL' if d.package == 'trl' else d.package} >= {d.since}" for d in needs)
    with pytest.raises(ConfigError, match=rf"^the run: {re.escape(f'{option} needs {wanted}, and this stack has TRL')}"
                                          r".*: train on the latest stack \(requirements/lock.txt: TRL 1.15.0"):
        train(model, tokenizer, game_rows(), [calls_reward], output_dir=tmp_path / "run", **{keyword: value}, **STEPS)
    assert not (tmp_path / "run").exists()


def undocumented(number: int) -> str:
    return str(number)


def untyped(number) -> str:
    """Guess.

    Args:
        number: The guess.
    """
    return str(number)


class NoReset:
    def guess(self, number: int) -> str:
        """Guess.

        Args:
            number: The guess.
        """
        return "lower"


def wrong_arity(prompts):
    return {}


class Unscored:
    """A game with no get_reward: nothing of its own scores its episodes."""

    def reset(self, **row) -> None:
        return None

    def guess(self, number: int) -> str:
        """Guess.

        Args:
            number: The guess.
        """
        return "lower"


@newer_only("environment_per_row")
@pytest.mark.parametrize("given, refusal", [
    ({"tools": [undocumented]}, r"tools\[0\] \(undocumented\) cannot be described to the model: .*Google-style docstring"),
    ({"tools": [guess, untyped]}, r"tools\[1\] \(untyped\) cannot be described to the model: .*type hint"),
    ({"tools": [functools.partial(guess, number=3)]}, r"tools\[0\] is a functools.partial of 'guess': .*define a function"),
    ({"tools": guess}, r"tools=<function guess .*give a list of 'module:function'"),
    ({"environment_factory": NoReset}, r"environment_factory makes a NoReset, which has no reset method: .*def reset"),
    ({"environment_factory": {"numbers": NumberGuess}}, r"'environment' column names 'letters', which environment_factory has not"),
    ({"rollout_func": wrong_arity}, r"rollout_func \(wrong_arity\) must take \(prompts, trainer\)"),
    ({"tools": [guess], "chatml": True}, r"chat template cannot render a tool call and its result .*these chat templates "
                                         r"only.*qwen2_5.*Give the tokenizer one of them"),
    ({"tools": [guess], "rewards": []}, r"rewards is empty: give at least one reward function, or an environment_factory whose"),
    ({"environment_factory": Unscored, "rewards": []},
     r"environment_factory makes a Unscored, which has no get_reward method, and the run has no reward functions"),
], ids=["no docstring", "no type hint", "a partial", "not a list", "no reset", "an environment no row names", "rollout_func's arguments",
        "a template without tools", "no reward at all", "an environment that cannot score alone"])
def test_a_rollout_option_trl_could_not_run_is_refused_by_name_before_the_trainer(given, refusal, tiny_model, tmp_path):
    model, tokenizer = tiny_model  # ChatML, which renders no tool call
    given = dict(given)
    if not given.pop("chatml", False):
        tokenizer.chat_template = TOOL_CALLING.chat_template()
    rewards = given.pop("rewards", [calls_reward])
    with pytest.raises(ConfigError, match=refusal):
        train(model, tokenizer, game_rows(), rewards, output_dir=tmp_path / "run", **given, **STEPS)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("option", ["tools", "environment_factory", "environment_factory (a dict)"])
def test_the_prompt_length_check_counts_the_tools_the_chat_template_describes(option, tiny_model_dir, tmp_path):
    if stack.lacking(option):
        pytest.skip(stack.lacking(option))
    keyword, value = OPTIONS[option]
    rows = game_rows()
    tools = rendered_tools({keyword: value}, rows)
    # TRL renders each prompt with the run's tools and its row's environment's methods
    assert [[tool.__name__ for tool in each] for each in tools] == [
        ["guess"] if keyword == "tools" or row["environment"] == "numbers" or value is NumberGuess else ["guess_letter"]
        for row in rows]
    model, tokenizer = load_model(str(tiny_model_dir), lora_rank=8)
    tokenizer.chat_template = TOOL_CALLING.chat_template()
    bare, shown = max(prompt_lengths(rows, tokenizer)), max(prompt_lengths(rows, tokenizer, tools=tools))
    assert shown > bare + 100  # each tool's JSON schema, written into the prompt
    model.max_seq_length = bare + STEPS["max_completion_length"]  # enough for the question alone
    with pytest.raises(ConfigError, match=rf"the longest prompt \({shown} tokens, with the tools its chat template describes\) "
                                          rf"plus max_completion_length=192 exceeds the model's max_seq_length={model.max_seq_length}"):
        train(model, tokenizer, rows, [calls_reward], output_dir=tmp_path / "run", **{keyword: value}, **STEPS)
    assert not (tmp_path / "run").exists()


def _episodes(folder, per_step: int = 4):
    samples = read_samples(folder)
    assert [row["step"] for row in samples] == [1] * per_step + [2] * per_step
    return samples


def _assert_called_and_answered(samples, result: str) -> None:
    """Some rollout called guess(number=5) and was answered ``result``, turn after turn."""
    played = [row["episode"] for row in samples if len(row["episode"]) >= 2]
    assert played, [row["episode"] for row in samples]
    for turns in played:
        assert turns[0]["turn"] == "model" and turns[1]["turn"] == "tool"
        assert turns[0]["calls"] == [{"tool": turns[1]["tool"], "arguments": turns[0]["calls"][0]["arguments"]}]
    assert any(turns[0]["calls"] == [{"tool": "guess", "arguments": {"number": 5}}] and turns[1]["result"] == result
               for turns in played)


def _assert_tool_curves(folder) -> None:
    """TRL's tool metrics and each step's episodes' (counted from the samples it logged) are charted, in a third row."""
    records, samples = read_metrics(folder), read_samples(folder)
    assert all(isinstance(record["tools/call_frequency"], float) for record in records)
    assert any(record["tools/call_frequency"] > 0 for record in records)
    for record in records:
        assert record | episode_metrics([row for row in samples if row["step"] == record["step"]]) == record
    chart = ChartData(records)
    for key in ("tools/call_frequency", "episodes/model_turns", "episodes/turn_limit"):
        steps, values = chart.points(key)
        assert steps == [1, 2] and values == [record[key] for record in records]
    without_tools = ChartData([{key: value for key, value in record.items() if not key.startswith(("tools/", "episodes/"))}
                               for record in records])
    assert len(dashboard_figure(chart).axes) == len(dashboard_figure(without_tools).axes) + 3  # a text run keeps its two rows


def _assert_drawn_turn_by_turn(folder) -> None:
    """The dashboard of the run draws a rollout that called guess as its turns: the call, then the tool's answer."""
    frame = show_run(folder, view="log").frame()
    page = frame_html(frame)
    played = [row for row in frame.samples if len(row["episode"]) >= 2]
    assert played, [row["episode"] for row in frame.samples]
    answer = re.escape(f"{played[0]['episode'][1]['tool']} -&gt; {played[0]['episode'][1]['result']}")
    assert re.search(rf'grpo-lite-call"[^>]*>guess\(number=\d\)</div><div class="grpo-lite-turn grpo-lite-tool"[^>]*>{answer}<', page)
    assert f"<td>{played[0]['ended']}</td>" in page


@pytest.mark.slow
@newer_only("tools")
def test_a_model_calling_a_tool_trains_and_each_rollout_is_an_episode(tool_caller, tmp_path):
    model, tokenizer = load_model(str(tool_caller), lora_rank=8)
    train(model, tokenizer, game_rows(), [calls_reward], output_dir=tmp_path, tools=[guess], max_tool_calling_iterations=1,
          **STEPS)
    samples = _episodes(tmp_path)
    _assert_called_and_answered(samples, "correct")
    assert {row["ended"] for row in samples} <= {"done", "turn limit", "tool error"}
    assert all(row["ended"] == "turn limit" for row in samples if row["episode"][-1]["calls"])
    _assert_tool_curves(tmp_path)
    _assert_drawn_turn_by_turn(tmp_path)
    assert read_run(tmp_path).settings.tools == ["games:guess"]  # by the name that imports it again


def guess_with_clues(number: int) -> list:
    """Guess the secret number.

    Args:
        number: The number guessed, from 1 to 9.
    """
    return [guess(number), number, {"tries": 1, "range": [1, 9]}]


guess_with_clues.__name__ = "guess"  # the tool the model learnt to call, answering with a list


@pytest.mark.slow
@newer_only("tools")
def test_a_tool_answering_with_a_list_is_recorded_as_the_model_was_shown_it(tool_caller, tmp_path):
    model, tokenizer = load_model(str(tool_caller), lora_rank=8)
    result = train(model, tokenizer, game_rows(), [calls_reward], output_dir=tmp_path, tools=[guess_with_clues],
                   max_tool_calling_iterations=1, **{**STEPS, "max_steps": 1})
    shown = [message["content"] for completion in result.trainer._logs["completion"] for message in completion
             if message["role"] == "tool"]  # as TRL showed them to the model: the list itself
    kept = [turn["result"] for row in read_samples(tmp_path) for turn in row["episode"] if turn["turn"] == "tool"]
    assert shown and kept == shown and all(isinstance(result, list) for result in kept)
    assert ["correct", 5, {"tries": 1, "range": [1, 9]}] in kept
    assert read_run(tmp_path).settings.tools == [f"{__name__}:guess_with_clues"]


@pytest.mark.slow
@newer_only("environment_factory")
def test_an_environment_per_rollout_is_reset_with_its_row_and_scores_it(tool_caller, tmp_path):
    model, tokenizer = load_model(str(tool_caller), lora_rank=8)
    train(model, tokenizer, _secrets(game_rows()), [calls_reward], output_dir=tmp_path, environment_factory=NumberGuess,
          max_tool_calling_iterations=1, **FOUR_ROWS_A_STEP)
    samples = _episodes(tmp_path, per_step=8)
    _assert_called_and_answered(samples, "correct")
    answered = {turns[1]["result"] for turns in (row["episode"] for row in samples) if len(turns) >= 2}
    assert answered <= {"correct", "lower", "higher"}
    for row in samples:  # the environment's get_reward, logged under its class's name
        found = any(turn.get("result") == "correct" for turn in row["episode"])
        assert row["rewards"]["NumberGuess"] == pytest.approx(1.0 if found else 0.0)
    _assert_tool_curves(tmp_path)
    assert read_run(tmp_path).settings.environment_factory == "games:NumberGuess"


@pytest.mark.slow
@newer_only("environment_factory")
def test_environments_scoring_their_own_episodes_are_a_runs_only_reward(tool_caller, tmp_path):
    model, tokenizer = load_model(str(tool_caller), lora_rank=8)
    result = train(model, tokenizer, game_rows(), [], output_dir=tmp_path, environment_factory=NumberGuess,
                   max_tool_calling_iterations=1, heldout=_secrets(game_rows(4)), heldout_n=4, **FOUR_ROWS_A_STEP)
    # held-out episodes play in environments too, before and after, and their reward is reported
    assert result.evaluation.base.mean_rewards == {"NumberGuess": 0.5}  # guess(5) is right for secret 5, not 3
    assert set(result.evaluation.trained.mean_rewards) == {"NumberGuess"}
    samples = _episodes(tmp_path, per_step=8)
    assert all(set(row["rewards"]) == {"NumberGuess"} for row in samples)
    assert any(row["rewards"]["NumberGuess"] == 1.0 for row in samples)  # some episode guessed 5 at once
    assert read_run(tmp_path).settings.rewards == []  # and run.yaml reads back so


def _secrets(rows):
    """Rows whose secret is 5 (the number the tiny model guesses) and 3 in turn."""
    return rows.map(lambda row, i: {"secret": 5 if i % 2 == 0 else 3}, with_indices=True)


@pytest.mark.slow
@newer_only("environment_per_row")
def test_heldout_episodes_play_each_in_the_environment_its_row_names_and_rewards_get_it(tool_caller):
    model, tokenizer = load_model(str(tool_caller), lora_rank=8)
    seen = []

    def sees_environments(completions, environments, **kwargs):
        seen.append([type(e).__name__ for e in environments])
        return [0.0] * len(completions)

    rows = _secrets(game_rows(4))  # numbers, letters, numbers, letters; secrets 5, 3, 5, 3
    report = evaluate(model, tokenizer, rows, [sees_environments], environment_factory=ENVIRONMENTS, max_completion_length=192,
                      max_tool_calling_iterations=1, progress=None)
    assert seen == [["NumberGuess", "LetterGuess"] * 2]
    # greedy, the model guesses 5: right for the numbers rows' secret 5; LetterGuess has no guess tool
    assert report.mean_rewards == {"sees_environments": 0.0, "NumberGuess": 1.0, "LetterGuess": 0.0}


@pytest.mark.slow
@newer_only("environment_per_row")
def test_each_row_plays_the_environment_its_column_names(tool_caller, tmp_path):
    model, tokenizer = load_model(str(tool_caller), lora_rank=8)
    train(model, tokenizer, game_rows(), [calls_reward], output_dir=tmp_path, environment_factory=ENVIRONMENTS,
          max_tool_calling_iterations=1, **FOUR_ROWS_A_STEP)
    samples = _episodes(tmp_path, per_step=8)
    # TRL logs each prompt as the environment's reset left it: LetterGuess adds its line
    letters = [row for row in samples if row["prompt"][-1]["content"].endswith("Guess the letter.")]
    assert 0 < len(letters) < len(samples)
    # the model knows one tool, guess; where a row plays LetterGuess there is no such tool, and TRL answers an error
    called = [row for row in letters if row["episode"][0]["calls"]]
    assert called and all(row["ended"] == "tool error" and "not found" in row["episode"][1]["result"] for row in called)
    assert any(record["tools/failure_frequency"] > 0 for record in read_metrics(tmp_path))
    assert read_run(tmp_path).settings.environment_factory == {"numbers": "games:NumberGuess", "letters": "games:LetterGuess"}


def guesses_reward(completions, guesses, **kwargs):
    """The guesses play_number_guess's game took: a key of the rollout function's own output."""
    return [float(n) for n in guesses]


def _assert_played_turn_by_turn(episodes) -> None:
    """Some rollout called guess and the game's answer, as the template showed it, is an environment turn after it;
    each ended where its turns say."""
    played = [row for row in episodes if len(row["episode"]) > 1]
    assert played, [row["episode"] for row in episodes]
    for row in played:
        turns = row["episode"]
        assert [turn["turn"] for turn in turns][:3] == ["model", "environment", "model"]
        assert bool(turns[0]["calls"]) != ("<tool_call>" in turns[0]["text"])  # a call TRL reads, or the text of one it cannot
        assert "<tool_response>" in turns[1]["text"] and "<|im_start|>" not in turns[1]["text"]
        assert row["ended"] == ("turn limit" if turns[-1]["turn"] == "environment" or turns[-1]["calls"] else "done")
    assert any(turns[0]["calls"] == [{"tool": "guess", "arguments": {"number": 5}}] and "correct" in turns[1]["text"]
               for turns in (row["episode"] for row in played))
    assert all(len(row["episode"]) == 1 and not row["episode"][0]["calls"] for row in episodes if row not in played)


@pytest.mark.slow
@newer_only("rollout_func")
def test_a_rollout_function_plays_the_game_itself_turn_by_turn_and_its_extra_keys_reach_the_rewards(tool_caller, tmp_path):
    seen = []

    def guesses_seen(completions, guesses, **kwargs):
        seen.append(list(guesses))
        return guesses_reward(completions, guesses)

    model, tokenizer = load_model(str(tool_caller), lora_rank=8)
    train(model, tokenizer, game_rows(), [guesses_seen], output_dir=tmp_path, rollout_func=play_number_guess, **STEPS)
    samples = _episodes(tmp_path)
    assert len(seen) == 2 and any(n > 0 for batch in seen for n in batch)
    assert [row["rewards"]["guesses_seen"] for row in samples] == [float(n) for batch in seen for n in batch]
    # TRL logs the completion as one reply; samples.jsonl splits it where env_mask changes
    _assert_played_turn_by_turn(samples)
    assert all("<tool_response>" in row["completion"] for row in samples if len(row["episode"]) > 1)
    records = read_metrics(tmp_path)  # the episodes' curves, as a run with tools gets them
    for record in records:
        assert record | episode_metrics([row for row in samples if row["step"] == record["step"]]) == record
    without_episodes = ChartData([{key: value for key, value in record.items() if not key.startswith("episodes/")}
                                  for record in records])
    assert len(dashboard_figure(ChartData(records)).axes) == len(dashboard_figure(without_episodes).axes) + 3
    page = frame_html(show_run(tmp_path, view="log").frame())
    assert re.search(r'grpo-lite-call"[^>]*>guess\(number=\d\)</div><div class="grpo-lite-turn grpo-lite-environment"[^>]*>'
                     r'[^<]*&lt;tool_response&gt;', page)
    assert read_run(tmp_path).settings.rollout_func == "games:play_number_guess"


@newer_only("rollout_func")
def test_a_rollout_functions_completion_is_split_into_turns_where_its_env_mask_changes(tiny_model):
    _, tokenizer = tiny_model
    tokenizer.chat_template = TOOL_CALLING.chat_template()

    def ids(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    call = ids('<tool_call>\n{"name": "guess", "arguments": {"number": 5}}\n</tool_call><|im_end|>')
    answer = ids("\n<|im_start|>user\n<tool_response>\ncorrect\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    reply = ids("It is 5.<|im_end|>")
    parser = reply_parser(tokenizer)
    opening = ids(tokenizer.apply_chat_template([{"role": "user", "content": "Find my number."}], tools=[guess],
                                                add_generation_prompt=True, tokenize=False))
    turns, ended = rollout_episode(tokenizer, parser, opening, call + answer + reply,
                                   [1] * len(call) + [0] * len(answer) + [1] * len(reply))
    assert turns == [{"turn": "model", "text": "", "calls": [{"tool": "guess", "arguments": {"number": 5}}]},
                     {"turn": "environment", "text": "user\n<tool_response>\ncorrect\n</tool_response>\nassistant"},
                     {"turn": "model", "text": "It is 5.", "calls": []}]
    assert ended == "done"
    assert rollout_episode(tokenizer, parser, opening, call + answer, [1] * len(call) + [0] * len(answer))[1] == "turn limit"
    assert rollout_episode(tokenizer, parser, opening, call, [1] * len(call)) == (turns[:1], "turn limit")
    assert rollout_episode(tokenizer, parser, opening, reply, [1] * len(reply)) == (turns[2:], "done")
    lines = episode_lines({"episode": turns, "completion": ""})
    assert [kind for kind, _ in lines] == ["call", "environment", "model"]


def _kinds(report) -> list[str]:
    return [found.kind for found in report.findings]


PREVIEWED = dict(preset="cpu-smoke", n_prompts=2, num_generations=2, max_completion_length=192, max_tool_calling_iterations=1)


@pytest.mark.slow
@newer_only("environment_factory")
def test_preview_plays_groups_of_episodes_in_trls_tool_loop_and_scores_the_environments_reward(tool_caller):
    model, tokenizer = load_model(str(tool_caller), lora_rank=8)
    report = preview(model, tokenizer, game_rows(2), [calls_reward], environment_factory=NumberGuess, **PREVIEWED)
    assert report.groups == [[0, 1], [2, 3]] and len(report.episodes) == 4
    _assert_called_and_answered(report.episodes, "correct")
    # the environment's get_reward, as TRL scored each episode, is a reward of the lab's among the run's own
    assert report.functions == ["calls_reward", "NumberGuess"]
    assert report.lab.scores("NumberGuess") == [episode["rewards"]["NumberGuess"] for episode in report.episodes]
    assert report.lab.scores("calls_reward") == [episode["rewards"]["calls_reward"] for episode in report.episodes]
    assert "tool_always_fails" not in _kinds(report) and "no_tool_calls" not in _kinds(report)
    assert ("turn_limit" in _kinds(report)) == all(episode["ended"] == "turn limit" for episode in report.episodes)
    assert "episodes ended:" in str(report)
    # the length findings read what the model wrote: a tool's result, which the loss leaves out, is not counted
    played = [i for i, episode in enumerate(report.episodes) if len(episode["episode"]) >= 2]
    assert played and all("tool_response" not in tokenizer.decode(report.completions[i].token_ids) for i in played)
    assert report.rescore().lab.scores("NumberGuess") == report.lab.scores("NumberGuess")
    # with no rewards of the run's own, the environment's is the lab's only one
    alone = preview(model, tokenizer, game_rows(2), [], environment_factory=NumberGuess, **PREVIEWED)
    assert alone.functions == ["NumberGuess"] and len(alone.lab.scores("NumberGuess")) == 4


@pytest.mark.slow
@newer_only("rollout_func")
def test_preview_plays_a_rollout_functions_episodes_and_the_lab_scores_its_keys(tool_caller):
    model, tokenizer = load_model(str(tool_caller), lora_rank=8)
    report = preview(model, tokenizer, game_rows(2), [guesses_reward], rollout_func=play_number_guess, **PREVIEWED)
    assert report.groups == [[0, 1], [2, 3]] and len(report.episodes) == 4
    _assert_played_turn_by_turn(report.episodes)
    # the lab's rows hold each episode's own guesses, as TRL gave them to the rewards
    assert report.lab.scores("guesses_reward") == [episode["rewards"]["guesses_reward"] for episode in report.episodes]
    assert report.rescore().lab.scores("guesses_reward") == report.lab.scores("guesses_reward")
    assert "no_tool_calls" not in _kinds(report)  # a rollout function's episodes are not told of tools
    # the length findings read what the model wrote: the game's answer, which the loss leaves out, is not counted
    played = [i for i, episode in enumerate(report.episodes) if len(episode["episode"]) > 1]
    assert all("tool_response" not in tokenizer.decode(report.completions[i].token_ids) for i in played)


@pytest.mark.slow
@newer_only("environment_factory")
def test_preview_finds_a_tool_whose_every_call_fails_and_a_model_that_calls_none(tool_caller, tiny_model):
    model, tokenizer = load_model(str(tool_caller), lora_rank=8)
    # LetterGuess has no guess tool, the one the model was taught to call: TRL answers every call with an error
    report = preview(model, tokenizer, game_rows(2), [calls_reward], environment_factory=LetterGuess, **PREVIEWED)
    failing = [found for found in report.findings if found.kind == "tool_always_fails"]
    assert [found.message.split(":")[0] for found in failing] == ["guess"], report.episodes
    untaught, template = tiny_model
    template.chat_template = TOOL_CALLING.chat_template()
    silent = preview(untaught, template, game_rows(2), [calls_reward], tools=[guess], **{**PREVIEWED, "max_completion_length": 16})
    assert "no_tool_calls" in _kinds(silent) and not any(turn["calls"] for e in silent.episodes for turn in e["episode"])


def test_episode_findings_judge_a_batch_once():
    call = [{"tool": "guess", "arguments": {"number": 5}}]
    cut = {"episode": [{"turn": "model", "text": "", "calls": call}], "ended": "turn limit"}
    failed = {"episode": [{"turn": "model", "text": "", "calls": call},
                          {"turn": "tool", "tool": "guess", "result": "{'error': 'Tool guess not found.'}"},
                          {"turn": "model", "text": "", "calls": call}], "ended": "turn limit"}
    answered = {"episode": [{"turn": "model", "text": "", "calls": call}, {"turn": "tool", "tool": "guess", "result": "correct"},
                            {"turn": "model", "text": "5", "calls": []}], "ended": "done"}
    plain = {"episode": [{"turn": "model", "text": "5", "calls": []}], "ended": "done"}
    assert [f.kind for f in episode_findings([cut, failed], has_tools=True)] == ["turn_limit", "tool_always_fails"]
    assert [f.kind for f in episode_findings([cut, answered, failed], has_tools=True)] == []
    assert [f.kind for f in episode_findings([plain, plain], has_tools=True)] == ["no_tool_calls"]
    assert episode_findings([plain, plain], has_tools=False) == []


GAMES = Path(__file__).with_name("games.py")


def _game_recipe(folder: Path, **settings) -> Path:
    """A run YAML in ``folder`` beside a copy of tests/games.py, naming what it plays by file; ``settings`` over its own."""
    shutil.copyfile(GAMES, folder / "games.py")
    game_rows().to_json(str(folder / "rows.jsonl"))
    recipe = {"model": "tiny", "rewards": ["games.py:calls_reward"], "dataset": {"path": "rows.jsonl", "prepared": True},
              "preset": "cpu-smoke", **settings}
    recipe = {key: value for key, value in recipe.items() if value is not None}  # a setting given as None: left out
    (folder / "run.yaml").write_text(yaml.safe_dump(recipe))
    return folder / "run.yaml"


def test_a_run_yaml_names_tools_environments_and_a_rollout_function_by_file_each_checked_before_the_model_loads(tmp_path):
    # the tool guess beside LetterGuess, whose tool is guess_letter: NumberGuess's guess would clash with it
    named = {"tools": ["games.py:guess"], "environment_factory": {"letters": "games.py:LetterGuess"},
             "rollout_func": "games.py:play_number_guess"}
    settings = read_recipe(_game_recipe(tmp_path, **named))
    assert settings.tools == [f"{tmp_path}/games.py:guess"]  # a file beside the YAML, wherever it is run from
    lacking = [stack.lacking(option) for option in ("tools", "environment_factory (a dict)", "rollout_func")]
    if any(lacking):  # the T4 stack: refused before the model loads, naming the stack that has them
        assert settings.problems() == [f"{next(filter(None, lacking))}: train on the latest stack (requirements/lock.txt: "
                                       f"TRL {stack.pinned('lock.txt')['trl']}, transformers {stack.pinned('lock.txt')['transformers']})"]
    else:
        assert settings.problems() == []
        given = settings.rollouts()
        assert [tool.__name__ for tool in given["tools"]] == ["guess"] and given["tools"][0](5) == "correct"
        assert given["environment_factory"]["letters"]().guess_letter("e") == "correct"
        assert given["rollout_func"].__name__ == "play_number_guess"
    # with no rewards, the environment's get_reward scores the episodes alone
    scored_by_itself = read_recipe(_game_recipe(tmp_path, rewards=None, environment_factory="games.py:NumberGuess"))
    assert scored_by_itself.rewards == [] and len(scored_by_itself.problems()) == any(lacking)
    # --set names them as the YAML does
    changed = apply_settings(settings, ["tools=[games.py:guess, games.py:gues]"])
    assert changed.tools == ["games.py:guess", "games.py:gues"]
    # each one that does not import is named at once, by its setting, with the fix
    wrong = read_recipe(_game_recipe(tmp_path, tools=["games.py:gues"], environment_factory={"numbers": "games.py:NumberGues"},
                                     rollout_func="play_number_guess"))
    tools, environment, rollout = wrong.problems()
    assert tools.startswith("tools[0] '") and tools.endswith("has no 'gues'; did you mean guess, guessing_lessons?")
    assert environment.startswith("environment_factory['numbers'] '") and "has no 'NumberGues'" in environment
    assert rollout.startswith("rollout_func 'play_number_guess': name it 'module:function' or 'path/to/file.py:function'")
    with pytest.raises(ConfigError, match=r"(?s)tools\[0\] .*environment_factory\['numbers'\] .*rollout_func "):
        run_recipe(wrong, output_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    # held-out rows cannot be played by a rollout function, which plays only inside the trainer
    evaluated = read_recipe(_game_recipe(tmp_path, rollout_func="games.py:play_number_guess",
                                         heldout={"path": "rows.jsonl", "prepared": True}))
    assert [p for p in evaluated.problems() if p.startswith("heldout")] == [
        "heldout with rollout_func: held-out rows are played as replies or in TRL's tool loop, and a rollout function "
        "plays its episodes only inside the trainer, sampling as it chooses; leave heldout out, and see its episodes "
        "before training with preview(..., rollout_func=...)"]


@pytest.mark.slow
@newer_only("tools")
def test_a_run_yaml_with_tools_trains_and_its_run_and_launch_kit_name_the_tool_file(tool_caller, tmp_path):
    recipe = _game_recipe(tmp_path, model=str(tool_caller), load={"lora_rank": 8}, tools=["games.py:guess"],
                          overrides={"max_steps": 2, "num_generations": 4, "per_device_train_batch_size": 4,
                                     "max_completion_length": 192, "max_tool_calling_iterations": 1})
    run_recipe(read_recipe(recipe), output_dir=tmp_path / "run")
    _assert_called_and_answered(_episodes(tmp_path / "run"), "correct")
    assert read_run(tmp_path / "run").settings.tools == [f"{tmp_path}/games.py:guess"]
    kit = write_launch_kit(tmp_path / "run", tmp_path / "kit", dataset=game_rows())
    assert (kit / "games.py").read_text() == GAMES.read_text()
    shipped = read_recipe(kit / "recipe.yaml")
    assert shipped.tools == [f"{kit}/games.py:guess"] and shipped.rewards == [f"{kit}/games.py:calls_reward"]
    assert [tool.__name__ for tool in shipped.rollouts()["tools"]] == ["guess"]
