"""One table of diagnoses: a problem planted once gets the same verdict and the same fix in the reward lab,
preview, rescore_run and the live health monitor."""

import zlib

import pytest

from grpo_lite import prepare_dataset, preview, rescore_run
from grpo_lite.monitor.health import HealthMonitor
from grpo_lite.run.files import SAMPLES_FILE, write_jsonl
from rewards import check_rewards
from rewards.diagnoses import DIAGNOSES, DIAGNOSIS

# The lab and rescore see scores, not token counts, so truncation is judged by preview and the live monitor only.
PLANTED = {"no_signal", "constant_reward", "truncated"}
WITHOUT_TOKEN_COUNTS = PLANTED - {"truncated"}


def same_per_prompt(completions, prompts, **kwargs):
    """Every completion of a prompt scores the same, prompts differ: groups that teach nothing."""
    return [zlib.crc32(p[-1]["content"].encode()) % 97 / 97 for p in prompts]


def always_one(completions, **kwargs):
    return [1.0] * len(completions)


@pytest.fixture
def planted(tiny_model):
    """preview() of a random tiny model at a 3-token budget (every completion cut) with the planted rewards."""
    model, tokenizer = tiny_model
    questions = prepare_dataset([{"question": f"Spell {w}", "answer": w} for w in ("cat", "dog", "owl", "bee")],
                                system_prompt=None)
    return preview(model, tokenizer, questions, [same_per_prompt, always_one], n_prompts=4, num_generations=4,
                   max_completion_length=3, greedy=False)


def test_a_planted_problem_gets_one_verdict_and_one_fix_in_all_four_places(planted, tmp_path):
    lab = check_rewards([same_per_prompt, always_one], [{k: r[k] for k in ("prompt", "completion")} for r in planted.rows])
    lab_verdicts = {(p.kind, p.fix) for p in lab.problems}

    preview_verdicts = {(f.kind, f.suggestion) for f in planted.findings}

    write_jsonl(tmp_path / SAMPLES_FILE, [{"step": 1, "prompt": r["prompt"], "completion": r["completion"], "advantage": 0.0}
                                          for r in planted.rows])
    rescore_verdicts = {(f.kind, f.suggestion) for f in rescore_run(tmp_path, [same_per_prompt, always_one]).findings}

    monitor = HealthMonitor(beta=0.04, reward_names=["always_one"])
    for step in range(1, DIAGNOSIS["constant_reward"].window + 1):
        monitor.update({"step": step, "reward": 1.0, "reward_std": 0.0, "frac_reward_zero_std": 1.0, "kl": 0.01,
                        "grad_norm": 0.1, "completions/clipped_ratio": 1.0, "rewards/always_one/mean": 1.0,
                        "rewards/always_one/std": 0.0})
    live_verdicts = {(w.rule, w.fix) for w in monitor.warnings}

    expected = {(name, DIAGNOSIS[name].fix) for name in PLANTED}
    assert expected <= preview_verdicts
    assert expected <= live_verdicts
    assert {(name, DIAGNOSIS[name].fix) for name in WITHOUT_TOKEN_COUNTS} <= lab_verdicts
    assert {(name, DIAGNOSIS[name].fix) for name in WITHOUT_TOKEN_COUNTS} <= rescore_verdicts


def test_a_healthy_batch_gets_none_of_the_planted_verdicts(tiny_model):
    model, tokenizer = tiny_model
    questions = prepare_dataset([{"question": f"Spell {w}", "answer": w} for w in ("cat", "dog")], system_prompt=None)

    def varied(completions, **kwargs):
        return [zlib.crc32(str(c).encode()) % 97 / 97 for c in completions]

    report = preview(model, tokenizer, questions, [varied], n_prompts=2, num_generations=4, max_completion_length=3,
                     greedy=False)
    assert {f.kind for f in report.findings} & PLANTED == {"truncated"}
    assert not {p.kind for p in report.lab.problems} & PLANTED


def test_each_diagnosis_is_stated_once():
    assert len({d.name for d in DIAGNOSES}) == len(DIAGNOSES)
    assert all(d.fix and d.condition for d in DIAGNOSES)
