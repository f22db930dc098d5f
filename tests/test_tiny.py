import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_lite.model.tiny import build_tiny_model, build_tokenizer


def test_tiny_model_loads_with_plain_transformers_and_round_trips_text(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert model.config.model_type == "qwen2"
    text = "<reasoning>\n2 + 2 = 4, über ∑\n</reasoning>\n<answer> 4 </answer>"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text
    chat = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer(chat, return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] == ids["input_ids"].shape[1] + 5 or tokenizer.eos_token_id in out[0].tolist()


def test_same_seed_same_weights_other_seed_differs(tmp_path):
    a = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path / "a", seed=3))
    b = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path / "b", seed=3))
    c = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path / "c", seed=4))
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(pa, pb), name
    assert any(not torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters()))


def test_building_does_not_disturb_the_callers_rng(tmp_path):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_model(tmp_path / "m")
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.slow
def test_like_a_known_model_has_its_shape_and_vocabulary(tmp_path):
    """What the GPU tests and benchmarks measure on: Qwen2.5-0.5B's shape, 151,936-entry vocabulary included (the
    logits' memory depends on it), and text for every id a random model samples."""
    from grpo_lite.machine.planner import model_shape

    folder = build_tiny_model(tmp_path / "q", like="qwen2.5-0.5b", dtype="bfloat16")
    assert model_shape(folder) == model_shape("qwen2.5-0.5b")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype="auto")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert model.dtype == torch.bfloat16 and len(tokenizer) == model.config.vocab_size == 151936
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(494e6, rel=0.01)  # Qwen2.5-0.5B: 0.49B
    sampled = torch.randint(len(build_tokenizer()), 151936, (64,)).tolist()
    assert all(tokenizer.decode([i]).isalpha() for i in sampled)
    text = "2 + 2 = 4"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


def test_a_tiny_gpt_oss_stops_where_the_real_one_does(tmp_path):
    # openai/gpt-oss-20b's generation_config.json: eos_token_id [200002, 199999, 200012], <|return|>, <|endoftext|> and
    # <|call|>; its tokenizer's eos is <|return|>, its pad <|endoftext|>
    folder = build_tiny_model(tmp_path / "gpt-oss", family="gpt-oss", num_layers=1)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert (tokenizer.eos_token, tokenizer.pad_token, tokenizer.bos_token) == ("<|return|>", "<|endoftext|>", None)
    assert model.generation_config.eos_token_id == tokenizer.convert_tokens_to_ids(["<|return|>", "<|endoftext|>", "<|call|>"])
    assert model.config.num_local_experts == 4 and model.config.num_experts_per_tok == 2
