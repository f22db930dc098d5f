"""Benchmark scripts run end to end (their CPU dry runs); the figures themselves live in docs/benchmarks.md."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from stacks import newer_only

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_comparison_dry_run_measures_every_variant(tmp_path):
    proc = subprocess.run([sys.executable, "benchmarks/gpu_compare.py", "--dry-run", "--json", str(tmp_path / "m.json")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| trl_16bit") or line.startswith("| grpo_lite_cpu")]
    assert len(rows) == 2 and not any("failed" in row for row in rows), proc.stdout
    assert rows[0].split("|")[8].strip() == "1.00"  # the baseline's memory ratio to itself
    measured = json.loads((tmp_path / "m.json").read_text())
    assert [m["variant"] for m in measured] == ["trl_16bit", "grpo_lite_cpu"]
    assert all(m["planned_gb"] > 0 and m["step_time_range"][0] <= m["seconds_per_step"] <= m["step_time_range"][1] for m in measured)


def test_docs_sections_are_replaced_not_duplicated(tmp_path):
    sys.path.insert(0, str(ROOT))
    from benchmarks.docs import replace_section

    doc = tmp_path / "benchmarks.md"
    replace_section("## A", "## A\n\nfirst", doc)
    replace_section("## B", "## B\n\nother", doc)
    replace_section("## A", "## A\n\nsecond", doc)
    text = doc.read_text()
    assert text.count("## A") == 1 and "second" in text and "first" not in text and "## B\n\nother" in text


@newer_only("trl_math_rewards")  # the ratio is against trl.rewards.accuracy_reward
def test_reward_benchmark_measures_every_reward_and_the_trl_ratio():
    proc = subprocess.run([sys.executable, "benchmarks/rewards_bench.py", "--n", "128", "--math-n", "16"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| `soft_xml_format_reward` |" in proc.stdout and "| `trl.rewards.accuracy_reward` (baseline) |" in proc.stdout
    assert "throughput ratio: **" in proc.stdout


@pytest.mark.slow
def test_overhead_benchmark_ends_with_the_ratio_line():
    proc = subprocess.run([sys.executable, "benchmarks/overhead.py", "--repeats", "1", "--steps", "3"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("overhead_ratio=") and float(last.split("=")[1]) > 0
    assert "95% interval" in proc.stdout and "it learns" in proc.stdout


def test_overhead_interval_and_verdict():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from overhead import bootstrap_interval, ratio, verdict

    baseline = [[1.0, 2.0, 1.0, 4.0]] * 3
    slower = [[1.25, 2.5, 1.25, 5.0]] * 3
    assert ratio(slower, baseline) == 1.25
    low, high = bootstrap_interval(slower, baseline)
    assert 1.03 < low <= 1.25 <= high and verdict(low, high).startswith("over the aim")
    assert verdict(0.97, 1.02).startswith("within") and verdict(0.99, 1.05).startswith("inconclusive")


def test_overhead_ratio_ignores_time_other_jobs_add_to_a_step():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from overhead import ratio

    work = [1.0, 2.0, 1.0, 4.0]
    ours = [[t * 1.02 for t in work]] * 3
    interrupted = [[1.0, 2.9, 1.0, 4.0], [1.6, 2.0, 1.0, 4.0], [1.0, 2.0, 1.0, 4.8]]  # each repeat slowed at one step
    assert ratio(ours, interrupted) == pytest.approx(1.02)
    assert ratio(interrupted, [work] * 3) == pytest.approx(1.0)


def test_run_all_names_only_scripts_that_exist():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from run_all import BENCHMARKS, HERE

    assert all((HERE / script).exists() for script, *_ in BENCHMARKS.values()), BENCHMARKS


def test_run_all_rejects_unknown_benchmarks():
    proc = subprocess.run([sys.executable, "benchmarks/run_all.py", "--only", "nope"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown benchmarks ['nope']" in proc.stderr


@pytest.mark.slow
def test_sandbox_benchmark_reports_the_isolation_ratio():
    proc = subprocess.run([sys.executable, "benchmarks/sandbox_bench.py", "--n", "8"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| trivial program, sandboxed |" in proc.stdout and "Sandboxed / plain throughput ratio: **" in proc.stdout


@pytest.mark.slow
def test_fault_table_publishes_the_rows_its_tests_print():
    proc = subprocess.run([sys.executable, "benchmarks/faults_table.py", "-k", "nan_loss"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| NaN loss |")]
    assert len(rows) == 1 and "| `NaNDetected` | yes: checkpoint-2 resumed to step 4" in rows[0], proc.stdout


@pytest.mark.slow
def test_long_run_benchmark_measures_each_cost_against_its_first_checkpoint():
    proc = subprocess.run([sys.executable, "benchmarks/long_run.py", "--steps", "3,40", "--repeats", "2", "--rows", "8,24",
                           "--show-run", "20,40"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| notebook update: `frame()` + `frame_html` | " in proc.stdout and "| step 3 | step 40 |" in proc.stdout
    assert "| `str(report)` | " in proc.stdout and "| page bytes | " in proc.stdout
    last = proc.stdout.strip().splitlines()[-1]
    ratios = dict(item.split(":") for item in last.removeprefix("long_run_worst_ratios=").split(","))
    assert last.startswith("long_run_worst_ratios=") and set(ratios) == {"notebook", "terminal", "html_bytes", "chart", "lab_display_s"}
    assert all(float(value) > 0 for value in ratios.values())
