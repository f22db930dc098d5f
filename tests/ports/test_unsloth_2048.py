"""Unsloth's gpt-oss (20B) 2048 notebook (unslothai/notebooks @ bdda2efc, nb/gpt_oss_(20B)_Reinforcement_Learning_2048_Game.ipynb),
ported to grpo-lite on a tiny gpt-oss: the notebook's code cells run verbatim (tests/ports/unsloth_2048_cells.py) but
for what reaches the hub or the GPU, each replaced here and said so. Its rewards run the model's strategy in the
trainer's process with unsloth_zoo's helpers, which it imports from unsloth: importing unsloth needs a GPU, so each
``from unsloth import`` (cells 23, 29, 33, 34) takes them from unsloth_zoo/rl_environments.py, where unsloth gets them,
loaded from its file (the unsloth_zoo package refuses to be imported without unsloth). Each cell runs from a source
file inspect can read, as in a notebook, so execute_with_time_limit takes the SIGALRM path it takes there.

The notebook runs twice: as written, and with rewards.games.GameReward playing the same game in the sandbox in place
of its strategy_succeeds. A random tiny model rarely writes a function; the rewards are computed for every completion
all the same, and each strategy reward is checked on strategies of known worth."""

import importlib.util
import linecache
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from families import BY_NAME

from grpo_lite import load_model, train
from grpo_lite.data.prompts import prompt_token_ids
from grpo_lite.monitor.samples import read_samples
from rewards.games import GameReward

from .checks import check_port, run_config_cell
from .game_2048 import FIRST_MOVE_THAT_CHANGES, HARNESS
from .unsloth_2048_cells import CELLS

# Cells 6 and 8: FastLanguageModel.from_pretrained + get_peft_model, here load_model with the same keywords but for
# the model (REPLACED (hub): the tiny gpt-oss) and random_state, which is load_model's seed
TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# the cells that define, show and score, in order: 38 generates on "cuda" (REPLACED (GPU): the model's device)
CELLS_BEFORE_THE_DATA = (10, 12, 13, 15, 16, 17, 18, 19, 21, 23, 25, 27, 29, 31, 33, 34, 36, 38, 40, 42, 43, 45, 47)
CELL_51_CHANGES = {"from trl import GRPOConfig, GRPOTrainer\ntraining_args = GRPOConfig(": "training_args = dict("}
NOTEBOOK_SCORES = {  # what each of its rewards pays (cells 43, 45, 47)
    "function_works": {-2.0, 1.0, -0.5}, "no_cheating": {1.0, -20.0, -1.0}, "strategy_succeeds": {0.0, 20.0, 2.0, -1.0, -3.0},
}


def _fenced(code: str) -> list[dict]:
    return [{"role": "assistant", "content": f"```python\n{code.strip()}\n```"}]


def _in_a_thread(reward, completions):
    with ThreadPoolExecutor(max_workers=1) as worker:
        return worker.submit(reward, completions).result()


def _run_cell(number: int, ns: dict) -> None:
    source = CELLS[number].replace('.to("cuda")', ".to(model.device)").replace("from unsloth import ", "from rl_environments import ")
    filename = f"<2048 notebook cell {number}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)  # as IPython keeps a cell's source
    exec(compile(source, filename, "exec"), ns)


@pytest.fixture
def notebook(tmp_path, capsys, monkeypatch):
    """The notebook up to its trainer: the model, its cells run, the dataset and GRPOConfig keywords."""
    environments = Path(sysconfig.get_paths()["purelib"]) / "unsloth_zoo" / "rl_environments.py"
    if not environments.exists():
        pytest.skip("Unsloth is not installed (the newest releases' venv has none: Unsloth caps them), and the notebook's "
                    "game helpers are unsloth_zoo's")
    spec = importlib.util.spec_from_file_location("rl_environments", environments)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "rl_environments", module)
    monkeypatch.chdir(tmp_path)  # the notebook writes "outputs" in the working folder
    max_seq_length, lora_rank = 768, 4  # cell 6
    model, tokenizer = load_model(str(BY_NAME["gpt-oss"].build(tmp_path)), max_seq_length=max_seq_length,
                                  load_in_4bit=True, offload_embedding=True, lora_rank=lora_rank,
                                  target_modules=TARGET_MODULES, lora_alpha=lora_rank * 2,
                                  use_gradient_checkpointing="unsloth", seed=3407)
    import torch

    ns = {"model": model, "tokenizer": tokenizer, "max_seq_length": max_seq_length, "lora_rank": lora_rank, "torch": torch}
    for cell in CELLS_BEFORE_THE_DATA:
        _run_cell(cell, ns)
    _run_cell(49, ns)  # 1000 rows of one prompt, reasoning_effort "low"; maximum_length from the templated prompt
    args, output_dir = run_config_cell(CELLS[51], CELL_51_CHANGES, ns)  # max_steps=2 added (1000 in the notebook)
    capsys.readouterr()
    return ns, args, output_dir


