"""Sampling settings as an Unsloth GRPO notebook passes them (``GRPOConfig(vllm_sampling_params=SamplingParams(...))``)
mean on grpo-lite what they meant there, on every backend: carried onto TRL's own generation settings, said once,
recorded in run.yaml; what has no TRL form is refused with its fix."""

import json

import pytest
import yaml

from grpo_lite import prepare_dataset, train
from grpo_lite.run.porting import port_overrides, sampling_values
from grpo_lite.run.settings import ConfigError, RunSettings


class SamplingParams:
    """A stand-in for ``vllm.SamplingParams`` (no vLLM here): its keywords become attributes, the others keep vLLM's
    defaults, as a real one holds them."""

    def __init__(self, **kwargs):
        self.n, self.temperature, self.top_p, self.top_k, self.min_p, self.seed = 1, 1.0, 1.0, 0, 0.0, None
        self.repetition_penalty, self.presence_penalty, self.max_tokens = 1.0, 0.0, 16
        self.stop, self.include_stop_str_in_output, self.skip_special_tokens = [], False, True
        vars(self).update(kwargs)


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) % 3 / 2 for c in completions]


def _dataset(tokenizer):
    return prepare_dataset([{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)], tokenizer=tokenizer)


def test_the_unsloth_notebooks_sampling_params_train_and_are_recorded(tiny_model, tmp_path, capsys):
    model, tokenizer = tiny_model
    stop = "2"  # a text the tiny model writes: generation must stop at it (the notebook stops at tokenizer.eos_token)
    # Unsloth's GRPO notebooks, literally but for the stop string
    params = SamplingParams(min_p=0.1, top_p=1.0, top_k=-1, seed=3407, stop=[stop], include_stop_str_in_output=True)
    capsys.readouterr()
    result = train(model, tokenizer, _dataset(tokenizer), [length_reward], preset="cpu-smoke", output_dir=tmp_path,
                   dashboard=False, max_steps=2, num_generations=4, max_completion_length=24, vllm_sampling_params=params)
    err = capsys.readouterr().err
    assert [m["step"] for m in result.metrics if "loss" in m][-1] == 2
    said = [line for line in err.splitlines() if line.startswith("grpo-lite: vllm_sampling_params")]
    assert len(said) == 1 and "min_p=0.1" in said[0] and "seed=3407 not carried" in said[0], said
    assert "did you mean" not in err

    record = yaml.safe_load((tmp_path / "run.yaml").read_text())
    config = record["grpo_config"]
    assert config["min_p"] == 0.1 and config["top_p"] == 1.0
    assert config["top_k"] in (0, None)  # no top-k: TRL's default, 0 (None before TRL 0.27)
    assert config["generation_kwargs"] == {"stop_strings": [stop]}
    assert record["chosen"]["translated"]["vllm_sampling_params"] == {"min_p": 0.1, "generation_kwargs": {"stop_strings": [stop]}}
    # what the object holds beyond vLLM's defaults (top_k=-1 is vLLM's old default, off)
    assert record["overrides"]["vllm_sampling_params"] == {"min_p": 0.1, "seed": 3407, "stop": [stop], "include_stop_str_in_output": True}
    assert "generate" not in vars(model)  # the tokenizer handed to generate for the stop strings is gone after training

    # generation ran with stop strings (transformers refuses them without the tokenizer, which TRL does not pass)
    texts = [json.loads(line)["completion"] for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert any(text.endswith(stop) for text in texts)  # some stopped at it (TRL seeds the run: the same ones each time)
    assert all(stop not in text[:-len(stop)] for text in texts if stop in text)  # nothing generated past the stop string
    # and a completion that stopped there ends there: trained on up to it, not on padding, and not counted as cut off
    metrics = [m for m in result.metrics if "completions/min_length" in m]
    assert min(m["completions/min_length"] for m in metrics) < 24 and min(m["completions/clipped_ratio"] for m in metrics) < 1


def test_top_k_minus_one_means_off_and_trains(tiny_model, tmp_path, capsys):
    model, tokenizer = tiny_model
    result = train(model, tokenizer, _dataset(tokenizer), [length_reward], preset="cpu-smoke", output_dir=tmp_path,
                   dashboard=False, max_steps=1, num_generations=4, max_completion_length=8, top_k=-1)
    assert result.trainer.args.top_k == 0
    assert "top_k=-1 -> top_k=0" in capsys.readouterr().err


def test_a_mapping_from_a_run_yaml_is_carried_as_an_object_is():
    ported = port_overrides("cpu-smoke", {"vllm_sampling_params": {"min_p": 0.05, "top_k": 20, "repetition_penalty": 1.1,
                                                                    "stop": "</answer>", "include_stop_str_in_output": True,
                                                                    "temperature": 0.7}})
    assert ported.overrides == {"min_p": 0.05, "top_k": 20, "repetition_penalty": 1.1,
                                "generation_kwargs": {"stop_strings": ["</answer>"]}}
    assert not ported.problems and len(ported.notes) == 1 and "temperature=0.7 not carried" in ported.notes[0]
    # an object made by Unsloth's vLLMSamplingParams keeps its keywords: only those count
    made = SamplingParams(min_p=0.2)
    made._set_kwargs = {"min_p": 0.2}
    assert sampling_values(made) == {"min_p": 0.2}


@pytest.mark.parametrize("params, fix", [
    ({"presence_penalty": 0.5}, "presence_penalty=0.5: TRL's GRPOConfig has no setting it carries over to"),
    ({"stop": ["</answer>"]}, "include_stop_str_in_output=False (vLLM's default)"),
    ({"min_p": 0.1, "top_k": 5}, "top_k=5 and top_k=10 both given"),
    ({"top_k": -3}, "top_k=-3: give how many"),
])
def test_what_cannot_be_carried_over_is_refused_with_its_fix(params, fix):
    assert "give a vllm.SamplingParams or a mapping" in port_overrides("trl", {"vllm_sampling_params": "min_p=0.1"}).problems[0]
    overrides = {"vllm_sampling_params": SamplingParams(**params)}
    if "min_p" in params:
        overrides["top_k"] = 10
    settings = RunSettings(model="tiny", rewards=["numeric_correctness_reward"], preset="cpu-smoke", overrides=overrides)
    with pytest.raises(ConfigError, match="vllm_sampling_params" if "top_k=-3" not in fix else "top_k"):
        settings.validate()
    assert any(fix in problem for problem in settings.problems()), settings.problems()


def test_through_vllm_the_stop_strings_are_vllms_stop_and_generate_is_left_alone():
    from types import SimpleNamespace

    from grpo_lite.training.trainer import _stop_strings_for_vllm
    from grpo_lite.training.trl_compat import generate_with_tokenizer

    config = SimpleNamespace(use_vllm=True, generation_kwargs={"stop_strings": ["</answer>"], "ignore_eos": False})
    _stop_strings_for_vllm(config)
    assert config.generation_kwargs == {"stop": ["</answer>"], "include_stop_str_in_output": True, "ignore_eos": False}
    model = SimpleNamespace(generate=print)
    with generate_with_tokenizer(model, tokenizer=None, config=config):
        assert model.generate is print
