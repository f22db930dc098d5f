"""grpo-lite through Unsloth 2026.10.9's real generated UnslothGRPOTrainer and UnslothGRPOConfig, on CPU.

On a GPU machine grpo_lite imports Unsloth first, and Unsloth replaces trl.GRPOTrainer / trl.GRPOConfig for the
whole process with classes it generates from TRL's source (unsloth/models/rl.py, rl_replacements.py). Each test
runs in a subprocess under that patching (tests/real_unsloth.py); the comments name the upstream file that makes
the checked behaviour necessary.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from real_unsloth import requires_unsloth, run_script

from grpo_lite.machine import stack

pytestmark = [requires_unsloth, pytest.mark.slow, pytest.mark.both_stacks]
ROOT = Path(__file__).parents[1]


def test_demo_and_a_transformers_model_train_with_kl_under_unsloths_trainer(tmp_path, tiny_model_dir):
    # rl_replacements.py, _generate_and_score_completions: the generated trainer calls self.model.for_training(...)
    # unconditionally, and only Unsloth's loaders attach it: a model loaded by transformers died at step 1.
    done = run_script(f"""
        import trl
        from grpo_lite import load_model, prepare_dataset, train
        from grpo_lite.launch.demo import run_demo
        assert trl.GRPOTrainer.__name__ == "UnslothGRPOTrainer", trl.GRPOTrainer

        run_demo("demo", max_steps=2, heldout_n=4, heldout_samples=1, dashboard=False, per_device_train_batch_size=8,
                 max_completion_length=16)
        from grpo_lite.monitor.metrics import read_metrics
        demo = read_metrics("demo")

        model, tokenizer = load_model({str(tiny_model_dir)!r}, backend="transformers", load_in_4bit=False, lora_rank=8)
        rows = [{{"question": f"What is {{i}} + 1?", "answer": str(i + 1)}} for i in range(8)]
        dataset = prepare_dataset(rows, question="question", answer="answer")
        run = train(model, tokenizer, dataset, "numeric_correctness_reward", preset="cpu-smoke", output_dir="run",
                    dashboard=False, max_steps=2, beta=0.04, max_completion_length=8)
        result({{"trainer": type(run.trainer).__name__, "demo": demo, "run": run.metrics}})
    """, tmp_path)
    assert done["trainer"] == "UnslothGRPOTrainer"
    for steps in (done["demo"], done["run"]):
        trained = [s for s in steps if "kl" in s]
        assert [s["step"] for s in trained] == [1, 2]
        assert all(s["kl"] == s["kl"] for s in trained)  # KL measured (not NaN): the reference model is in use


PRESET_CONFIGS = """
import json
from grpo_lite.run.config import config_to_dict, make_config
from grpo_lite.run.presets import TRAINING_PRESETS
result({name: json.loads(json.dumps(config_to_dict(make_config(name, output_dir="out")), default=str))
        for name in TRAINING_PRESETS})
