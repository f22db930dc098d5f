from pathlib import Path

import pytest
import torch
from merges import assert_merged_in_16bit
from peft import AutoPeftModelForCausalLM
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_lite.model.exporter import ExportError, export
from grpo_lite.model.inference import generate

PROMPTS = [[{"role": "user", "content": "What is 2 + 2?"}], [{"role": "user", "content": "Name a prime."}]]


@pytest.fixture
def trained_lora(tiny_model):
    """The tiny LoRA model with nonzero adapter weights, as after training (fresh LoRA B is all zeros)."""
    model, tokenizer = tiny_model
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    return model, tokenizer


def test_merged_16bit_reloads_with_plain_transformers_and_generates_the_same_text(trained_lora, tmp_path):
    model, tokenizer = trained_lora
    export(model, tokenizer, tmp_path, how="merged_16bit")

    merged = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert not any("lora" in name for name, _ in merged.named_parameters())
    expected = generate(model, tokenizer, PROMPTS, max_completion_length=8)
    assert generate(merged, AutoTokenizer.from_pretrained(tmp_path), PROMPTS, max_completion_length=8) == expected
    assert any("lora_B" in name for name, _ in model.named_parameters()), "export must leave the model trainable"


def test_a_16bit_merge_is_base_plus_delta_rounded_once_and_a_merge_into_4bit_weights_is_not(tiny_model_dir, tmp_path):
    # A bf16 model with a LoRA delta as small as ten steps of training leave it (most of it below one bf16 step of the
    # base weights), merged by PEFT through export(how="merged_16bit"). The GPU export test asserts the same.
    import bitsandbytes.functional as bnb_functional
    from peft import LoraConfig, get_peft_model

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16)
    base_q = base.model.layers[0].self_attn.q_proj.weight.detach().clone()
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    torch.manual_seed(0)
    q_proj = model.base_model.model.model.layers[0].self_attn.q_proj
    with torch.no_grad():
        q_proj.lora_B["default"].weight.normal_(std=1e-4)
    delta = (q_proj.lora_B["default"].weight.float() @ q_proj.lora_A["default"].weight.float()) * q_proj.scaling["default"]
    export(model, AutoTokenizer.from_pretrained(tiny_model_dir), tmp_path, how="merged_16bit")
    merged_q = AutoModelForCausalLM.from_pretrained(tmp_path, dtype="auto").model.layers[0].self_attn.q_proj.weight.detach()
    assert merged_q.dtype == torch.bfloat16 and not torch.equal(merged_q, base_q)
    assert_merged_in_16bit(merged_q, base_q, delta)
    # what the GPU test asserted before: the merge's change against the delta, which bf16 rounding dominates here
    cosine = torch.nn.functional.cosine_similarity((merged_q.float() - base_q.float()).flatten(), delta.flatten(), dim=0)
    assert cosine < 0.99

    # the same delta added to the base weights quantized to nf4 by bitsandbytes and dequantized (as a merge into a
    # 4-bit layer does: peft/tuners/lora/bnb.py), rounded to bf16: rejected
    packed, state = bnb_functional.quantize_4bit(base_q, blocksize=64, quant_type="nf4")
    into_4bit = (bnb_functional.dequantize_4bit(packed, state).float() + delta).to(torch.bfloat16)
    with pytest.raises(AssertionError, match=r"is not torch.bfloat16\(base \+ delta\): \d+ of 4096 elements"):
        assert_merged_in_16bit(into_4bit, base_q, delta)


def test_merged_export_casts_to_the_asked_dtype(trained_lora, tmp_path):
    model, tokenizer = trained_lora
    export(model, tokenizer, tmp_path, how="merged_16bit", dtype=torch.bfloat16)
    assert AutoModelForCausalLM.from_pretrained(tmp_path, dtype="auto").dtype == torch.bfloat16  # transformers 4: float32 unless asked
    assert model.dtype == torch.float32


def test_adapter_reloads_through_peft_and_generates_the_same_text(trained_lora, tmp_path):
    model, tokenizer = trained_lora
    export(model, tokenizer, tmp_path, how="adapter")
    assert (tmp_path / "adapter_model.safetensors").exists()

    reloaded = AutoPeftModelForCausalLM.from_pretrained(tmp_path)
    assert generate(reloaded, tokenizer, PROMPTS, max_completion_length=8) == generate(model, tokenizer, PROMPTS, max_completion_length=8)


@pytest.mark.parametrize("how", ["gguf", "merged_4bit"])
def test_unsloth_formats_name_what_is_missing(tiny_model, tmp_path, how):
    model, tokenizer = tiny_model
    with pytest.raises(ExportError, match=r"needs Unsloth.*backend='unsloth'.*merged_16bit"):
        export(model, tokenizer, tmp_path, how=how)


