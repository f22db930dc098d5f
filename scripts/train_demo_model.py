"""Train the demo model shipped in ``grpo_lite/assets/demo-model`` (about 10 CPU minutes).

The model is a tiny byte-level Qwen2 (``grpo_lite.tiny``) taught by supervised fine-tuning to answer the
built-in arithmetic word problems. Two things are left for GRPO to fix, on purpose:

* format: most training targets (``--plain-share``) answer in plain text ("The answer is 17.") instead of
  ``<reasoning>``/``<answer>`` blocks, so greedy decoding never uses the tags, but sampling sometimes does;
* accuracy: the step budget is too short to learn every sum and product, so greedy answers are often wrong.

Questions in the demo's held-out set (:func:`grpo_lite.data.heldout_arithmetic_problems`) are never trained
on. The same seed gives the same weights::

    python scripts/train_demo_model.py --seed 0
"""

from __future__ import annotations

import argparse
import json
import operator
import random
import tempfile
from pathlib import Path

import torch

from grpo_lite.data import arithmetic_problems, heldout_arithmetic_problems
from grpo_lite.tiny import build_tiny_model
from rewards.extract import extract_hash_answer

ASSET_DIR = Path(__file__).resolve().parents[1] / "grpo_lite" / "assets" / "demo-model"
OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def solution(question: str, result: int, *, plain: bool) -> str:
    """The worked answer: which operation joins the question's two numbers, then the result."""
    a, b = (int(word) for word in question.replace("?", " ").replace(".", " ").split() if word.isdigit())
    symbol = next(s for s, apply in OPERATORS.items() if apply(a, b) == result)
    step = f"{a} {symbol} {b} = {result}"
    if plain:
        return f"{step}\nThe answer is {result}."
    return f"<reasoning>\n{step}\n</reasoning>\n<answer>\n{result}\n</answer>"


def training_examples(n: int, seed: int, plain_share: float) -> list[tuple[str, str]]:
    """(question, target) pairs from the built-in generator, with every held-out question removed."""
    heldout = {row["question"] for row in heldout_arithmetic_problems()}
    rng = random.Random(seed)
    examples = []
    for row in arithmetic_problems(n, seed=seed + 1000):
        if row["question"] in heldout:
            continue
        result = int(extract_hash_answer(row["answer"]))
        examples.append((row["question"], solution(row["question"], result, plain=rng.random() < plain_share)))
    return examples


def encode(tokenizer, question: str, target: str) -> tuple[list[int], list[int]]:
    """Token ids of prompt + target, and labels that score only the target (and its end-of-turn token)."""
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    target_ids = tokenizer(target, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return prompt_ids + target_ids, [-100] * len(prompt_ids) + target_ids


def batches(encoded, batch_size: int, pad_id: int, rng: random.Random):
    """Shuffled, right-padded batches, forever."""
    while True:
        order = list(range(len(encoded)))
        rng.shuffle(order)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            chunk = [encoded[i] for i in order[start : start + batch_size]]
            width = max(len(ids) for ids, _ in chunk)
            input_ids = torch.tensor([ids + [pad_id] * (width - len(ids)) for ids, _ in chunk])
            labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in chunk])
            yield input_ids, labels, input_ids != pad_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--examples", type=int, default=20000)
    parser.add_argument("--plain-share", type=float, default=0.75, help="share of targets without <reasoning>/<answer>")
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--out", type=Path, default=ASSET_DIR)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer, get_cosine_schedule_with_warmup

    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory() as scratch:
        build_tiny_model(
            scratch,
            seed=args.seed,
            hidden_size=args.hidden_size,
            num_layers=args.num_layers,
            intermediate_size=2 * args.hidden_size,
            max_position_embeddings=512,
        )
        model = AutoModelForCausalLM.from_pretrained(scratch)
        tokenizer = AutoTokenizer.from_pretrained(scratch)

    examples = training_examples(args.examples, args.seed, args.plain_share)
    encoded = [encode(tokenizer, q, t) for q, t in examples]
    stream = batches(encoded, args.batch_size, tokenizer.pad_token_id, random.Random(args.seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.01)
    schedule = get_cosine_schedule_with_warmup(optimizer, args.steps // 20, args.steps)
    model.train()
    for step in range(1, args.steps + 1):
        input_ids, labels, attention_mask = next(stream)
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % 50 == 0 or step == args.steps:
            print(f"step {step}/{args.steps}  loss {loss.item():.3f}", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    recipe = {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items() if key != "out"}
    (args.out / "training_args.json").write_text(json.dumps(recipe, indent=2) + "\n")
    print(f"saved the demo model to {args.out}")


if __name__ == "__main__":
    main()
