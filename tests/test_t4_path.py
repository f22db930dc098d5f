"""The Colab T4 path, checked on a CPU: each test encodes the upstream fact the GPU code relies on.

No GPU exists on CI, so GPU facts are simulated (a patched compute capability, a model object with or without
a vLLM engine, a stub ``unsloth`` package) and each test names the upstream file that makes the fact true.
The bitsandbytes 4-bit path is real: bitsandbytes 0.50.2 runs nf4 layers on the CPU.
"""

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from grpo_lite.machine import device
from grpo_lite.run.presets import auto_preset
from grpo_lite.training.trainer import vllm_options

ROOT = Path(__file__).resolve().parents[1]


class _Props:
    total_memory = int(14.74 * 2**30)
    name = "Tesla T4"


@pytest.fixture
def t4(monkeypatch):
    """A Colab T4 as torch describes it: CUDA available, compute capability 7.5, and
    ``torch.cuda.is_bf16_supported()`` True, because it counts emulation by default (torch/cuda/__init__.py)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: _Props())


def test_a_t4_gets_fp16_weights_the_t4_preset_8bit_adamw_and_no_vllm_from_the_latest_stack(t4, monkeypatch):
    """What a T4 decides, each from its compute capability (7.5). tests/gpu/test_gpu_t4_fp16.py then trains with the
    dtype and preset asked for by name on whatever card it has: a capability cannot be faked there for Triton."""
    import importlib.util

    from grpo_lite.model import load as models
    from grpo_lite.run.settings import resolve_options

    # fp16 weights: Unsloth picks the dtype from the card's capability, once, as it is imported
    if importlib.util.find_spec("unsloth") is not None:
        unsloth = Path(importlib.util.find_spec("unsloth").origin).parent
        assert "SUPPORTS_BFLOAT16 = _bf16_cap is not None and _bf16_cap[0] >= 8" in (unsloth / "models" / "_utils.py").read_text()
        assert "dtype = torch.float16 if not SUPPORTS_BFLOAT16 else torch.bfloat16" in (unsloth / "models" / "llama.py").read_text()
    assert device.half_dtype() is torch.float16
    # the t4-16gb preset: fp16 autocast and 8-bit AdamW
    assert auto_preset() == "t4-16gb"
    options = resolve_options(auto_preset())
    assert (options["fp16"], options["bf16"], options["optim"]) == (True, False, "adamw_8bit")
    # no vLLM from the latest stack, even one its TRL accepts: a T4 runs vLLM 0.11.x only, with the T4 notebook stack
    # (grpo_lite/machine/engine.py; tests/test_engine.py has the T4 stack's vLLM on)
    from grpo_lite.machine import engine

    monkeypatch.setattr(models, "installed", lambda module: module in ("unsloth", "bitsandbytes"))
    monkeypatch.setattr(engine, "installed_stack", lambda: engine.Stack(
        vllm="0.30.0", trl="1.15.0", transformers="5.17.0", trl_accepts_vllm="<=0.31.0,>=0.21.0", unsloth=True))
    backend = models.choose_backend("auto")
    assert backend.name == "unsloth" and not backend.fast_inference


def test_a_t4_computes_in_fp16_everywhere(t4, monkeypatch, tiny_model_dir):
    # Unsloth loads a T4's model in fp16 (unsloth/models/_utils.py: SUPPORTS_BFLOAT16 needs capability >= 8) and its
    # GRPOTrainer refuses bf16 for an fp16 model (unsloth/models/rl.py: "Model is in float16 precision but you
    # want to use bfloat16"): the preset, the transformers backend and the benchmark must all say fp16.
    assert not device.supports_bf16() and device.half_dtype() is torch.float16
    assert auto_preset() == "t4-16gb"
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_compare import baseline_dtype

    assert baseline_dtype(gpu=True) is torch.float16

    import transformers

    from grpo_lite.model.load import _load_transformers, choose_backend

    loaded = {}
    real = transformers.AutoModelForCausalLM.from_pretrained

    def from_pretrained(name, **options):  # the weights load on the CPU; the dtype asked for is what counts
        loaded.update(options)
        return real(name)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    choice = choose_backend("transformers", load_in_4bit=False, fast_inference=False)
    _load_transformers(str(tiny_model_dir), choice, None, 0, (), 0, {})
    assert loaded["dtype"] is torch.float16


def test_an_ampere_card_computes_in_bf16(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 9))
    assert device.supports_bf16() and device.half_dtype() is torch.bfloat16


def test_a_model_without_a_vllm_engine_generates_through_transformers(tiny_model, monkeypatch):
    # Unsloth sets model.fast_generate on every model, as a guard that refuses vLLM arguments when
    # fast_inference=False (unsloth/models/_utils.py, make_fast_generate_wrapper; llama.py, from_pretrained);
    # only fast_inference=True sets model.vllm_engine.
    from grpo_lite import generate
    from grpo_lite.model import inference

    model, tokenizer = tiny_model

    def refuses_vllm_arguments(*args, **kwargs):
        raise ValueError("Unsloth: `sampling_params` is only supported when `fast_inference=True` (vLLM).")

    model.fast_generate = refuses_vllm_arguments
    assert len(generate(model, tokenizer, ["hi"], max_completion_length=3)) == 1
    calls = []
    monkeypatch.setattr(inference, "_vllm_sample",
                        lambda model, texts, images, **options: calls.append(texts) or [inference.Completion("x", (1,), False)])
    model.vllm_engine = object()
    assert generate(model, tokenizer, ["hi"], max_completion_length=3) == ["x"] and calls


def test_fast_inference_auto_follows_the_unsloth_backend_and_the_engine_decision(t4, monkeypatch):
    from grpo_lite.machine.engine import Engine
    from grpo_lite.model import load as models

    monkeypatch.setattr(models, "installed", lambda module: module in ("unsloth", "bitsandbytes"))
    for engine in (Engine("vLLM", "vLLM 0.11.2 with TRL 0.22.2 on compute capability 7.5"), Engine("transformers", "vLLM is not installed")):
        monkeypatch.setattr(models, "generation_engine", lambda engine=engine: engine)  # tests/test_engine.py decides it
        backend = models.choose_backend("auto")
        assert backend.name == "unsloth" and backend.fast_inference is engine.vllm and str(engine) in backend.reason
    with pytest.raises(models.BackendError, match="needs vLLM: vLLM is not installed"):
        models.choose_backend("auto", fast_inference=True)
    assert models.choose_backend("transformers").fast_inference is False
    with pytest.raises(models.BackendError, match="backend='unsloth' only"):
        models.choose_backend("transformers", fast_inference=True)


def test_the_vllm_share_is_what_training_leaves_on_the_card():
    from grpo_lite.machine.planner import training_memory_gb
    from grpo_lite.model.load import vllm_share

    share, why = vllm_share("Qwen2.5-1.5B", memory_gb=14.74, num_generations=8, max_completion_length=512)
    training, card = training_memory_gb("Qwen2.5-1.5B", 14.74, num_generations=8, max_completion_length=512)
    assert 0.1 <= share <= 0.9 and share * card + training <= card - 1.0 < (share + 0.05) * card + training
    assert "by the planner" in why
    assert vllm_share("some/unknown-model", memory_gb=14.74)[0] == 0.5


def test_a_model_with_a_vllm_engine_trains_with_colocated_vllm():
    # Unsloth's GRPOTrainer sets use_vllm=True and vllm_mode="colocate" for a model with vllm_engine
    # (unsloth/models/rl.py, the vllm_setter added to __init__); the config says the same, and vLLM's share.
    from grpo_lite.model.load import _LOADED, Backend, LoadedModel
    from grpo_lite.run.settings import LoadSettings

    class EngineModel:
        vllm_engine = object()

    model = EngineModel()
    _LOADED[model] = LoadedModel("m", LoadSettings(), Backend("unsloth", "test", True, True, gpu_memory_utilization=0.55))
    assert vllm_options(model) == {"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.55}
    assert vllm_options(object()) == {}


def test_the_vllm_range_the_engine_reads_from_trls_metadata_is_the_one_trl_checks_and_the_extra_holds_it():
    # grpo_lite.machine.engine reads TRL's vllm extra; TRL 1.x also warns outside that range (trl/import_utils.py,
    # is_vllm_available), TRL 0.22 checks nothing (its extra says vllm>=0.10.0).
    import importlib.util

    from packaging.requirements import Requirement

    from grpo_lite.machine.engine import declared

    accepts = declared("trl", "vllm", extra="vllm")
    source = Path(importlib.util.find_spec("trl.import_utils").origin).read_text()
    checked = re.search(r'Version\("([\d.]+)"\) <= _vllm_base_version <= Version\("([\d.]+)"\)', source)
    if checked is None:
        assert accepts == ">=0.10.0" and "_vllm_base_version" not in source
    else:
        low, high = checked.groups()
        assert accepts == f"<={high},>={low}"
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["vllm"]
    specifier = Requirement(extra[0]).specifier
    # grpo-lite's vllm extra: TRL 1.15's 0.21.0-0.31.0 and the T4 stack's 0.11.2 (requirements/t4.txt), nothing newer
    assert all(specifier.contains(v) for v in ("0.11.2", "0.21.0", "0.31.0"))
    assert not specifier.contains("0.32.0") and not specifier.contains("0.33.0")


STUB = """
import sys, json, os
with open(os.environ["UNSLOTH_STUB_RECORD"], "w") as record:
    json.dump({"transformers_before": "transformers" in sys.modules, "trl_before": "trl" in sys.modules,
               "peft_before": "peft" in sys.modules}, record)