def test_bad_options_are_named(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    with pytest.raises(ExportError, match="how='onnx'"):
        export(model, tokenizer, tmp_path, how="onnx")
    with pytest.raises(ExportError, match="quantization='q9'"):
        export(model, tokenizer, tmp_path, how="gguf", quantization="q9")


def test_an_export_into_a_folder_that_holds_files_is_refused_unless_asked(trained_lora, tmp_path):
    model, tokenizer = trained_lora
    export(model, tokenizer, tmp_path / "out", how="adapter")
    with pytest.raises(ExportError, match=r"out already holds README\.md, adapter_config\.json, adapter_model\.safetensors, .*overwrite=True"):
        export(model, tokenizer, tmp_path / "out", how="merged_16bit")
    assert (tmp_path / "out" / "adapter_model.safetensors").exists()  # refused before anything was touched
    export(model, tokenizer, tmp_path / "out", how="merged_16bit", overwrite=True)
    held = {p.name for p in (tmp_path / "out").iterdir()}
    assert "model.safetensors" in held and not held & {"adapter_config.json", "adapter_model.safetensors"}


def test_generate_with_the_adapter_off_is_the_base_model_and_on_is_the_trained_one(trained_lora, tiny_model_dir):
    # Unsloth's notebooks compare the same prompt before and after (vLLM's lora_request=None vs the saved LoRA)
    model, tokenizer = trained_lora
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    expected_base = generate(base, tokenizer, PROMPTS, max_completion_length=8)
    before = generate(model, tokenizer, PROMPTS, max_completion_length=8, adapter=False)
    after = generate(model, tokenizer, PROMPTS, max_completion_length=8, adapter=True)
    assert before == expected_base and after != before
    assert generate(model, tokenizer, PROMPTS, max_completion_length=8) == after  # the adapter is back on afterwards
    with pytest.raises(ValueError, match="has no LoRA adapter to turn off"):
        generate(base, tokenizer, PROMPTS, max_completion_length=8, adapter=False)


def test_generate_takes_the_usual_sampling_options_and_a_seed(trained_lora):
    model, tokenizer = trained_lora
    options = dict(max_completion_length=8, do_sample=True, temperature=1.3, top_p=0.95, top_k=40, min_p=0.01,
                   repetition_penalty=1.1, num_return_sequences=3)
    state = torch.random.get_rng_state()
    first = generate(model, tokenizer, PROMPTS, seed=11, **options)
    assert torch.equal(torch.random.get_rng_state(), state)  # the seed does not reset the caller's random state
    assert generate(model, tokenizer, PROMPTS, seed=11, **options) == first and len(first) == 6
    assert generate(model, tokenizer, PROMPTS, seed=12, **options) != first


def test_generate_on_a_vllm_engine_maps_the_options_and_the_adapter_onto_vllm(trained_lora, monkeypatch):
    # vLLM needs a GPU and is not installed here: a stand-in vllm module records SamplingParams, and the model stands in
    # for one Unsloth loaded with fast_inference=True (model.vllm_engine, model.fast_generate(texts, sampling_params=...,
    # lora_request=...), model.load_lora: unsloth/models/llama.py, from_pretrained; unsloth_zoo/vllm_utils.py).
    import sys
    import types

    model, tokenizer = trained_lora
    fake_vllm = types.ModuleType("vllm")
    fake_vllm.SamplingParams = lambda **params: params
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm)
    calls = []

    def fast_generate(texts, sampling_params, lora_request, use_tqdm):
        calls.append((sampling_params, lora_request))
        choice = types.SimpleNamespace(text="x", token_ids=[1], finish_reason="stop")
        return [types.SimpleNamespace(outputs=[choice] * sampling_params["n"]) for _ in texts]

    model.vllm_engine, model.fast_generate = object(), fast_generate
    model.load_lora = lambda name, load_tensors: f"lora:{name}"
    generate(model, tokenizer, PROMPTS, do_sample=True, temperature=0.7, top_p=0.9, top_k=0, min_p=0.05,
             repetition_penalty=1.2, seed=5, num_return_sequences=2, max_completion_length=16)
    generate(model, tokenizer, PROMPTS, adapter=False)
    (sampled, lora), (greedy, no_lora) = calls
    assert sampled == dict(max_tokens=16, temperature=0.7, top_p=0.9, top_k=-1, min_p=0.05, repetition_penalty=1.2, n=2, seed=5)
    assert lora == "lora:grpo_lite_generate" and no_lora is None and greedy["temperature"] == 0.0


