"""Train the demo model shipped in ``grpo_lite/assets/demo-model`` (about 15 CPU minutes, one thread).

The model is a tiny byte-level Qwen2 (``grpo_lite.model.tiny``) taught by supervised fine-tuning to answer the
built-in arithmetic word problems, from a teacher with a habit GRPO can break:

* worked answers (``--worked-share`` of the targets) write the sum out in ``<reasoning>`` and give the
  exact result in ``<answer>``;
* the other targets are a bare guess, "The answer is 160.", rounded to the nearest ten except in
  ``--exact-guess-share`` of them.

Greedy decoding takes the most common habit, a rounded guess without tags, so it is often wrong and never
formatted; sampling often reaches an exact guess or a worked answer, so pass@8 is far above greedy
accuracy. GRPO with a correctness reward then has something to sharpen: the exact answers it samples.
Questions in the demo's held-out set (:func:`grpo_lite.data.arithmetic.heldout_arithmetic_problems`) are never trained
on. The same seed gives the same weights (training runs on one thread)::

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

from grpo_lite.data.arithmetic import arithmetic_problems, heldout_arithmetic_problems
from grpo_lite.model.tiny import build_tiny_model, save_tokenizer
from rewards.extract import extract_hash_answer

ASSET_DIR = Path(__file__).resolve().parents[1] / "grpo_lite" / "assets" / "demo-model"
OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def rounded(value: int) -> int:
    """To the nearest ten, halves up: the sloppy teacher's guess."""
    return 10 * ((value + 5) // 10)


def solution(question: str, result: int, *, worked: bool, exact: bool) -> str:
    """A worked answer in tags (always exact), or a bare guess, exact or rounded to the nearest ten."""
    if not worked:
        return f"The answer is {result if exact else rounded(result)}."
    a, b = (int(word) for word in question.replace("?", " ").replace(".", " ").split() if word.isdigit())
    symbol = next(s for s, apply in OPERATORS.items() if apply(a, b) == result)
    return f"<reasoning>\n{a} {symbol} {b} = {result}\n</reasoning>\n<answer>\n{result}\n</answer>"


def training_examples(n: int, seed: int, worked_share: float, exact_guess_share: float) -> list[tuple[str, str]]:
    """(question, target) pairs from the built-in generator, with every held-out question removed."""
    heldout = {row["question"] for row in heldout_arithmetic_problems()}
    rng = random.Random(seed)
    examples = []
    for row in arithmetic_problems(n, seed=seed + 1000):
        if row["question"] in heldout:
            continue
        result = int(extract_hash_answer(row["answer"]))
        worked, exact = rng.random() < worked_share, rng.random() < exact_guess_share
        examples.append((row["question"], solution(row["question"], result, worked=worked, exact=exact)))
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
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--examples", type=int, default=20000)
    parser.add_argument("--worked-share", type=float, default=0.25, help="share of targets worked out in <reasoning>/<answer>")
    parser.add_argument("--exact-guess-share", type=float, default=0.3, help="share of bare guesses that are exact, not rounded")
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ASSET_DIR)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer, get_cosine_schedule_with_warmup

    torch.set_num_threads(1)  # the same seed gives the same weights: thread count changes float summation order
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

    examples = training_examples(args.examples, args.seed, args.worked_share, args.exact_guess_share)
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
    save_tokenizer(tokenizer, args.out)  # read alike by transformers 4.56 and 5
    recipe = {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items() if key != "out"}
    (args.out / "training_args.json").write_text(json.dumps(recipe, indent=2) + "\n")
    print(f"saved the demo model to {args.out}")


if __name__ == "__main__":
    main()
