"""Episodes with a tool through Unsloth on a CUDA GPU: a tiny model taught to call the number game's tool
(tests/games.py) loads through Unsloth, and Unsloth's GRPOTrainer (generated from TRL's, unsloth/models/rl.py) plays
one NumberGuess per rollout through TRL's tool loop for two steps. samples.jsonl holds each rollout as an episode, the
environment's get_reward is logged under its name, and TRL's tool metrics are written. On a CPU the same runs through
plain TRL (tests/test_rollouts.py); here it is Unsloth's trainer and the card's generation.

The model has a head size of 32 (on_gpu.TILED_SIZE, as test_gpu_families.py's): Unsloth's kernels tile real models'
head sizes, and the CPU tests' 16 is not one. It loads in 16 bits: 4-bit rounding of a model this small can undo the one
reply it was taught, and this test is about the tool loop, not quantisation (test_gpu_load.py and test_gpu_train.py
cover 4-bit)."""

from games import NumberGuess, build_tool_calling_model, calls_reward
from on_gpu import TILED_SIZE

from grpo_lite import load_model, prepare_dataset, read_metrics, train
from grpo_lite.model.load import loaded_as
from grpo_lite.monitor.samples import read_samples

ROWS = [{"question": f"Find my number from 1 to {top}.", "answer": "5"} for top in (7, 8, 9, 9)]
TWO_STEPS = dict(max_steps=2, num_generations=4, per_device_train_batch_size=4, max_completion_length=192,
                 max_tool_calling_iterations=1, learning_rate=5e-4, save_steps=100, dashboard=False)


def test_unsloths_trainer_plays_episodes_with_a_tool_and_logs_each_one(tmp_path):
    folder = build_tool_calling_model(tmp_path / "model", **TILED_SIZE)
    model, tokenizer = load_model(str(folder), backend="unsloth", load_in_4bit=False, lora_rank=8)
    assert loaded_as(model).backend.name == "unsloth"
    rows = prepare_dataset(ROWS, tokenizer=tokenizer, system_prompt=None)
    # calls_reward beside the game's own reward, which is 0 for most of a tiny model's games
    result = train(model, tokenizer, rows, [calls_reward], output_dir=tmp_path / "run", environment_factory=NumberGuess,
                   **TWO_STEPS)
    assert result.trainer.state.global_step == 2

    samples = read_samples(tmp_path / "run")
    assert len(samples) == 8 and all(row["episode"] and row["ended"] for row in samples)
    played = [row["episode"] for row in samples if len(row["episode"]) >= 2]
    assert played, [row["episode"] for row in samples]
    for turns in played:  # the model's call, then the game's answer to it
        assert turns[0]["calls"][0]["tool"] == "guess" == turns[1]["tool"]
        assert turns[1]["result"] in {"correct", "lower", "higher"} or turns[1]["result"].startswith("error")
    for row in samples:  # the environment's own reward, named after its class
        found = any(turn.get("result") == "correct" for turn in row["episode"])
        assert row["rewards"]["NumberGuess"] == (1.0 if found else 0.0)
    assert any(record["tools/call_frequency"] > 0 for record in read_metrics(tmp_path / "run"))
