import sys

import pytest

from grpo_lite import load_model
from grpo_lite.model.load import BackendError, choose_backend, loaded_as

needs_no_gpu = pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="checks the CPU path; this machine has a GPU"
)


@needs_no_gpu
def test_auto_picks_cpu_here_and_says_why(tiny_model_dir, capsys):
    model, tokenizer = load_model(str(tiny_model_dir), lora_rank=4)
    backend = loaded_as(model).backend
    assert backend.name == "cpu"
    assert "no CUDA GPU" in backend.reason and not backend.load_in_4bit
    assert "backend=cpu" in capsys.readouterr().err
    assert next(model.parameters()).dtype.is_floating_point
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) > 0
    assert any("lora_" in name for name, _ in model.named_parameters())
    assert tokenizer.pad_token is not None


@needs_no_gpu
def test_unsloth_backend_without_gpu_fails_clearly():
    with pytest.raises(BackendError, match="needs a CUDA GPU"):
        choose_backend("unsloth")


@needs_no_gpu
def test_cpu_path_never_imports_unsloth(tiny_model_dir):
    load_model(str(tiny_model_dir), lora_rank=4)
    assert "unsloth" not in sys.modules


def test_unknown_backend_is_refused():
    with pytest.raises(BackendError, match="not one of"):
        choose_backend("tpu")


def test_vllm_needs_the_unsloth_backend():
    with pytest.raises(BackendError, match="fast_inference"):
        choose_backend("transformers", fast_inference=True)


def test_full_finetune_without_lora(tiny_model_dir):
    model, _ = load_model(str(tiny_model_dir), lora_rank=None)
    assert not any("lora_" in name for name, _ in model.named_parameters())


def test_importing_the_package_imports_neither_trl_nor_transformers():
    import subprocess

    code = "import grpo_lite, sys; print('trl' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_lora_options_users_bring_reach_peft_and_a_chat_template_replaces_the_tokenizers(tiny_model_dir):
    # Unsloth's notebooks pass get_peft_model(lora_dropout=..., use_rslora=..., bias=...); before, lora_dropout was fixed
    # at 0.0 and the others were not load_model keywords at all.
    template = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
    model, tokenizer = load_model(str(tiny_model_dir), backend="cpu", lora_rank=4, lora_dropout=0.05, use_rslora=True,
                                  bias="lora_only", init_lora_weights="gaussian", layers_to_transform=0, layers_pattern="layers",
                                  chat_template=template)
    config = model.peft_config["default"]
    assert (config.lora_dropout, config.use_rslora, config.bias, config.init_lora_weights) == (0.05, True, "lora_only", "gaussian")
    assert config.layers_to_transform == [0] and config.layers_pattern == "layers"
    assert all(".layers.0." in name for name, _ in model.named_parameters() if "lora_A" in name)
    assert tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True) == (
        "<user>hi<assistant>")
    recorded = loaded_as(model).settings
    assert (recorded.lora_dropout, recorded.use_rslora, recorded.bias, recorded.chat_template) == (0.05, True, "lora_only", template)


def test_bad_lora_options_and_a_template_name_without_unsloth_are_named(tiny_model_dir, monkeypatch):
    from grpo_lite.run.settings import ConfigError

    with pytest.raises(ConfigError, match=r"lora_dropout=1\.5.*\n.*bias='some'.*\n.*use_rslora='yes'"):
        load_model(str(tiny_model_dir), backend="cpu", lora_dropout=1.5, bias="some", use_rslora="yes")
    monkeypatch.setitem(sys.modules, "unsloth", None)  # as on a CPU machine: grpo_lite imports Unsloth on a GPU only
    with pytest.raises(ConfigError, match=r"chat_template='chatml' is not a Jinja template.*Unsloth"):
        load_model(str(tiny_model_dir), backend="cpu", lora_rank=4, chat_template="chatml")
