"""Train the vision demo model shipped in ``grpo_lite/assets/vision-demo-model`` (CPU, one thread).

The model is a tiny Qwen2.5-VL (``grpo_lite.model.tiny``, byte-level tokenizer, a 2-block vision tower) taught by
supervised fine-tuning to answer the picture questions of :mod:`grpo_lite.data.pictures` ("What colour are the
shapes?", "How many shapes are there?", "What shape are they?") as "The answer is red.", from a teacher with a habit
GRPO can break: in ``--right-share`` of its targets the answer is right; in the others it is the teacher's steady
mistake, the next colour of red, green, blue, yellow, one shape more than drawn, or the next shape of circle, square,
triangle.

Greedy decoding takes the most common habit, the mistake, so it is usually wrong; sampling often reaches the right
answer, so pass@8 is far above greedy accuracy, and GRPO with a correctness reward has something to sharpen.
Pictures of the held-out scenes (:data:`grpo_lite.data.pictures.HELDOUT_SCENES`) are never trained on. The same seed
gives the same weights (training runs on one thread)::

    python scripts/train_vision_demo_model.py --seed 0
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path

import torch

from grpo_lite.data.pictures import COLOURS, SHAPES, picture_questions
from grpo_lite.data.prepare import prepare_dataset
from grpo_lite.data.prompts import render_prompt
from grpo_lite.model.tiny import build_tiny_model, save_model

ASSET_DIR = Path(__file__).resolve().parents[1] / "grpo_lite" / "assets" / "vision-demo-model"


def mistake(answer: str, kind: str) -> str:
    """The teacher's steady mistake for ``answer`` to a ``kind`` question: the next colour, one more, the next shape."""
    if kind == "count":
        return str(int(answer) + 1)
    names = list(COLOURS) if kind == "colour" else list(SHAPES)
    return names[(names.index(answer) + 1) % len(names)]


def training_examples(n: int, seed: int, right_share: float) -> list[dict]:
    """Rows of :func:`picture_questions`, each with the teacher's ``target``: the right answer in ``right_share`` of
    them, its mistake in the others."""
    rows = picture_questions(n, seed=seed + 1000)
    rng = random.Random(seed)
    for row in rows:
        said = row["answer"] if rng.random() < right_share else mistake(row["answer"], row["kind"])
        row["target"] = f"The answer is {said}."
    return rows


def batches(examples: list[dict], batch_size: int, processor, rng: random.Random):
    """Shuffled batches, forever: the processor's inputs for prompt + target, and labels that score only the target
    (and its end-of-turn token)."""
    tokenizer = processor.tokenizer
    while True:
        order = list(range(len(examples)))
        rng.shuffle(order)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            chunk = [examples[i] for i in order[start : start + batch_size]]
            texts = [render_prompt(processor, row["prompt"]) + row["target"] + tokenizer.eos_token for row in chunk]
            inputs = processor(text=texts, images=[row["image"] for row in chunk], padding=True, return_tensors="pt")
            labels = torch.full_like(inputs["input_ids"], -100)
            for i, row in enumerate(chunk):  # right-padded: each target ends where the row's tokens end
                end = int(inputs["attention_mask"][i].sum())
                width = len(tokenizer(row["target"], add_special_tokens=False)["input_ids"]) + 1
                labels[i, end - width : end] = inputs["input_ids"][i, end - width : end]
            yield inputs, labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--examples", type=int, default=12000)
    parser.add_argument("--right-share", type=float, default=0.4, help="share of targets that answer right")
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ASSET_DIR)
    args = parser.parse_args()

    from transformers import AutoModelForImageTextToText, AutoProcessor, get_cosine_schedule_with_warmup

    torch.set_num_threads(1)  # the same seed gives the same weights: thread count changes float summation order
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory() as scratch:
        build_tiny_model(scratch, family="qwen2.5-vl", seed=args.seed, hidden_size=args.hidden_size,
                         num_layers=args.num_layers, num_heads=args.hidden_size // 16, intermediate_size=2 * args.hidden_size,
                         max_position_embeddings=512)
        model = AutoModelForImageTextToText.from_pretrained(scratch)
        processor = AutoProcessor.from_pretrained(scratch)
        processor.tokenizer.padding_side = "right"
        # Prompts as the demo asks them: no system prompt, the image before the question
        examples = list(prepare_dataset(training_examples(args.examples, args.seed, args.right_share), system_prompt=None))
        stream = batches(examples, args.batch_size, processor, random.Random(args.seed))
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.01)
        schedule = get_cosine_schedule_with_warmup(optimizer, args.steps // 20, args.steps)
        model.train()
        for step in range(1, args.steps + 1):
            inputs, labels = next(stream)
            loss = model(**inputs, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            if step % 50 == 0 or step == args.steps:
                print(f"step {step}/{args.steps}  loss {loss.item():.3f}", flush=True)

        args.out.mkdir(parents=True, exist_ok=True)
        # The tokenizer's and processor's files as build_tiny_model wrote them, and the model's config, in the forms
        # transformers 4.56 and 5 read alike; not its note that the weights are random
        for file in Path(scratch).iterdir():
            if file.name not in ("model.safetensors", "grpo_lite_tiny.json"):
                (args.out / file.name).write_bytes(file.read_bytes())
        save_model(model, args.out)
    recipe = {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items() if key != "out"}
    (args.out / "training_args.json").write_text(json.dumps(recipe, indent=2) + "\n")
    print(f"saved the vision demo model to {args.out}")


if __name__ == "__main__":
    main()