"""


def _with_stub_unsloth(tmp_path, code: str, cuda: bool) -> dict | None:
    """Run ``code`` in a fresh interpreter with a stub ``unsloth`` package on the path and CUDA patched as
    ``cuda``; return what the stub recorded when it was imported (None if it never was)."""
    (tmp_path / "stub" / "unsloth").mkdir(parents=True)
    (tmp_path / "stub" / "unsloth" / "__init__.py").write_text(STUB)
    record = tmp_path / "record.json"
    script = f"import torch\ntorch.cuda.is_available = lambda: {cuda}\n" + textwrap.dedent(code)
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path / "stub"), "UNSLOTH_STUB_RECORD": str(record)}
    # What runs after the stub was imported may fail (torch only pretends to have a GPU); the record is written first.
    subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    return json.loads(record.read_text()) if record.exists() else None


@pytest.mark.slow
def test_the_readme_import_line_imports_unsloth_first_on_a_gpu(tmp_path):
    recorded = _with_stub_unsloth(tmp_path, """
        from grpo_lite import load_model, prepare_dataset, train
    """, cuda=True)
    assert recorded == {"transformers_before": False, "trl_before": False, "peft_before": False}


@pytest.mark.slow
def test_the_cli_imports_unsloth_first_on_a_gpu(tmp_path):
    recorded = _with_stub_unsloth(tmp_path, f"""
        from grpo_lite.launch.cli import main
        main(["train", {str(ROOT / "examples" / "tiny_cpu.yaml")!r}, "--set", "max_steps=1"])
    """, cuda=True)
    assert recorded == {"transformers_before": False, "trl_before": False, "peft_before": False}


@pytest.mark.slow
def test_unsloth_is_never_imported_without_a_gpu(tmp_path):
    assert _with_stub_unsloth(tmp_path, "from grpo_lite import load_model, train\nimport grpo_lite.training.trainer\n", cuda=False) is None


def test_4bit_bitsandbytes_on_cpu_trains_with_kl_and_exports_a_16bit_merge(tiny_model_dir, tmp_path):
    import bitsandbytes as bnb
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_lite import export, generate, load_model, prepare_dataset, read_metrics, train
    from grpo_lite.model.load import loaded_as

    model, tokenizer = load_model(str(tiny_model_dir), backend="transformers", load_in_4bit=True, lora_rank=8)
    backend = loaded_as(model).backend
    assert backend.load_in_4bit and "bitsandbytes' CPU kernels" in backend.reason
    assert sum(isinstance(m, bnb.nn.Linear4bit) for m in model.modules()) == 14  # 7 projections x 2 layers
    dataset = prepare_dataset([{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(16)], system_prompt=None)

    def length_reward(completions, **kwargs):
        return [len(c[0]["content"]) / 10 for c in completions]

    result = train(model, tokenizer, dataset, [length_reward], preset="cpu-smoke", output_dir=tmp_path / "run", max_steps=3,
                   num_generations=4, per_device_train_batch_size=4, max_completion_length=8, beta=0.04, dashboard=False)
    records = read_metrics(tmp_path / "run")
    assert [r["step"] for r in records] == [1, 2, 3] and all(r["kl"] is not None for r in records)
    assert any(r["kl"] > 0 for r in records) and any(r["grad_norm"] > 0 for r in records)

    out = export(result.model, tokenizer, tmp_path / "merged", how="merged_16bit")
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config and config["dtype"] == "bfloat16"
    merged = AutoModelForCausalLM.from_pretrained(out)
    assert not any(isinstance(m, bnb.nn.Linear4bit) for m in merged.modules())
    assert len(generate(merged, AutoTokenizer.from_pretrained(out), ["What is 2 + 2?"], max_completion_length=4)[0]) > 0


def test_4bit_bitsandbytes_on_cpu_trains_after_generating_in_eval_mode(tiny_model_dir, tmp_path):
    """Held-out evaluation (eval mode) before training: on a CPU with AVX512-BF16, bitsandbytes 0.50 would repack the
    4-bit weights for inference and fail the first training step (bitsandbytes/nn/modules.py, Linear4bit.forward)."""
    from grpo_lite import load_model, prepare_dataset, read_metrics, train

    model, tokenizer = load_model(str(tiny_model_dir), backend="transformers", load_in_4bit=True, lora_rank=8)
    dataset = prepare_dataset([{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(8)], system_prompt=None)

    def length_reward(completions, **kwargs):
        return [len(c[0]["content"]) / 10 for c in completions]

    train(model, tokenizer, dataset, [length_reward], preset="cpu-smoke", output_dir=tmp_path, max_steps=2, num_generations=4,
          per_device_train_batch_size=4, max_completion_length=8, dashboard=False, heldout=dataset, heldout_n=2)
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2]


def test_the_planner_models_the_gpu_path():
    from grpo_lite.machine.planner import GPUS, plan

    # TRL 1.15 projects through the LM head in 4096 x 32768 tiles (trl/kernels/chunked_logprob.py), never holding
    # the [tokens, vocab] logits that the CPU stand-in (grpo_lite.training.trl_compat) materialises.
    chunked = plan("Qwen2.5-1.5B", gpu="T4", num_generations=8, max_completion_length=512)
    full = plan("Qwen2.5-1.5B", gpu="T4", num_generations=8, max_completion_length=512, logits="full")
    assert chunked.parts["logits"] < 0.5 < 4.0 < full.parts["logits"]
    # PEFT's prepare_model_for_kbit_training upcasts every unquantized parameter to fp32 (peft/utils/other.py)
    unsloth = plan("Qwen2.5-1.5B", gpu="T4").parts["weights"]
    bnb = plan("Qwen2.5-1.5B", gpu="T4", backend="transformers").parts["weights"]
    assert bnb - unsloth == pytest.approx(151936 * 1536 * 2 / 2**30)
    assert GPUS["T4"] == 14.74 and GPUS["L4"] == 22.16


def test_the_demo_trains_on_the_cpu_unquantized_on_a_gpu_machine(monkeypatch, tmp_path):
    # A GPU is simulated: with bitsandbytes installed, load_model's default load_in_4bit=True would quantize a model
    # that the demo trains whole, on the cpu-smoke preset (use_cpu=True) while the weights sat on cuda:0.
    from grpo_lite.launch import demo
    from grpo_lite.model import load as models

    monkeypatch.setattr(models, "cuda_available", lambda: True)
    loaded = {}
    real_load = models.load_model

    def load_model(*args, **kwargs):
        model, tokenizer = real_load(*args, **kwargs)
        loaded["backend"], loaded["device"] = models.loaded_as(model).backend, next(model.parameters()).device
        return model, tokenizer

    monkeypatch.setattr(models, "load_model", load_model)
    report = demo.run_demo(tmp_path, max_steps=1, heldout_n=2, dashboard=False)
    assert loaded["backend"].name == "cpu" and not loaded["backend"].load_in_4bit and loaded["device"].type == "cpu"
    assert report["before"]["n"] == report["after"]["n"] == 2


def test_4bit_weights_without_lora_are_refused_before_loading(tiny_model_dir):
    from grpo_lite.model.load import BackendError, load_model

    with pytest.raises(BackendError, match="4-bit weights cannot be trained themselves"):
        load_model(str(tiny_model_dir), backend="transformers", load_in_4bit=True, lora_rank=None)


def test_the_vllm_share_stays_within_unsloths_own_tier_for_the_card():
    # unsloth_zoo/vllm_utils.py: Unsloth's own shares stop at 0.825 on a 22 GB L4 (0.875 left too little for
    # training there); the planner alone gave a small model 0.85.
    from grpo_lite.model.load import unsloth_vllm_tier, vllm_share

    share, why = vllm_share("Qwen2.5-0.5B", memory_gb=22.5, num_generations=8, max_completion_length=256)
    assert share == unsloth_vllm_tier(22.5) == 0.825 and "capped at Unsloth's" in why
    assert [unsloth_vllm_tier(gb) for gb in (8, 14.74, 22.5, 40, 80)] == [0.75, 0.8, 0.825, 0.925, 0.925]
