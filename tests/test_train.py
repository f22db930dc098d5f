import pytest
import torch

from grpo_lite import load_model, prepare_dataset, read_metrics, train
from grpo_lite.data.prepare import DatasetError
from grpo_lite.guards.user_code import RewardFailure
from grpo_lite.machine import stack
from grpo_lite.run.record import read_run
from grpo_lite.run.settings import ConfigError

QUICK = dict(preset="cpu-smoke", max_steps=3, num_generations=4, per_device_train_batch_size=4, max_completion_length=12)


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) / 10 for c in completions]


def digit_reward(completions, answer, **kwargs):
    return [float(a in c[0]["content"]) for c, a in zip(completions, answer)]


@pytest.fixture
def arithmetic(tiny_model):
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(12)]
    return prepare_dataset(rows, system_prompt=None)


def test_a_few_steps_change_lora_weights_and_log_every_step(tiny_model, arithmetic, tmp_path):
    model, tokenizer = tiny_model
    before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_B" in n}
    result = train(model, tokenizer, arithmetic, [length_reward, digit_reward], output_dir=tmp_path, **QUICK)

    after = {n: p.detach() for n, p in result.model.named_parameters() if "lora_B" in n}
    assert any(not torch.equal(before[n], after[n]) for n in before), "LoRA weights did not move"

    records = read_metrics(tmp_path)
    assert [r["step"] for r in records] == [1, 2, 3]
    for record in records:
        for key in ("reward", "reward_std", "kl", "frac_reward_zero_std", "rewards/length_reward/mean", "rewards/digit_reward/mean"):
            assert isinstance(record[key], float), key
    assert (tmp_path / "adapter_model.safetensors").exists() and (tmp_path / "tokenizer_config.json").exists()
    run = read_run(tmp_path)
    assert run.reward_names == ["length_reward", "digit_reward"] and run.grpo_config["max_steps"] == 3
    assert run.chosen["backend"] == "cpu"


def test_metrics_are_on_disk_while_training_runs(tiny_model, arithmetic, tmp_path):
    seen = []

    def watching_reward(completions, trainer_state, **kwargs):
        seen.append(len(read_metrics(tmp_path)))
        return [0.0] * len(completions)

    model, tokenizer = tiny_model
    train(model, tokenizer, arithmetic, [length_reward, watching_reward], output_dir=tmp_path, **QUICK)
    assert seen == [0, 1, 2]  # step N's rewards run after steps 1..N-1 were written


def test_beta_zero_still_writes_a_kl_field(tiny_model, arithmetic, tmp_path):
    model, tokenizer = tiny_model
    train(model, tokenizer, arithmetic, [length_reward], output_dir=tmp_path, beta=0.0, **{**QUICK, "max_steps": 1})
    assert read_metrics(tmp_path)[0]["kl"] is None