"""

# Fields where Unsloth's GRPOConfig may differ from TRL's without changing what grpo-lite trains (unsloth/models/rl.py,
# the replacements of _patch_trl_rl_trainers): the Trainer never evaluates (held-out scores are grpo-lite's own),
# emptying the CUDA cache is housekeeping, {} and None both mean no generation kwargs, Unsloth's forward computes no
# MoE router loss, and its gradient checkpointing is reentrant.
UNSLOTH_ONLY_CHANGES = {"per_device_eval_batch_size", "eval_accumulation_steps", "torch_empty_cache_steps", "generation_kwargs",
                        "router_aux_loss_coef", "gradient_checkpointing_kwargs"}


def test_every_preset_gives_trls_config_under_unsloths_config_class(tmp_path):
    # rl.py, _patch_trl_rl_trainers: Unsloth's generated GRPOConfig defaults gradient_accumulation_steps=2,
    # optim="adamw_8bit", seed=3407, vllm_importance_sampling_correction=False where a preset leaves them unset.
    card = (8, 0, 80.0)  # bf16 and fp16 configs both build on an 80 GB Ampere card: all four presets
    unsloth = run_script(PRESET_CONFIGS, tmp_path, gpu=card)
    trl = run_script(PRESET_CONFIGS, tmp_path, gpu=card, unsloth=False)
    # TRL before 1.0 serves vLLM from another process by default, where Unsloth colocates it (machine/stack.py);
    # transformers 4 stamps logging_dir's default with the time each script made it
    expected_changes = UNSLOTH_ONLY_CHANGES | {"logging_dir"} | (set() if stack.newer("vllm_mode_colocate") else {"vllm_mode"})
    for name, expected in trl.items():
        differing = {key: (value, unsloth[name][key]) for key, value in expected.items()
                     if key not in expected_changes and unsloth[name][key] != value}
        assert differing == {}, f"{name}: (TRL, Unsloth) {differing}"


def test_an_fp32_run_stays_fp32_under_unsloths_trainer_on_a_t4(tmp_path, tiny_model_dir):
    # rl.py, the mixed-precision block of the generated trainer's __init__: an fp32 model with neither fp16 nor bf16
    # gets fp16 autocast and ACCELERATE_MIXED_PRECISION=fp16 for the process on a card without bf16, use_cpu or not.
    done = run_script(f"""
        import os
        from grpo_lite import load_model, prepare_dataset
        from grpo_lite.run.config import make_config
        from grpo_lite.training.trainer import grpo_trainer
        model, tokenizer = load_model({str(tiny_model_dir)!r}, backend="cpu", lora_rank=None)
        dataset = prepare_dataset([{{"question": "1 + 1?", "answer": "2"}}] * 4, question="question", answer="answer")
        trainer = grpo_trainer(model, tokenizer, dataset, [lambda completions, **kw: [0.0] * len(completions)],
                                make_config("cpu-smoke", output_dir="out"), [])
        result({{"fp16": trainer.args.fp16, "bf16": trainer.args.bf16,
                 "precision": os.environ.get("ACCELERATE_MIXED_PRECISION")}})
    """, tmp_path, gpu=(7, 5, 15.0))
    assert done == {"fp16": False, "bf16": False, "precision": "no"}


def test_run_yaml_config_round_trip_and_vllm_options_under_unsloths_config_class(tmp_path):
    # rl.py: an explicit loss_type="dapo" makes Unsloth's GRPOConfig apply the DAPO paper's settings (epsilon_high
    # None -> 0.28, mask_truncated_completions) and warn that beta should be 0.
    # With a vLLM engine on the model (a stand-in here: vLLM needs a GPU), Unsloth's trainer colocates vLLM itself;
    # grpo-lite says so in the config, with the share load_model gave vLLM.
    done = run_script("""
        import contextlib, io, json
        from grpo_lite.run.config import config_from_dict, config_to_dict, make_config
        from grpo_lite.training.trainer import vllm_options
        saved = config_to_dict(make_config("cpu-smoke", output_dir="out"))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            again = config_to_dict(config_from_dict(saved))
        changed = {key: [str(value), str(again[key])] for key, value in saved.items() if again[key] != value}

        from grpo_lite.model.load import _LOADED, Backend, LoadedModel
        from grpo_lite.run.settings import LoadSettings
        class EngineModel:
            vllm_engine = object()
        model = EngineModel()
        _LOADED[model] = LoadedModel("m", LoadSettings(), Backend("unsloth", "test", True, True, gpu_memory_utilization=0.6))
        config = make_config("cpu-smoke", output_dir="out", **vllm_options(model))
        result({"changed": changed, "printed": printed.getvalue(),
                "vllm": [config.use_vllm, config.vllm_mode, config.vllm_gpu_memory_utilization]})
    """, tmp_path)
    assert done["changed"] == {}
    assert "DAPO" not in done["printed"]
    assert done["vllm"] == [True, "colocate", 0.6]


def test_fast_inference_auto_falls_back_when_unsloth_disabled_a_broken_vllm(tmp_path):
    # unsloth/import_fixes.py, disable_broken_vllm: a vLLM whose compiled extension fails to load is blocked for the
    # process and the reason kept in VLLM_DISABLED_REASON; from_pretrained(fast_inference=True) then raises
    # ImportError (unsloth/models/loader.py). vLLM cannot be installed here, so Unsloth's own function is handed the
    # error such a vLLM raises on import.
    done = run_script("""
        from unsloth import import_fixes
        from grpo_lite.model.load import BackendError, choose_backend
        assert import_fixes.disable_broken_vllm(ImportError(
            "/usr/lib/python3/site-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"))
        auto = choose_backend("auto")
        try:
            choose_backend("unsloth", fast_inference=True)
            refused = ""
        except BackendError as error:
            refused = str(error)
        result({"backend": auto.name, "fast_inference": auto.fast_inference, "reason": auto.reason, "refused": refused})
    """, tmp_path, gpu=(8, 9, 22.0))
    assert (done["backend"], done["fast_inference"]) == ("unsloth", False)
    for said in (done["reason"], done["refused"]):
        assert "Unsloth disabled vLLM" in said and "broken vLLM binary extension" in said


def test_notebook_01_runs_its_demo_then_its_training_under_unsloths_patching(tmp_path, monkeypatch):
    # The kernel applies Unsloth's patching at startup (IPython's startup folder), as importing grpo_lite does on a
    # GPU runtime; the notebook itself is unchanged. Its demo model was not loaded by Unsloth (for_training).
    import nbformat
    from nbclient import NotebookClient
    from real_unsloth import PATCH

    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-unsloth-patching.py").write_text(PATCH)
    work = tmp_path / "work"
    work.mkdir()
    for name, value in {"IPYTHONDIR": str(tmp_path / "ipython"), "GRPO_LITE_SMOKE": "1", "HF_HUB_OFFLINE": "1",
                        "MPLBACKEND": "Agg"}.items():
        monkeypatch.setenv(name, value)
    notebook = nbformat.read(ROOT / "notebooks" / "01_quickstart_gsm8k.ipynb", as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell("import trl\nprint('trainer:', type(result.trainer).__name__, trl.GRPOTrainer.__name__)"))
    # a kernel importing torch and Unsloth beside two test workers and an install can take minutes to answer (nbclient
    # waits 60 s by default), as in every notebook test
    NotebookClient(notebook, timeout=900, startup_timeout=300, kernel_name="python3", resources={"metadata": {"path": str(work)}}).execute()
    printed = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
    assert "trainer: UnslothGRPOTrainer UnslothGRPOTrainer" in printed


UNSLOTH_NAMED_PARAMETERS = """
import inspect
from unsloth import FastLanguageModel
def named(function):
    return [name for name, p in inspect.signature(function).parameters.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
result({"from_pretrained": named(FastLanguageModel.from_pretrained), "get_peft_model": named(FastLanguageModel.get_peft_model)})
"""


class RecordingFastLanguageModel:
    """Unsloth's loader where its real one cannot run (no GPU): records the keywords and loads with transformers."""

    calls: dict = {}

    @staticmethod
    def from_pretrained(model_name, **options):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        RecordingFastLanguageModel.calls["from_pretrained"] = options
        return AutoModelForCausalLM.from_pretrained(model_name), AutoTokenizer.from_pretrained(model_name)

    @staticmethod
    def get_peft_model(model, **options):
        RecordingFastLanguageModel.calls["get_peft_model"] = options
        return model


@pytest.fixture(scope="module")
def unsloths_named_parameters(tmp_path_factory):
    """The named parameters of Unsloth's loaders, read from the installed Unsloth, in a subprocess."""
    return run_script(UNSLOTH_NAMED_PARAMETERS, tmp_path_factory.mktemp("named"))


@pytest.mark.parametrize("fast_inference", [False, True])
def test_load_model_gives_unsloth_only_options_its_loaders_name(tiny_model_dir, monkeypatch, fast_inference,
                                                                 unsloths_named_parameters):
    # FastLanguageModel.from_pretrained (unsloth/models/loader.py) and get_peft_model (unsloth/models/llama.py) take
    # **kwargs, so an option Unsloth renamed or dropped would be ignored without a word: every keyword grpo_lite
    # gives them must be one of their named parameters (read from the installed Unsloth, in a subprocess).
    import importlib.machinery
    import sys
    import types

    from grpo_lite import load_model
    from grpo_lite.machine.engine import Engine
    from grpo_lite.model import load as models

    named = unsloths_named_parameters
    stub = types.ModuleType("unsloth")
    stub.__spec__ = importlib.machinery.ModuleSpec("unsloth", None)
    stub.FastLanguageModel = RecordingFastLanguageModel
    monkeypatch.setitem(sys.modules, "unsloth", stub)
    monkeypatch.setattr(models, "cuda_available", lambda: True)  # no GPU here: the loader is recorded, not run
    monkeypatch.setattr(models, "generation_engine", lambda: Engine("vLLM", "vLLM 0.31.0 with TRL 1.15.0 on compute capability 8.9"))
    lora_options = dict(lora_dropout=0.05, bias="lora_only", use_rslora=True, init_lora_weights="gaussian",
                        modules_to_save=["lm_head"], layers_to_transform=[0, 1], layers_pattern="layers", ensure_weight_tying=True)
    model, _ = load_model(str(tiny_model_dir), backend="unsloth", lora_rank=8, seed=7, max_seq_length=1024,
                          fast_inference=fast_inference, gpu_memory_utilization=0.6 if fast_inference else "auto", **lora_options)
    loaded, peft = RecordingFastLanguageModel.calls["from_pretrained"], RecordingFastLanguageModel.calls["get_peft_model"]
    assert set(loaded) <= set(named["from_pretrained"]) and set(peft) <= set(named["get_peft_model"])
    assert loaded["max_seq_length"] == 1024 and loaded["load_in_4bit"] and loaded["fast_inference"] is fast_inference
    # vLLM's engine options go only with it (llama.py reads them in its fast_inference branch alone)
    vllm = {"max_lora_rank": 8, "gpu_memory_utilization": 0.6} if fast_inference else {}
    assert {key: loaded[key] for key in ("max_lora_rank", "gpu_memory_utilization") if key in loaded} == vllm
    assert peft["r"] == 8 and peft["lora_alpha"] == 16 and peft["random_state"] == 7
    # the default, "all-linear", reaches get_peft_model as the model's linear layers but lm_head: Unsloth hands a list of
    # names to PEFT as it is, with every LoRA option (unsloth/models/llama.py, get_peft_model's accepted_modules)
    assert models.LORA_TARGET_MODULES == "all-linear" and peft["use_gradient_checkpointing"] == "unsloth"
    assert peft["target_modules"] == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert peft["target_parameters"] is None  # no experts kept as parameters: nothing for Unsloth to guess either
    assert models.loaded_as(model).backend.fast_inference is fast_inference
    # the LoRA options users bring reach get_peft_model as given (each is one of its named parameters, checked above)
    assert {key: peft[key] for key in lora_options} == lora_options


def test_load_model_gives_unsloth_the_experts_kept_as_parameters(tmp_path, monkeypatch):
    # unsloth/models/vision.py, get_peft_model: given target_parameters=None it guesses the experts from the names in
    # target_modules (_utils.py, get_moe_target_parameters); grpo-lite gives the experts it chose, as it gives PEFT
    import importlib.machinery
    import sys
    import types

    from families import BY_NAME

    from grpo_lite import load_model
    from grpo_lite.model import load as models

    stub = types.ModuleType("unsloth")
    stub.__spec__ = importlib.machinery.ModuleSpec("unsloth", None)
    stub.FastLanguageModel = RecordingFastLanguageModel
    monkeypatch.setitem(sys.modules, "unsloth", stub)
    monkeypatch.setattr(models, "cuda_available", lambda: True)  # no GPU here: the loader is recorded, not run
    folder = BY_NAME["gpt-oss"].build(tmp_path, num_layers=1)
    load_model(str(folder), backend="unsloth", lora_rank=8, fast_inference=False)
    peft = RecordingFastLanguageModel.calls["get_peft_model"]
    assert peft["target_modules"] == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert peft["target_parameters"] == ["experts.gate_up_proj", "experts.down_proj"]
    load_model(str(folder), backend="unsloth", lora_rank=8, fast_inference=False, target_modules=["q_proj", "v_proj"])
    assert RecordingFastLanguageModel.calls["get_peft_model"]["target_parameters"] == []  # experts left out: no guess


def test_a_chat_template_name_goes_through_unsloths_get_chat_template(tmp_path, tiny_model_dir):
    # unsloth/chat_templates.py, get_chat_template: a name looks up CHAT_TEMPLATES and sets tokenizer.chat_template.
    # Unsloth is imported here as on a GPU machine (the model itself loads on the CPU backend). qwen-2.5 ends turns with
    # the tokenizer's own EOS, so no EOS remapping runs (that path needs protobuf for sentencepiece, not installed here).
    done = run_script(f"""
        from grpo_lite import load_model
        from grpo_lite.run.settings import ConfigError
        model, tokenizer = load_model({str(tiny_model_dir)!r}, backend="cpu", lora_rank=4, chat_template="qwen-2.5")
        try:
            load_model({str(tiny_model_dir)!r}, backend="cpu", lora_rank=4, chat_template="no-such-template")
            refused = ""
        except ConfigError as error:
            refused = str(error)
        shown = tokenizer.apply_chat_template([{{"role": "user", "content": "hi"}}], tokenize=False, add_generation_prompt=True)
        result({{"shown": shown, "refused": refused}})
    """, tmp_path)
    # Qwen 2.5's template adds its default system prompt, which the tiny model's own chatml template has not
    assert done["shown"].startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.")
    assert done["refused"].startswith("load_model: chat_template='no-such-template'")


def test_training_generates_through_unsloths_vllm_path_with_the_lora_and_sampling_the_user_gave(tmp_path, tiny_model_dir):
    # vLLM cannot be installed here (no GPU; its wheels pin torch), so two stand-ins (tests/vllm_stand_in.py), the rest real:
    # - a `vllm` package, on the path before Unsloth and TRL import, so both see vLLM installed as on a GPU machine
    #   (trl/import_utils.py, unsloth_zoo/vllm_utils.py): SamplingParams, LoRARequest and RequestOutput as TRL and Unsloth
    #   use them. The vLLM Unsloth's notebooks run with TRL 0.22.2 (on a T4: 0.11.2); with TRL 1.15 one it accepts.
    # - the engine, where Unsloth's from_pretrained(fast_inference=True) puts vLLM's LLM (unsloth/models/llama.py:
    #   model.vllm_engine, llm.shared_weights, model.fast_generate) and get_peft_model passes it on (Unsloth's own
    #   patch_peft_fast_inference, which gives the model Unsloth's load_lora). It samples with the model's own generate.
    # Unsloth's generated trainer then takes the vLLM path itself: use_vllm and vllm_mode="colocate" (rl.py, vllm_setter),
    # the engine as its LLM, and a LoRA request from load_lora on every generate call (rl.py for TRL < 0.28, which calls
    # self.llm.generate in the trainer; rl_replacements.py, vllm_generation_init_patch, for VLLMGeneration in TRL >= 0.28).
    from importlib.metadata import version

    from packaging.version import Version
    from real_unsloth import PATCH
    from vllm_stand_in import write_vllm

    trl_version = version("trl")
    vllm_version = "0.11.2" if Version(trl_version) < Version("0.28") else "0.30.0"
    stand_in = write_vllm(tmp_path / "stand-in", vllm_version)
    tests = Path(__file__).parent
    stop = "2"  # a text the tiny model writes
    done = run_script(f"""
        import functools, json, os, sys
        sys.path.insert(0, {str(tests)!r})
        import torch, trl
        from unsloth.models._utils import patch_peft_fast_inference
        from unsloth_zoo.vllm_utils import generate_batches
        from vllm import SamplingParams
        from vllm_stand_in import SharedWeightsEngine
        from grpo_lite import load_model, prepare_dataset, train

        model, tokenizer = load_model({str(tiny_model_dir)!r}, backend="cpu", lora_rank=8)
        engine = SharedWeightsEngine(model, tokenizer)
        loaded = model.model  # what Unsloth's from_pretrained(fast_inference=True) does to the model it loads (llama.py)
        loaded.vllm_engine, loaded.fast_generate = engine, engine.generate
        loaded.fast_generate_batches = functools.partial(generate_batches, engine)
        patch_peft_fast_inference(model)  # and get_peft_model to the PEFT model
        # Before it loads vLLM, from_pretrained(fast_inference=True) runs patch_vllm (unsloth/models/_utils.py,
        # fast_inference_setup), which patches vLLM's internals (absent from the stand-in) and, of what load_lora needs,
        # swaps in Unsloth's LoRARequest (patch_vllm_lora_load_tensors) and numbers LoRA requests from 1.
        import unsloth_zoo.vllm_utils, unsloth_zoo.vllm_lora_request, vllm.lora.request
        vllm.lora.request.LoRARequest = unsloth_zoo.vllm_lora_request.LoRARequest
        unsloth_zoo.vllm_utils.LORA_REQUEST_ID = 1
        before = {{name: p.detach().clone() for name, p in model.named_parameters() if "lora_B" in name}}

        def length_reward(completions, **kwargs):  # completions end at EOS, the stop string or 16 tokens: lengths vary
            return [len(c[0]["content"]) / 16 for c in completions]

        rows = [{{"question": f"What is {{i}} + {{i}}?", "answer": str(2 * i)}} for i in range(12)]
        run = train(model, tokenizer, prepare_dataset(rows, tokenizer=tokenizer), [length_reward], preset="cpu-smoke",
                    output_dir="run", dashboard=False, max_steps=3, num_generations=4, max_completion_length=16, temperature=0.9,
                    warmup_steps=0,  # a whole number, which transformers 4.56 needs (the presets' warmup is a ratio: 0.1)
                    vllm_sampling_params=SamplingParams(top_p=0.95, top_k=20, min_p=0.05, stop=[{stop!r}],
                                                        include_stop_str_in_output=True))
        trainer = run.trainer
        moved = max((p.detach() - before[name]).abs().max().item() for name, p in model.named_parameters() if name in before)
        completions = [json.loads(line)["completion"] for line in open("run/samples.jsonl")]
        result({{"trainer": type(trainer).__name__, "use_vllm": trainer.args.use_vllm, "vllm_mode": trainer.args.vllm_mode,
                 "llm_is_engine": getattr(getattr(trainer, "vllm_generation", trainer), "llm", None) is engine,
                 "calls": engine.calls, "metrics": run.metrics, "moved": moved, "completions": completions,
                 "lora_dirs": sorted(name for name in os.listdir(".") if "lora" in name)}})
    """, tmp_path, prelude=f"import sys\nsys.path.insert(0, {str(stand_in)!r})\n{PATCH}")
    assert done["trainer"] == "UnslothGRPOTrainer"
    assert done["use_vllm"] is True and done["vllm_mode"] == "colocate" and done["llm_is_engine"]
    steps = [m for m in done["metrics"] if "loss" in m]
    assert [m["step"] for m in steps] == [1, 2, 3]
    calls = done["calls"]
    assert len(calls) == 3  # one generation batch per step
    asked = {"temperature": 0.9, "top_p": 0.95, "top_k": 20, "min_p": 0.05, "stop": [stop], "include_stop_str_in_output": True,
             "max_tokens": 16}
    for call in calls:
        assert call["prompts"] == 4 and {key: call["sampling"].get(key) for key in asked} == asked, call["sampling"]
        # each generate call carries the LoRA adapter being trained, as it is at that step (Unsloth's load_lora)
        assert call["lora"] is not None and call["lora"]["live_adapter"], call["lora"]
        assert call["lora"]["tensors"] == 28  # A and B of 7 projections in 2 layers: the whole adapter
    ids = [call["lora"]["id"] for call in calls]
    assert ids == sorted(set(ids))  # a new request each step, numbered by Unsloth
    norms = [call["lora"]["lora_B_norm"] for call in calls]
    assert norms[0] == 0 < norms[-1]  # LoRA B starts at zero; the adapter vLLM gets moves with training
    # the request came from the call site of the installed TRL's layout: the trainer's own (rl.py) or VLLMGeneration's
    assert done["lora_dirs"] == (["grpo_trainer_lora_model"] if Version(trl_version) < Version("0.28") else ["vllm_gen_lora"])
    assert any(m["reward_std"] > 0 for m in steps) and done["moved"] > 0  # real completions, varied rewards, weights moved
    assert any(text.endswith(stop) for text in done["completions"])  # vLLM stopped at the user's stop string


def test_each_row_is_rendered_with_its_own_template_column_once_under_unsloths_trainer(tmp_path):
    # rl_replacements.py, "per-sample chat_template_kwargs": the generated trainer takes each row's string columns named
    # in the template; on TRL 1.15 it renders the batch with TRL's one set of keywords all the same (_tokenize_prompts),
    # so grpo-lite renders each row with its own, once, under Unsloth's trainer as under TRL's.
    from grpo_lite.model.tiny import build_tiny_model

    template = (ROOT / "tests" / "data" / "chat_templates" / "gpt-oss.jinja").read_text()
    model_dir = build_tiny_model(tmp_path / "gpt-oss-template", chat_template=template)
    done = run_script(f"""
        import trl
        from collections import Counter
        from grpo_lite import load_model, prepare_dataset, train
        from grpo_lite.data.prompts import prompt_token_ids
        assert trl.GRPOTrainer.__name__ == "UnslothGRPOTrainer", trl.GRPOTrainer

        model, tokenizer = load_model({str(model_dir)!r}, backend="transformers", load_in_4bit=False, lora_rank=4)
        rows = [{{"question": f"What is {{i // 2}} + 1?", "answer": str(i // 2 + 1), "reasoning_effort": effort}}
                for i, effort in enumerate(["low", "high", "high", "low"])]
        dataset = prepare_dataset(rows, tokenizer=tokenizer)
        asked, real = [], model.generate

        def recording(*args, **kwargs):
            for ids, mask in zip(kwargs["input_ids"], kwargs["attention_mask"]):
                asked.append(tokenizer.decode(ids[mask.bool()].tolist()))
            return real(*args, **kwargs)

        model.generate = recording
        run = train(model, tokenizer, dataset, "soft_xml_format_reward", preset="cpu-smoke", output_dir="run",
                    dashboard=False, max_steps=2, num_generations=2, per_device_train_batch_size=8, beta=0.0,
                    max_completion_length=4)
        renders = [tokenizer.decode(prompt_token_ids(tokenizer, row["prompt"], {{"reasoning_effort": row["reasoning_effort"]}}))
                   for row in dataset]
        result({{"trainer": type(run.trainer).__name__, "asked": Counter(asked), "renders": renders}})
    """, tmp_path)
    assert done["trainer"] == "UnslothGRPOTrainer"
    assert [("Reasoning: low" in text, "Reasoning: high" in text) for text in done["renders"]] == [
        (True, False), (False, True), (False, True), (True, False)]
    assert set(done["asked"]) == set(done["renders"]) and set(done["asked"].values()) == {2 * 2}


def test_a_ported_max_prompt_length_cuts_the_prompts_under_unsloths_trainer(tmp_path):
    # Unsloth's generated trainer keeps TRL 1.15's _tokenize_prompts and its call in _generate (rl.py,
    # _patch_trl_rl_trainers rewrites only what rl_replacements.py edits), where grpo-lite cuts a ported max_prompt_length;
    # on TRL 0.22 the field passes on and TRL cuts (rl_replacements.py keeps its truncate_with_protected_tokens).
    tests = Path(__file__).parent
    done = run_script(f"""
        import sys
        sys.path.insert(0, {str(tests)!r})
        import trl
        from pathlib import Path
        from datasets import Dataset
        from stacks import prompts_trl_generates_from
        from grpo_lite import load_model, train
        from grpo_lite.model.tiny import build_tiny_model

        template = (Path({str(tests)!r}) / "data" / "chat_templates" / "gpt-oss.jinja").read_text()
        model, tokenizer = load_model(str(build_tiny_model("model", chat_template=template)), backend="transformers",
                                      load_in_4bit=False, lora_rank=8, max_seq_length=256)
        messages = [{{"role": "user", "content": "Write a fast matrix multiplication in native Python."}}]
        rendered = tokenizer(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
                             add_special_tokens=False)["input_ids"]
        limit = len(tokenizer(messages[0]["content"])["input_ids"]) + 1
        with prompts_trl_generates_from(model) as asked:
            rows = Dataset.from_list([{{"prompt": messages}}] * 8)
            run = train(model, tokenizer, rows, [lambda completions, **kw: [len(c[0]["content"]) % 3 / 2 for c in completions]],
                        preset="cpu-smoke", output_dir="run", dashboard=False, max_steps=1, num_generations=2,
                        per_device_train_batch_size=2, max_prompt_length=limit, max_completion_length=256 - limit)
        result({{"trainer": type(run.trainer).__name__, "cut": rendered[-limit:], "whole": len(rendered), "asked": asked,
                 "steps": [m["step"] for m in run.metrics if "loss" in m]}})
    """, tmp_path)
    assert done["trainer"] == "UnslothGRPOTrainer" and done["steps"] == [1]
    assert done["whole"] > len(done["cut"]) and done["asked"] and all(ids == done["cut"] for ids in done["asked"])