@pytest.fixture
def hub(monkeypatch):
    """The Hub cannot be reached here: HfApi.create_repo and upload_folder are replaced by stand-ins that record their
    calls (and, for upload_folder, which files the folder held then), so the test ends at huggingface_hub's call."""
    from huggingface_hub import HfApi

    calls = []

    def create_repo(self, repo_id, **options):
        calls.append(("create_repo", repo_id, options))

    def upload_folder(self, *, repo_id, folder_path, **options):
        files = sorted(p.name for p in Path(folder_path).iterdir())
        calls.append(("upload_folder", repo_id, {"folder_path": folder_path, "files": files, **options}))

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    return calls


@pytest.mark.parametrize("how, weights", [("adapter", "adapter_model.safetensors"), ("merged_16bit", "model.safetensors")])
def test_push_to_hub_uploads_the_written_folder_after_creating_the_repo(trained_lora, tmp_path, hub, how, weights):
    model, tokenizer = trained_lora
    export(model, tokenizer, tmp_path / "out", how=how, push_to_hub="someone/tiny-grpo", token="hf_test")
    (created, repo, create_options), (uploaded, same_repo, upload) = hub
    assert (created, repo, uploaded, same_repo) == ("create_repo", "someone/tiny-grpo", "upload_folder", "someone/tiny-grpo")
    assert create_options["exist_ok"] is True and create_options["token"] == upload["token"] == "hf_test"
    assert upload["folder_path"] == str(tmp_path / "out") and weights in upload["files"] and "tokenizer_config.json" in upload["files"]


def test_push_to_hub_with_a_bad_repo_name_is_refused_before_anything_is_written(trained_lora, tmp_path, hub):
    model, tokenizer = trained_lora
    with pytest.raises(ExportError, match=r"push_to_hub='tiny-grpo'; give the Hub repository as 'user/name'"):
        export(model, tokenizer, tmp_path / "out", push_to_hub="tiny-grpo")
    assert not (tmp_path / "out").exists() and hub == []


def _stand_in_gguf(model) -> list:
    """Give ``model`` a stand-in save_pretrained_gguf; returns the list of the quantization_method it is called with.

    llama.cpp and Unsloth's GGUF exporter need a GPU model loaded by Unsloth: the stand-in does what unsloth/save.py's
    does (unsloth_save_pretrained_gguf -> save_to_gguf, which takes a string or a list of methods, writes
    <save_directory>_gguf/<name>.<METHOD>.gguf and a Modelfile, and returns {"gguf_directory", "gguf_files", ...})."""
    asked = []

    def save_pretrained_gguf(save_directory, tokenizer, quantization_method="fast_quantized"):
        asked.append(quantization_method)
        gguf_dir = Path(f"{save_directory}_gguf")
        gguf_dir.mkdir()
        methods = quantization_method if isinstance(quantization_method, list) else [quantization_method]
        files = [gguf_dir / f"tiny.{m.upper()}.gguf" for m in methods]
        for path in [*files, gguf_dir / "Modelfile"]:
            path.write_text("x")
        (Path(save_directory) / "model.safetensors").write_text("x")  # the 16-bit merge the converter read
        return {"save_directory": save_directory, "gguf_directory": str(gguf_dir), "gguf_files": [str(f) for f in files],
                "modelfile_location": str(gguf_dir / "Modelfile")}

    model.save_pretrained_gguf = save_pretrained_gguf
    return asked


def test_gguf_takes_several_quantizations_in_one_call_and_pushes_the_gguf_files(tiny_model, tmp_path, hub):
    model, tokenizer = tiny_model
    asked = _stand_in_gguf(model)
    export(model, tokenizer, tmp_path / "out", how="gguf", quantization=["q4_k_m", "q8_0"], push_to_hub="someone/tiny-gguf")
    assert asked == [["q4_k_m", "q8_0"]]
    (_, repo, _), (_, _, upload) = hub
    assert repo == "someone/tiny-gguf" and upload["folder_path"] == str(tmp_path / "out_gguf")
    assert upload["allow_patterns"] == ["*.gguf", "Modelfile"]
    assert upload["files"] == ["Modelfile", "tiny.Q4_K_M.gguf", "tiny.Q8_0.gguf"]
    with pytest.raises(ExportError, match=r"quantization=\['q4_k_m', 'q9'\]"):
        export(model, tokenizer, tmp_path / "again", how="gguf", quantization=["q4_k_m", "q9"])


