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


@pytest.fixture(scope="module")
def moe_and_listed_dirs(tmp_path_factory):
    """gpt-oss, whose experts are 3-D parameters, and Gemma 3n, whose AltUp projections sit in lists (leaves ``0``)."""
    from families import BY_NAME

    root = tmp_path_factory.mktemp("layouts")
    return {name: BY_NAME[name].build(root) for name in ("gpt-oss", "gemma-3n")}


def _adapted(model) -> dict[str, str]:
    """The modules PEFT wrapped, by path, and what each adapts: ``weight`` for a layer, the parameter's name otherwise."""
    from peft.tuners.lora import LoraLayer

    return {name: getattr(module, "parameter_name", "weight") for name, module in model.named_modules()
            if isinstance(module, LoraLayer)}


def test_all_linear_puts_lora_on_experts_kept_as_parameters_and_says_so(moe_and_listed_dirs, capsys):
    # gpt-oss keeps each MoE layer's experts as 3-D parameters, no linear layer: "all-linear" left its whole MLP
    # without LoRA, and said nothing
    model, _ = load_model(str(moe_and_listed_dirs["gpt-oss"]), lora_rank=4)
    said = capsys.readouterr().err
    assert model.peft_config["default"].target_parameters == ["experts.gate_up_proj", "experts.down_proj"]
    wrapped = _adapted(model)
    for layer in range(model.config.num_hidden_layers):
        on_experts = {kind for name, kind in wrapped.items() if name.startswith(f"base_model.model.model.layers.{layer}.mlp.experts")}
        assert on_experts == {"gate_up_proj", "down_proj"}
    assert not any(".router" in name for name in wrapped)  # the router stays as loaded
    assert loaded_as(model).lora_modules == ("q_proj", "k_proj", "v_proj", "o_proj", "experts.gate_up_proj", "experts.down_proj")
    assert ("LoRA on attention (q_proj, k_proj, v_proj, o_proj) in 2 blocks, experts (experts.gate_up_proj, "
            "experts.down_proj) in 2 blocks; left out: lm_head (the output layer") in said
    assert "MLP router (the experts' router: it stays as loaded" in said

    # the list Unsloth's gpt-oss notebook gives means the experts too: carried over to their parameters, said
    model, _ = load_model(str(moe_and_listed_dirs["gpt-oss"]), lora_rank=4,
                          target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    assert loaded_as(model).lora_modules == ("q_proj", "k_proj", "v_proj", "o_proj", "experts.gate_up_proj", "experts.down_proj")
    said = capsys.readouterr().err.splitlines()
    assert [line for line in said if "carried over" in line] == [
        "grpo-lite: target_modules: carried over to this model's own weights: gate_proj, up_proj to experts.gate_up_proj "
        "(the experts' parameters); down_proj to experts.down_proj (the experts' parameters)"]

    # layers_to_transform, which PEFT applies to target_modules only, holds for the experts too
    model, _ = load_model(str(moe_and_listed_dirs["gpt-oss"]), lora_rank=4, layers_to_transform=[0], layers_pattern="layers")
    assert {name.split(".")[4] for name in _adapted(model)} == {"0"}
    assert "experts.down_proj in 1 of its 2 places (not in target_modules or layers_to_transform)" in capsys.readouterr().err

    # attention only: the experts are left out, and said so
    model, _ = load_model(str(moe_and_listed_dirs["gpt-oss"]), lora_rank=4, target_modules=["self_attn"])
    assert loaded_as(model).lora_modules == ("q_proj", "k_proj", "v_proj", "o_proj")
    assert "experts.gate_up_proj (not in target_modules), experts.down_proj (not in target_modules)" in capsys.readouterr().err


def test_lora_dropout_on_experts_kept_as_parameters_is_refused_with_the_fix(moe_and_listed_dirs):
    from grpo_lite.run.settings import ConfigError

    # PEFT adapts a parameter without dropout, and fails mid-way in get_peft_model
    with pytest.raises(ConfigError, match=r"lora_dropout=0\.05 with LoRA on the experts' parameters.*pass lora_dropout=0"):
        load_model(str(moe_and_listed_dirs["gpt-oss"]), lora_rank=4, lora_dropout=0.05)
    model, _ = load_model(str(moe_and_listed_dirs["gpt-oss"]), lora_rank=4, lora_dropout=0.05, target_modules=["self_attn"])
    assert model.peft_config["default"].lora_dropout == 0.05


def test_layers_held_in_a_list_are_named_by_their_path_not_their_index(moe_and_listed_dirs, capsys):
    # Gemma 3n's altup_projections is a ModuleList of linear layers, named "0", "1", ...: handed to PEFT as "0", the name
    # matched the decoder layer "layers.0" too, and PEFT refused it (ValueError: Target module ... is not supported)
    model, _ = load_model(str(moe_and_listed_dirs["gemma-3n"]), lora_rank=4)
    targets = model.peft_config["default"].target_modules
    assert "altup_projections.0" in targets and "altup_unembed_projections.0" in targets
    assert not any(name.split(".")[0].isdigit() for name in targets)
    wrapped = _adapted(model)
    assert {"base_model.model.model.altup_projections.0", "base_model.model.model.altup_unembed_projections.0"} <= set(wrapped)
    assert not any(name.endswith(".layers.0") for name in wrapped)
    said = capsys.readouterr().err
    assert "altup_projections.0, altup_unembed_projections.0) in 9 blocks; left out: lm_head (the output layer" in said
    assert ", 0," not in said and "(0," not in said


def test_a_list_naming_the_embeddings_and_the_output_layer_puts_lora_there(tiny_model_dir, capsys):
    # an Unsloth notebook for continued pretraining adds embed_tokens and lm_head to the projections' names
    model, _ = load_model(str(tiny_model_dir), lora_rank=4, target_modules=["q_proj", "embed_tokens", "lm_head"])
    assert loaded_as(model).lora_modules == ("embed_tokens", "q_proj", "lm_head")
    said = capsys.readouterr().err
    assert ("LoRA on attention (q_proj) in 2 blocks, other (embed_tokens, lm_head) in 2 blocks; left out: attention k_proj "
            "(not in target_modules)") in said
    assert "not in this model" not in said


def test_routers_and_gates_beside_the_experts_stay_as_loaded_and_the_shared_expert_carries_lora():
    """Qwen2-MoE routes with gate (a score per expert) and gates its shared expert with shared_expert_gate (one score):
    both stay as loaded, found by what they are; its shared expert's projections are an MLP's, adapted."""
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    from grpo_lite.model.lora import lora_targets

    model = Qwen2MoeForCausalLM(Qwen2MoeConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                               num_attention_heads=4, num_key_value_heads=2, num_experts=4,
                                               num_experts_per_tok=2, moe_intermediate_size=32,
                                               shared_expert_intermediate_size=96))
    targets = lora_targets(model, "all-linear")
    named = set(targets.modules) | set(targets.parameters or [])
    assert not {"gate", "shared_expert_gate", "mlp.gate"} & named and not any(name.endswith("_gate") for name in named)
    assert {"gate_proj", "up_proj", "down_proj"} <= {name.rsplit(".", 1)[-1] for name in named}  # the shared expert's too
