"""Re-record healthy.jsonl: the metric stream of a real 8-step tiny GRPO run (`python tests/data/streams/record.py`).

The random tiny model never emits its end token, so it also stops on punctuation and digits; otherwise
every completion is truncated and the run would not be a healthy one.
"""

import json
import tempfile
from pathlib import Path

from grpo_lite import load_model, prepare_dataset, read_metrics, train
from grpo_lite.model.tiny import build_tiny_model

STREAM = Path(__file__).with_name("healthy.jsonl")


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) / 10 for c in completions]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model, tokenizer = load_model(str(build_tiny_model(Path(tmp) / "model", seed=0)), lora_rank=8)
        stops = tokenizer.convert_tokens_to_ids(list(".,;:!?0123456789"))
        model.generation_config.eos_token_id = [tokenizer.eos_token_id, *stops]
        rows = [{"question": f"Spell {word}", "answer": word} for word in ["cat", "dog", "owl", "bee"] * 4]
        train(model, tokenizer, prepare_dataset(rows, system_prompt=None), [length_reward], preset="cpu-smoke",
              output_dir=Path(tmp) / "run", max_steps=8, max_completion_length=16, save_steps=100, dashboard=False)
        records = [{k: v for k, v in r.items() if k != "time"} for r in read_metrics(Path(tmp) / "run")]
    STREAM.write_text("".join(json.dumps(r) + "\n" for r in records))


if __name__ == "__main__":
    main()
