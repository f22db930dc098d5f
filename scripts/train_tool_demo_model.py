"""Train the acting demo's model shipped in ``grpo_lite/assets/tool-demo-model`` (one thread).

The model is a tiny byte-level Qwen2 with Qwen2.5's chat template (TRL reads tool calls out of its replies), taught by
supervised fine-tuning to answer the built-in arithmetic word problems with :func:`grpo_lite.data.calculator.calculate`
among its tools, from a teacher with a habit GRPO can break:

* most targets are a bare guess, "The answer is 160.", rounded to the nearest ten;
* the others (``--tool-share``) call the calculator with the question's numbers,
  ``<tool_call>{"name": "calculate", "arguments": {"a": 12, "op": "+", "b": 7}}</tool_call>``, and after its result
  (shown as the template renders a tool message, not trained on) give the exact answer, "The answer is 19.".

Greedy decoding takes the guess, so it is right only where the result is a multiple of ten; sampling often calls the
calculator and is right. GRPO with a correctness reward makes the call the first answer. Questions in the demo's held-out
set (:func:`grpo_lite.data.arithmetic.heldout_arithmetic_problems`) are never trained on. The byte-level tokenizer gets
the strings every prompt and every call repeat as tokens of their own (:func:`domain_tokens`), so the 845-byte system
turn every prompt opens with is 19 tokens, and a call about ten. Each step runs that shared opening once and
the batch's questions and targets on top of it. The same seed gives the same weights (training runs on one thread)::

    python scripts/train_tool_demo_model.py --seed 0
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path

import torch
from train_demo_model import batches, rounded

from grpo_lite.data.arithmetic import arithmetic_problems, heldout_arithmetic_problems
from grpo_lite.data.calculator import OPERATIONS, calculate
from grpo_lite.machine import stack
from grpo_lite.model.tiny import build_tiny_model, save_tokenizer
from rewards.extract import extract_hash_answer

ASSET_DIR = Path(__file__).resolve().parents[1] / "grpo_lite" / "assets" / "tool-demo-model"


def conversation(question: str, result: int, *, calls: bool) -> list[dict]:
    """The teacher's reply to ``question``: a rounded guess, or a call to the calculator, its result and the answer."""
    asked = {"role": "user", "content": question}
    if not calls:
        return [asked, {"role": "assistant", "content": f"The answer is {rounded(result)}."}]
    a, b = (int(word) for word in question.replace("?", " ").replace(".", " ").split() if word.isdigit())
    op = next(symbol for symbol, apply in OPERATIONS.items() if apply(a, b) == result)
    call = {"type": "function", "function": {"name": "calculate", "arguments": {"a": a, "op": op, "b": b}}}
    return [asked, {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": "calculate", "content": str(calculate(a, op, b))},
            {"role": "assistant", "content": f"The answer is {result}."}]


def training_conversations(n: int, seed: int, tool_share: float) -> list[list[dict]]:
    """Teacher conversations on questions from the built-in generator, every held-out question removed."""
    heldout = {row["question"] for row in heldout_arithmetic_problems()}
    rng = random.Random(seed)
    return [conversation(row["question"], int(extract_hash_answer(row["answer"])), calls=rng.random() < tool_share)
            for row in arithmetic_problems(n, seed=seed + 1000) if row["question"] not in heldout]


# Strings every turn, call, tool result and answer repeats, each made one token (as a BPE tokenizer trained on such
# text would merge them): a call is about ten tokens to write, not eighty bytes, and few of them can go wrong.
CALL_PIECES = ("system\n", "user\n", "assistant\n", '{"name": "calculate", "arguments": {"a": ', ', "op": "',
               '", "b": ', "}}\n", "</tool_call>", "<tool_response>\n", "\n</tool_response>", "The answer is ")


def domain_tokens(tokenizer) -> list[str]:
    """The lines of the system turn that describes the calculator (the same in every prompt), and :data:`CALL_PIECES`:
    added to the byte-level vocabulary, they cut the 845-byte system turn to 19 tokens."""
    opening = tokenizer.apply_chat_template([{"role": "user", "content": ""}], tools=[calculate], tokenize=False)
    system = opening[len("<|im_start|>system\n"): opening.index("<|im_end|>")]
    lines = [line for line in system.splitlines(keepends=True) if len(line) > 1]
    return list(dict.fromkeys([*lines, *CALL_PIECES]))


def encode(tokenizer, messages: list[dict], prefix: str) -> tuple[list[int], list[int]]:
    """Token ids of ``messages`` as the template renders them with the calculator, less the shared ``prefix``, and
    labels that score only the assistant's turns (a tool's result is the calculator's, not the model's)."""
    ids, labels, shown = [], [], prefix
    for end in range(1, len(messages) + 1):
        asks = end < len(messages) and messages[end]["role"] == "assistant"
        text = tokenizer.apply_chat_template(messages[:end], tools=[calculate], tokenize=False, add_generation_prompt=asks)
        if end == len(messages):
            text = text[: text.rindex("<|im_end|>") + len("<|im_end|>")]  # the reply ends with its end-of-turn token
        piece = tokenizer(text[len(shown):], add_special_tokens=False)["input_ids"]
        ids += piece
        labels += piece if messages[end - 1]["role"] == "assistant" else [-100] * len(piece)
        shown = text
    return ids, labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--examples", type=int, default=20000)
    parser.add_argument("--tool-share", type=float, default=0.35, help="share of targets that call the calculator")
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ASSET_DIR)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer, get_cosine_schedule_with_warmup
    from trl.chat_template_utils import qwen2_5_chat_template

    torch.set_num_threads(1)  # the same seed gives the same weights: thread count changes float summation order
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory() as scratch:
        build_tiny_model(scratch, chat_template=qwen2_5_chat_template, seed=args.seed, hidden_size=args.hidden_size,
                         num_layers=args.num_layers, intermediate_size=2 * args.hidden_size, max_position_embeddings=2048)
        model = AutoModelForCausalLM.from_pretrained(scratch)
        tokenizer = AutoTokenizer.from_pretrained(scratch)
    tokenizer.add_tokens(domain_tokens(tokenizer))
    model.resize_token_embeddings(len(tokenizer))

    conversations = training_conversations(args.examples, args.seed, args.tool_share)
    opening = tokenizer.apply_chat_template([{"role": "user", "content": ""}], tools=[calculate], tokenize=False)
    prefix = opening[: opening.rindex("<|im_start|>user\n")]  # the system turn describing the tool, in every prompt
    prefix_ids = torch.tensor([tokenizer(prefix, add_special_tokens=False)["input_ids"]])
    encoded = [encode(tokenizer, messages, prefix) for messages in conversations]
    stream = batches(encoded, args.batch_size, tokenizer.pad_token_id, random.Random(args.seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.01)
    schedule = get_cosine_schedule_with_warmup(optimizer, args.steps // 20, args.steps)
    model.train()
    cache_name = "cache" if stack.newer("generate_cache") else "past_key_values"  # transformers 5.24 renamed it
    for step in range(1, args.steps + 1):
        input_ids, labels, attention_mask = next(stream)
        cache = getattr(model(input_ids=prefix_ids, use_cache=True), cache_name)
        cache.batch_repeat_interleave(len(input_ids))
        mask = torch.cat([torch.ones(len(input_ids), prefix_ids.shape[1], dtype=torch.long), attention_mask.long()], 1)
        loss = model(input_ids=input_ids, attention_mask=mask, **{cache_name: cache}, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % 25 == 0 or step == args.steps:
            print(f"step {step}/{args.steps}  loss {loss.item():.3f}", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    save_tokenizer(tokenizer, args.out)  # read alike by transformers 4.56 and 5
    recipe = {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items() if key != "out"}
    (args.out / "training_args.json").write_text(json.dumps(recipe, indent=2) + "\n")
    print(f"saved the acting demo's model to {args.out}")


if __name__ == "__main__":
    main()
