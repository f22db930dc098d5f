"""gymnasium's games as TRL environments: the class TRL's environment_factory= makes one instance of per rollout, its one
tool and the schema the model sees, an episode played to its end, and what is refused before the model loads."""

import inspect
import re

import pytest
from stacks import newer_only

from grpo_lite.environments.gymnasium_env import gymnasium_environment
from grpo_lite.run.settings import ConfigError

gymnasium = pytest.importorskip("gymnasium")

MOVES = ["left", "down", "right", "up"]  # FrozenLake's actions 0 to 3 (gymnasium/envs/toy_text/frozen_lake.py)
TO_THE_GOAL = ["right", "right", "down", "down", "down", "right"]  # on the 4 x 4 map, around its holes


def tools_trl_offers(environment_class) -> list[str]:
    """TRL 1.15's rule (trl/trainer/grpo_trainer.py, GRPOTrainer.__init__): the class's functions but reset, get_reward
    and names starting with an underscore."""
    return [name for name, _ in inspect.getmembers(environment_class, inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def test_a_game_is_played_through_one_tool_whose_schema_lists_the_actions():
    from transformers.utils import get_json_schema

    FrozenLake = gymnasium_environment("FrozenLake-v1", actions=MOVES, is_slippery=False)
    assert FrozenLake.__name__ == "FrozenLake"  # the name TRL gives the environment's reward
    assert tools_trl_offers(FrozenLake) == ["act"]
    schema = get_json_schema(FrozenLake().act)["function"]  # a bound method, as TRL hands it over
    assert schema["parameters"]["properties"]["action"]["enum"] == MOVES
    assert schema["parameters"]["required"] == ["action"]


def test_an_episode_shows_the_board_pays_the_games_reward_and_ends():
    FrozenLake = gymnasium_environment("FrozenLake-v1", actions=MOVES, is_slippery=False)
    game = FrozenLake()
    shown = game.reset(question="Reach the goal.", seed=0)
    assert shown.startswith("\n\n") and shown.split("\n")[2] == "[S]FFF"  # appended to the prompt; the player in brackets
    with pytest.raises(ValueError, match="unknown action 'jump': take one of left, down, right, up"):
        game.act("jump")
    replies = [game.act(move) for move in TO_THE_GOAL]
    assert all(reply.endswith("Reward: 0.") for reply in replies[:-1])
    assert replies[-1].endswith("HFF[G]\nReward: 1. The episode is over.") and game.done and game.turns == 6
    assert game.get_reward() == 1.0
    with pytest.raises(ValueError, match="the episode is over"):  # TRL counts it as a failed tool call
        game.act("left")
    game.reset()
    assert (game.get_reward(), game.turns, game.done) == (0.0, 0, False)  # a pooled instance starts each rollout afresh


def test_a_rows_seed_replays_the_same_episode():
    FrozenLake = gymnasium_environment("FrozenLake-v1", actions=MOVES)  # slippery: each move goes astray at random

    def played(seed):
        game = FrozenLake()
        return [game.reset(seed=seed)] + [game.act("right") for _ in range(3) if not game.done]

    assert played(7) == played(7)
    assert len({tuple(played(seed)) for seed in range(8)}) > 1


def test_without_a_text_rendering_the_observation_or_show_is_what_the_model_sees():
    Blackjack = gymnasium_environment("Blackjack-v1", actions=["stick", "hit"])
    assert Blackjack().reset(seed=1) == f"\n\n{gymnasium.make('Blackjack-v1').reset(seed=1)[0]}"
    Shown = gymnasium_environment("Blackjack-v1", actions=["stick", "hit"], show=lambda env, obs: f"your cards sum to {obs[0]}")
    assert Shown().reset(seed=1).startswith("\n\nyour cards sum to ")


@pytest.mark.parametrize(("call", "message"), [
    (dict(env_id="FrozenLake-v1", actions=["left", "right"]), "name each of its 4 actions (0 to 3) once"),
    (dict(env_id="FrozenLake-v1", actions={"left": 0, "right": 0}), "name each of its 4 actions"),
    (dict(env_id="FrozenLake-v1", actions={"left": 0, "far": 9}), "name each of its 4 actions"),
    (dict(env_id="NoSuchGame-v0"), "gymnasium cannot make it"),
    (dict(env_id="MountainCarContinuous-v0"), "use an environment with discrete actions"),
])
def test_what_cannot_be_played_is_refused_naming_the_environment(call, message):
    with pytest.raises(ConfigError, match=re.escape(f"gymnasium_environment({call['env_id']!r}") + ".*" + re.escape(message)):
        gymnasium_environment(**call)


ACT_RIGHT = '<tool_call>\n{"name": "act", "arguments": {"action": "right"}}\n</tool_call><|im_end|>'


@pytest.mark.slow
@newer_only("environment_factory")
def test_a_model_plays_a_gymnasium_game_through_trl_and_each_rollout_is_an_episode(tmp_path):
    from games import EPISODE_STEPS, build_tool_calling_model, called_act

    from grpo_lite import load_model, prepare_dataset, read_metrics, train
    from grpo_lite.monitor.samples import read_samples

    FrozenLake = gymnasium_environment("FrozenLake-v1", actions=MOVES, is_slippery=False)
    question = "Walk from S to G on the ice, around the holes."
    # a tiny model taught to answer the game's prompt, the act tool's schema in it, with one move: the tool loop runs
    game = FrozenLake()  # TRL appends what reset returns (the board) to the question
    lessons = [([game.act], question + game.reset(seed=0), ACT_RIGHT)]
    model, tokenizer = load_model(str(build_tool_calling_model(tmp_path / "model", lessons)), lora_rank=8)
    rows = prepare_dataset([{"question": question, "answer": "", "seed": i} for i in range(4)], system_prompt=None)

    train(model, tokenizer, rows, [called_act], output_dir=tmp_path / "run", environment_factory=FrozenLake, **EPISODE_STEPS)
    samples = read_samples(tmp_path / "run")
    played = [row["episode"] for row in samples if len(row["episode"]) >= 2]
    assert played, [row["episode"] for row in samples]
    for turns in played:  # the model's move, then the board as the game answered it, the player one cell on
        assert turns[0]["calls"] == [{"tool": "act", "arguments": {"action": "right"}}] and turns[1]["tool"] == "act"
        assert turns[1]["result"].split("\n")[1] == "S[F]FF" and turns[1]["result"].endswith("Reward: 0.")
    for row in samples:  # the game's own reward, named after the environment's class
        assert row["rewards"]["FrozenLake"] == 0.0
    assert any(record["tools/call_frequency"] > 0 for record in read_metrics(tmp_path / "run"))


def test_a_game_made_in_the_users_file_is_recorded_by_that_file_and_reads_back_as_itself(tmp_path, monkeypatch):
    from grpo_lite.run.record import function_reference
    from rewards.registry import import_reference

    monkeypatch.chdir(tmp_path)
    (tmp_path / "games.py").write_text("from grpo_lite import gymnasium_environment\n\n"
                                       f"Lake = gymnasium_environment('FrozenLake-v1', actions={MOVES!r}, is_slippery=False)\n")
    Lake = import_reference("games.py:Lake", what="environment_factory")  # as a run YAML names it
    assert Lake.__module__ == "grpo_lite.environments.gymnasium_env"  # made by the helper, which names its own module
    assert function_reference(Lake) == "games.py:Lake"  # recorded by where it lives
    assert import_reference(function_reference(Lake)) is Lake
