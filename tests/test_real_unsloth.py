"""grpo-lite through Unsloth 2026.10.9's real generated UnslothGRPOTrainer and UnslothGRPOConfig, on CPU.

On a GPU machine grpo_lite imports Unsloth first, and Unsloth replaces trl.GRPOTrainer / trl.GRPOConfig for the
whole process with classes it generates from TRL's source (unsloth/models/rl.py, rl_replacements.py). Each test
runs in a subprocess under that patching (tests/real_unsloth.py); the comments name the upstream file that makes
the checked behaviour necessary.
"""

from __future__ import annotations

import pytest
from real_unsloth import requires_unsloth, run_script

pytestmark = [requires_unsloth, pytest.mark.slow]


def test_demo_and_a_transformers_model_train_with_kl_under_unsloths_trainer(tmp_path, tiny_model_dir):
    # rl_replacements.py, _generate_and_score_completions: the generated trainer calls self.model.for_training(...)
    # unconditionally, and only Unsloth's loaders attach it: a model loaded by transformers died at step 1.
    done = run_script(f"""
        import trl
        from grpo_lite import load_model, prepare_dataset, train
        from grpo_lite.demo import run_demo
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