def _unsloth_save_source():
    """unsloth/save.py as installed, read without importing Unsloth (which needs a GPU), and its module's syntax tree."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("unsloth")
    if spec is None:
        pytest.skip("Unsloth is not installed")
    source = (Path(spec.origin).parent / "save.py").read_text()
    return source, ast.parse(source)


def _unsloth_dict(tree, name: str) -> dict:
    import ast

    [value] = [node.value for node in tree.body if isinstance(node, ast.Assign)
               and any(isinstance(target, ast.Name) and target.id == name for target in node.targets)]
    return ast.literal_eval(value)


def test_gguf_methods_are_unsloths_read_as_unsloth_reads_them(tiny_model, tmp_path):
    import ast

    from grpo_lite.model.exporter import GGUF_IMATRIX_QUANTIZATIONS, GGUF_QUANTIZATIONS

    source, tree = _unsloth_save_source()
    assert GGUF_QUANTIZATIONS == tuple(_unsloth_dict(tree, "ALLOWED_QUANTS"))
    assert GGUF_IMATRIX_QUANTIZATIONS == tuple(_unsloth_dict(tree, "IMATRIX_QUANTS"))
    [reader] = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "unsloth_save_pretrained_gguf"]
    read = ast.get_source_segment(source, reader)
    # its rule: None is q8_0, a name is lower-cased, then three aliases
    assert 'quant_method = "q8_0"' in read and "quant_method = quant_method.lower()" in read
    for alias, method in (("not_quantized", "f16"), ("fast_quantized", "q8_0"), ("quantized", "q4_k_m")):
        assert f'if quant_method == "{alias}":\n                    quant_method = "{method}"' in read or \
               f'elif quant_method == "{alias}":\n                    quant_method = "{method}"' in read, alias

    model, tokenizer = tiny_model
    asked = _stand_in_gguf(model)
    export(model, tokenizer, tmp_path / "upper", how="GGUF", quantization="Q8_0")
    export(model, tokenizer, tmp_path / "all", how="gguf", quantization=[method.upper() for method in GGUF_QUANTIZATIONS])
    export(model, tokenizer, tmp_path / "none", how="gguf", quantization=None)
    aliases = {"not_quantized": "f16", "fast_quantized": "q8_0", "quantized": "q4_k_m"}
    assert asked == ["q8_0", [aliases.get(method, method) for method in GGUF_QUANTIZATIONS], "q8_0"]
    with pytest.raises(ExportError, match=r"quantization='IQ2_XS'; IQ2_XS need an importance matrix \(Unsloth's imatrix_file\)"):
        export(model, tokenizer, tmp_path / "iq", how="gguf", quantization="IQ2_XS")
    with pytest.raises(ExportError, match=r"quantization=' q8_0'; for GGUF use one of not_quantized, "):
        export(model, tokenizer, tmp_path / "space", how="gguf", quantization=" q8_0")  # Unsloth does not strip it either


@pytest.mark.parametrize("how, written", [("LoRA", "adapter_model.safetensors"), ("Merged-16bit", "model.safetensors"),
                                          (" merged 16bit ", "model.safetensors")])
def test_how_is_read_as_unsloth_reads_a_save_method(trained_lora, tmp_path, how, written):
    source, _ = _unsloth_save_source()
    assert 'save_method.lower().strip().replace("-", "_").replace(" ", "_")' in source  # unsloth/save.py's rule
    model, tokenizer = trained_lora
    export(model, tokenizer, tmp_path, how=how)
    assert (tmp_path / written).exists()


def test_the_adapter_export_after_training_is_the_trained_adapter_alone(tiny_model, tiny_model_dir, tmp_path):
    from peft import PeftModel

    from grpo_lite import prepare_dataset, train

    model, tokenizer = tiny_model
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)]
    result = train(model, tokenizer, prepare_dataset(rows), [lambda completions, **kw: [len(c[0]["content"]) % 3 / 2 for c in completions]],
                   preset="cpu-smoke", output_dir=tmp_path / "run", dashboard=False, max_steps=1, num_generations=4,
                   per_device_train_batch_size=4, max_completion_length=8, beta=0.04, learning_rate=1e-2, warmup_steps=0)
    export(result.model, tokenizer, tmp_path / "adapter", how="adapter")

    configs = sorted(str(p.relative_to(tmp_path / "adapter")) for p in (tmp_path / "adapter").rglob("adapter_config.json"))
    assert configs == ["adapter_config.json"]  # TRL 1.x's frozen "ref" copy is not written beside it
    assert not (tmp_path / "run" / "ref").exists()  # nor in the run's own folder
    assert list(result.model.peft_config) == [result.model.active_adapter]
    ids = tokenizer("What is 3 + 3?", return_tensors="pt")["input_ids"]
    reloaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), tmp_path / "adapter").eval()
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    result.model.eval()
    with torch.no_grad():
        trained, again, untrained = (m(input_ids=ids).logits for m in (result.model, reloaded, base))
    assert torch.allclose(trained, again, atol=1e-5) and not torch.allclose(trained, untrained, atol=1e-3)
