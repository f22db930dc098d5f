"""Health rules on metric streams: quiet on a real healthy run, and each rule trips on its failure shape.

healthy.jsonl is the metrics.jsonl of a real 8-step tiny run (tests/data/streams/record.py). Each failure
shape is that stream with the metrics of one failure written over chosen steps.
"""

import itertools
import json
import math
from pathlib import Path

import pytest

from grpo_lite.monitor.health import HealthMonitor, HealthWarning, replay
from rewards.diagnoses import DIAGNOSES

STREAMS = Path(__file__).parent / "data" / "streams"
DOCS = Path(__file__).parents[1] / "docs" / "monitoring.md"
HEALTHY = dict(beta=0.04, reward_names=["length_reward"])


def healthy(steps: int = 8) -> list[dict]:
    """The recorded healthy stream, cycled to ``steps`` steps and renumbered."""
    records = [json.loads(line) for line in (STREAMS / "healthy.jsonl").read_text().splitlines()]
    return [{**record, "step": step} for step, record in zip(range(1, steps + 1), itertools.cycle(records))]


def broken(records: list[dict], steps, **metrics) -> list[dict]:
    """``records`` with ``metrics`` (keys with ``__`` for ``/``) written over the given steps."""
    values = {key.replace("__", "/"): value for key, value in metrics.items()}
    return [{**r, **values} if r["step"] in steps else r for r in records]


def playing(steps: int = 8) -> list[dict]:
    """The healthy stream of a run with tools: each episode calls a tool once, no call fails, half end at the turn limit."""
    return [{**r, "tools/call_frequency": 1.0, "tools/failure_frequency": 0.0, "episodes/model_turns": 1.5,
             "episodes/turn_limit": 0.5, "episodes/tool_error": 0.0} for r in healthy(steps)]


def fired(records, **options) -> list[tuple[str, int]]:
    return [(w.rule, w.step) for w in replay(records, **{**HEALTHY, **options})]


def test_a_real_healthy_run_raises_no_warning():
    assert fired(healthy()) == []


def test_a_healthy_run_with_tools_raises_no_warning_and_the_episode_rules_need_their_metrics():
    assert fired(playing()) == []
    # a run without tools logs none of tools/* and episodes/*: its steps are no streak of a tool never called
    assert fired(broken(healthy(), range(1, 9), tools__call_frequency=None)) == []


def test_a_warning_fires_once_per_episode_and_again_after_it_clears():
    records = broken(healthy(), {2, 3, 6}, kl=0.9)
    monitor = HealthMonitor(**HEALTHY)
    new_per_step = [[w.rule for w in monitor.update(r)] for r in records]
    assert new_per_step == [[], ["kl_high"], [], [], [], ["kl_high"], [], []]
    assert [w.step for w in monitor.warnings] == [2, 6]
    warning = monitor.warnings[0]
    assert isinstance(warning, HealthWarning) and "0.9" in warning.message and "beta" in warning.fix


@pytest.mark.parametrize(
    "rule, records, options, step",
    [
        ("no_signal", broken(healthy(), range(3, 9), reward_std=0.05), {}, 5),
        ("no_signal", broken(healthy(), {4}, frac_reward_zero_std=1.0), {}, 4),
        ("truncated", broken(healthy(), range(2, 9), completions__clipped_ratio=1.0), {}, 2),
        ("nan", broken(healthy(), {6}, loss=None), {}, 6),  # metrics.jsonl writes NaN as null
        ("nan", broken(healthy(), {7}, grad_norm="inf"), {}, 7),
        ("kl_absent", broken(healthy(), range(1, 9), kl=None), {"beta": 0.0}, 1),
        ("kl_absent", broken(healthy(), range(1, 9), kl=None), {"beta": None}, 1),
        ("zero_grad", broken(healthy(), range(1, 9), grad_norm=0.0), {}, 3),
        ("advantage_not_centered", broken(healthy(), {5}, invariants__within_group_adv_sum_absmax=1.5), {}, 5),
        ("empty_completion_mask", broken(healthy(), range(2, 9), invariants__completion_tokens=0.0), {}, 2),
        ("kl_dominates", broken(healthy(), range(4, 9), invariants__kl_share=0.9), {}, 4),
        ("constant_reward", broken(healthy(12), range(1, 13), rewards__length_reward__mean=1.0,
                                   rewards__length_reward__std=0.0), {}, 10),
        ("turn_limit", broken(playing(), {4, 5}, episodes__turn_limit=1.0), {}, 4),
        ("tool_always_fails", broken(playing(), range(3, 9), tools__failure_frequency=1.0), {}, 5),
        ("no_tool_calls", broken(playing(), range(2, 9), tools__call_frequency=0.0, tools__failure_frequency=0.0), {}, 4),
    ],
)
def test_each_rule_trips_on_its_failure_shape(rule, records, options, step):
    assert (rule, step) in fired(records, **options)
    assert fired(records, **options).count((rule, step)) == 1


def test_reward_not_improving_judges_the_trend_over_the_window():
    declining = [{**r, "reward": 1.0 - r["step"] / 40} for r in healthy(40)]
    improving = [{**r, "reward": r["step"] / 40} for r in healthy(40)]
    assert ("reward_not_improving", 30) in fired(declining)
    assert fired(improving) == []
    assert ("reward_not_improving", 10) in fired(declining[:10], max_steps=10)  # short runs: the whole run


def test_reward_not_improving_stays_quiet_on_the_demo_runs_noisy_rising_reward():
    """`grpo-lite demo`'s own steps (reward per step, tests/data/demo_metrics.jsonl): the reward rises from
    about 0.8 to 1.3 over 100 steps, with dips inside 30-step windows."""
    records = [json.loads(line) for line in (Path(__file__).parent / "data" / "demo_metrics.jsonl").read_text().splitlines()]
    rewards = [r["reward"] for r in records]
    assert sum(rewards[-30:]) / 30 > sum(rewards[:30]) / 30 + 0.3
    assert "reward_not_improving" not in [rule for rule, _ in fired(records, max_steps=100)]


def test_reward_not_improving_fires_on_a_noisy_plateau():
    plateau = [{**r, "reward": 0.5 + 0.3 * math.sin(r["step"] * 1.7)} for r in healthy(90)]
    assert "reward_not_improving" in [rule for rule, _ in fired(plateau, max_steps=90)]


def test_constant_reward_stays_quiet_once_the_reward_varies():
    records = broken(healthy(12), range(1, 13), rewards__length_reward__mean=1.0, rewards__length_reward__std=0.0)
    records[4]["rewards/length_reward/std"] = 0.3
    assert "constant_reward" not in [rule for rule, _ in fired(records)]


def test_docs_list_every_rule_with_its_thresholds_and_fix():
    docs = DOCS.read_text()
    for rule in DIAGNOSES:
        assert f"`{rule.name}`" in docs and rule.condition in docs and rule.fix in docs, rule.name