def test_a_crashing_reward_scores_none_and_training_goes_on(tiny_model, arithmetic, tmp_path, capsys):
    calls = []

    def flaky_reward(completions, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyError("gold")
        return [1.0] * len(completions)

    model, tokenizer = tiny_model
    result = train(model, tokenizer, arithmetic, [length_reward, flaky_reward], output_dir=tmp_path, **QUICK)
    assert result.trainer.state.global_step == 3
    assert "reward function 'flaky_reward' failed" in capsys.readouterr().err
    assert result.rewards[1].failures == 1


def test_a_reward_that_keeps_failing_stops_with_a_checkpoint(tiny_model, arithmetic, tmp_path):
    def broken_reward(completions, **kwargs):
        return [1.0]  # wrong length every time

    model, tokenizer = tiny_model
    with pytest.raises(RewardFailure, match=r"'broken_reward' failed 3 calls in a row; training stopped at step 3"):
        train(model, tokenizer, arithmetic, [length_reward, broken_reward], output_dir=tmp_path, **{**QUICK, "max_steps": 8})
    assert (tmp_path / "checkpoint-3" / "adapter_model.safetensors").exists()
    assert len(read_metrics(tmp_path)) == 3


def test_rewards_without_kwargs_and_missing_prompt_column_are_refused(tiny_model, arithmetic, tmp_path):
    model, tokenizer = tiny_model

    def no_kwargs(completions):
        return [0.0] * len(completions)

    with pytest.raises(ConfigError, match=r"the run: reward function 'no_kwargs' must accept \*\*kwargs"):
        train(model, tokenizer, arithmetic, [no_kwargs], output_dir=tmp_path, **QUICK)
    with pytest.raises(ValueError, match="no 'prompt' column"):
        train(model, tokenizer, arithmetic.rename_column("prompt", "messages"), [length_reward], output_dir=tmp_path, **QUICK)
    with pytest.raises(ConfigError, match="reward_weights has 1 values for the 2 reward functions"):
        train(model, tokenizer, arithmetic, [length_reward, digit_reward], output_dir=tmp_path, reward_weights=[1.0], **QUICK)


def test_rewards_can_be_named_by_import_path(tmp_path, monkeypatch):
    from rewards import resolve_rewards

    (tmp_path / "my_rewards.py").write_text("def brevity(completions, **kwargs):\n    return [0.0] * len(completions)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    (func,), weights = resolve_rewards(["my_rewards:brevity"])
    assert func.__name__ == "brevity" and weights is None
    with pytest.raises(ValueError, match="module 'my_rewards' has no 'nope'"):
        resolve_rewards("my_rewards:nope")


def test_a_prompt_and_completion_longer_than_max_seq_length_are_refused_before_training(tiny_model, arithmetic, tmp_path):
    # Unsloth's loader sets model.max_seq_length from load_model(max_seq_length=...) and sizes vLLM's maximum model
    # length from it (unsloth/models/llama.py, unsloth_zoo/vllm_utils.py); Unsloth cannot load a model on a CPU, so
    # the tiny model carries the attribute as Unsloth's loader would set it.
    model, tokenizer = tiny_model
    model.max_seq_length = 40
    with pytest.raises(ValueError, match=r"max_completion_length=32 exceeds the model's max_seq_length=40: load the model with"):
        train(model, tokenizer, arithmetic, "numeric_correctness_reward", preset="cpu-smoke", output_dir=tmp_path, dashboard=False)
    assert not (tmp_path / "metrics.jsonl").exists()


def _merged_in_place(model):
    model.merge_and_unload()  # PEFT folds LoRA into the base layers and leaves the wrapper without them
    return model


@pytest.mark.parametrize("merged", [lambda model: model.merge_and_unload(), _merged_in_place],
                         ids=["the model merge_and_unload returns", "the model merged in place"])
def test_a_merged_model_is_refused_before_training_with_the_fix(merged, tiny_model, arithmetic, tmp_path):
    model, tokenizer = tiny_model
    with pytest.raises(ConfigError, match=r"has no weight to train: every parameter is frozen, as PEFT's merge_and_unload\(\)"
                                          r".*load the model again with load_model"):
        train(merged(model), tokenizer, arithmetic, [length_reward], output_dir=tmp_path / "run", **QUICK)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("shape", ["DatasetDict", "DatasetDict without a train split", "IterableDataset",
                                   "IterableDatasetDict"])
def test_a_dataset_of_splits_or_a_stream_is_refused_with_the_fix(shape, tiny_model, arithmetic, tmp_path):
    from datasets import DatasetDict, IterableDatasetDict

    given = {"DatasetDict": lambda: DatasetDict(train=arithmetic, test=arithmetic),
             "DatasetDict without a train split": lambda: DatasetDict(easy=arithmetic),
             "IterableDataset": arithmetic.to_iterable_dataset,
             "IterableDatasetDict": lambda: IterableDatasetDict(train=arithmetic.to_iterable_dataset())}[shape]()
    fix = {"DatasetDict": r"of the splits 'train', 'test': pass the one split to use, e.g. dataset\['train'\]",
           "DatasetDict without a train split": r"of the splits 'easy': pass the one split to use, e.g. dataset\['easy'\]",
           "IterableDataset": r"is an IterableDataset \(a stream\).*Dataset.from_list\(list\(dataset.take\(n\)\)\)",
           "IterableDatasetDict": r"IterableDatasetDict of the splits 'train'"}[shape]
    model, tokenizer = tiny_model
    with pytest.raises(DatasetError, match=fix):
        train(model, tokenizer, given, [length_reward], output_dir=tmp_path / "run", **QUICK)
    assert not (tmp_path / "run").exists()


def test_training_a_trained_model_again_says_whose_weights_it_goes_on_from(tiny_model_dir, arithmetic, tmp_path, caplog):
    model, tokenizer = load_model(str(tiny_model_dir), lora_rank=8)
    quick = {**QUICK, "max_steps": 1, "dashboard": False}
    with caplog.at_level("WARNING", logger="grpo_lite"):
        first = train(model, tokenizer, arithmetic, [length_reward], output_dir=tmp_path / "first", **quick)
        said_first = [r.getMessage() for r in caplog.records if "carries" in r.getMessage()]
        train(first.model, tokenizer, arithmetic, [length_reward], output_dir=tmp_path / "second", **quick)
        fresh, _ = load_model(str(tiny_model_dir), lora_rank=8)
        train(fresh, tokenizer, arithmetic, [length_reward], output_dir=tmp_path / "third", **quick)
    said = [r.getMessage() for r in caplog.records if "carries" in r.getMessage()]
    assert said_first == []  # a model just loaded carries no run's weights
    assert said == [f"this model carries the LoRA weights trained in {tmp_path / 'first'} (1 step): this run goes on from "
                    "them (as a later stage does); to start from the base weights, load the model again with "
                    "load_model(...)"]


@pytest.mark.cuda_build
def test_a_step_on_a_cpu_takes_torchs_log_probs_whether_triton_imports_or_not(tiny_model, arithmetic, tmp_path):
    """TRL 1.15 picks its Triton log-prob kernel by whether Triton imports, not by where the tensors are
    (trl/trainer/utils.py, add_fused_lm_head): torch's CUDA build, what pip installs on Linux, brings Triton, and on a
    machine without a GPU the kernel failed on CPU tensors. TRL 1.16 runs torch operations there itself, and its
    function is left in place (``cpu_logprobs``). CI runs this in the CUDA-build venvs too."""
    import importlib.util

    import trl.trainer.utils as trl_utils

    from grpo_lite.training.trl_compat import LogProbsByDevice, TorchLogProbFunction

    model, tokenizer = tiny_model
    train(model, tokenizer, arithmetic, [length_reward], output_dir=tmp_path, **{**QUICK, "max_steps": 1})
    assert [r["step"] for r in read_metrics(tmp_path)] == [1]
    chosen = getattr(trl_utils, "_ChunkedLogProbFunction", NotImplemented)
    if chosen is NotImplemented:  # TRL 0.22: no fused LM head
        return
    if stack.newer("cpu_logprobs"):
        assert chosen.__module__ == "trl.kernels.chunked_logprob" and chosen.__name__ == "ChunkedLogProbFunction"
    elif importlib.util.find_spec("triton") is None:
        assert chosen is TorchLogProbFunction
    else:
        assert isinstance(chosen, LogProbsByDevice) and chosen.kernel.__name__ == "ChunkedLogProbFunction"