def _trains(ns, args, output_dir, rewards, capsys):
    """Cells 53 and 55: GRPOTrainer(model, processing_class=tokenizer, reward_funcs=rewards, args=training_args,
    train_dataset=dataset).train(), through train(); then its generation (57) and export (59) cells."""
    result = train(ns["model"], ns["tokenizer"], ns["dataset"], rewards, output_dir=output_dir, dashboard=False, **args)
    err = capsys.readouterr().err
    assert result.trainer.state.global_step == 2
    check_port(output_dir, err, args, result.trainer.args, batch_raised=True)
    # cell 49 counts the templated prompt's tokens with len(): transformers 4 returns them as a list, transformers 5 as a
    # BatchEncoding of two keys, so there max_prompt_length is 3 and every prompt is cut to its last 3 tokens, said
    import transformers

    rendered = prompt_token_ids(ns["tokenizer"], ns["dataset"][0]["prompt"], {"reasoning_effort": "low"})
    whole = ns["max_prompt_length"] >= len(rendered)
    assert whole == transformers.__version__.startswith("4.")
    assert ("cuts 1000 of 1000 prompts on the left to their last max_prompt_length=3 tokens" in err) == (not whole)
    assert all(reward.failures == 0 and reward.calls == 2 for reward in result.rewards)  # every batch scored
    samples = read_samples(output_dir)
    assert samples and all(set(row["rewards"]) == {reward.__name__ for reward in rewards} for row in samples)
    _run_cell(57, ns)
    _run_cell(59, ns)
    return samples


@pytest.mark.slow
def test_unsloths_2048_notebook_trains_as_written(notebook, capsys):
    ns, args, output_dir = notebook
    rewards = [ns["function_works"], ns["no_cheating"], ns["strategy_succeeds"]]
    samples = _trains(ns, args, output_dir, rewards, capsys)
    assert all(row["rewards"][name] in NOTEBOOK_SCORES[name] for row in samples for name in NOTEBOOK_SCORES)
    # its strategy reward, in the trainer's process: a game to its end, a strategy stuck on "W" (timed out by SIGALRM
    # in this, the main thread), no function
    strategies = [_fenced(FIRST_MOVE_THAT_CHANGES), _fenced("def strategy(board):\n    return 'W'"), _fenced("x = 1")]
    assert ns["strategy_succeeds"](strategies) == [2.0, -1.0, 0]
    # off the main thread (an async reward, a reward run in a worker), SIGALRM cannot be used: time_limit raises
    # RuntimeError, which strategy_succeeds scores as a strategy that raised, the honest one too
    assert _in_a_thread(ns["strategy_succeeds"], strategies) == [-3.0, -3.0, 0]


@pytest.mark.slow
def test_unsloths_2048_notebook_trains_with_the_sandboxed_game_reward(notebook, capsys):
    ns, args, output_dir = notebook
    # REPLACED (the point): strategy_succeeds and its in-process helpers, by the same game (cell 10) and scores
    # played in the sandbox; a move other than W, A, S or D and every failure earn the floor, 0.0, what the notebook
    # pays for no function; logged under the notebook's name
    strategy_reward = GameReward(CELLS[10] + HARNESS, "play", name="strategy_succeeds")
    samples = _trains(ns, args, output_dir, [ns["function_works"], ns["no_cheating"], strategy_reward], capsys)
    assert all(row["rewards"]["strategy_succeeds"] in (0.0, 2.0, 20.0) for row in samples)
    strategies = [_fenced(FIRST_MOVE_THAT_CHANGES), _fenced("def strategy(board):\n    return 'W'"), _fenced("x = 1")]
    assert strategy_reward(completions=strategies) == [2.0, 0.0, 0.0]
    assert _in_a_thread(lambda completions: strategy_reward(completions=completions), strategies) == [2.0, 0.0, 0.0]
