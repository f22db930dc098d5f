"""Benchmark scripts run end to end (their CPU dry runs); the figures themselves live in docs/benchmarks.md."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import transformers.generation
from stacks import newer_only

ROOT = Path(__file__).resolve().parents[1]


def _rows(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_gpu_comparison_dry_run_prints_each_row_as_it_ends_then_the_tables_and_a_failing_row_with_its_traceback(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_compare import DRY_RUN_ROWS

    # stderr (each row's own output, prefixed with its name) and stdout in one stream, in the order they were written;
    # gen_paged raises once its model is loaded (its engine has a test of its own, below): the run reports it and goes on
    proc = subprocess.run([sys.executable, "benchmarks/gpu_compare.py", "--dry-run", "--json", str(tmp_path / "m.json"),
                           "--table", str(tmp_path / "t.md"), "--fail-in", "gen_paged"], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:]
    lines = proc.stdout.splitlines()
    rows = _rows(proc.stdout)
    assert [r["variant"] for r in rows] == list(DRY_RUN_ROWS), rows
    assert [r["variant"] for r in rows if r["status"] != "ok"] == ["gen_paged"], rows
    for this, following in zip(DRY_RUN_ROWS, list(DRY_RUN_ROWS)[1:]):  # a row's line comes before the next row's output
        reported = next(i for i, line in enumerate(lines) if line.startswith("{") and json.loads(line)["variant"] == this)
        assert reported < next(i for i, line in enumerate(lines) if line.startswith(f"[{following}] "))
    assert json.loads((tmp_path / "m.json").read_text()) == rows
    table = (tmp_path / "t.md").read_text()
    assert "| trl_16bit | " in table and "| engine | gen tok/s | bandwidth limit tok/s |" in table
    baseline = next(line for line in table.splitlines() if line.startswith("| trl_16bit |"))
    assert baseline.split("|")[8].strip() == "1.00"  # the baseline's memory ratio to itself
    train_rows = [r for r in rows if r.get("kind") == "train"]
    assert all(r["planned_gb"] > 0 and r["step_time_range"][0] <= r["seconds_per_step"] <= r["step_time_range"][1] for r in train_rows)
    for r in (r for r in rows if r.get("kind") == "generate"):
        assert r["gen_tokens"] == 8 * 8 and 0 < r["gen_vs_bandwidth_limit"] < 1 and r["first_call_s"] > 0, r
    # the failing row: its whole traceback, from the row's entry point to the line that raised
    failed = next(r for r in rows if r["variant"] == "gen_paged")
    assert failed["status"] == "failed" and failed["error"].startswith("Traceback (most recent call last):")
    assert "in _generation_row" in failed["error"]
    assert failed["error"].rstrip().endswith("PlantedFailure: --fail-in gen_paged: raised after loading the model")
    assert "| gen_paged | failed: PlantedFailure: --fail-in gen_paged" in proc.stdout


@pytest.mark.skipif(not hasattr(transformers.generation, "ContinuousBatchingConfig"),
                    reason=f"benchmarks/gpu_compare.py runs on the lock stack; transformers {transformers.__version__} has no ContinuousBatchingConfig")
@pytest.mark.parametrize("row", ["gen_dynamic", "gen_paged"])
def test_each_generation_engine_makes_every_token_it_is_timed_for_even_where_eos_is_likely(tmp_path, row):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_lite.model.tiny import build_tiny_model

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_compare import SEQUENCES, _engine

    build_tiny_model(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    with torch.no_grad():  # EOS now ends most sampled sequences within a few tokens wherever the engine honours it
        model.lm_head.weight[tokenizer.eos_token_id] += 5.0
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is 12 + 30?"}], add_generation_prompt=True, tokenize=False)
    generate = _engine(row, model, tokenizer, prompt, 8, gpu=False)
    assert [generate() for _ in range(3)] == [SEQUENCES * 8] * 3


def test_a_row_past_its_time_limit_is_killed_with_its_process_group_and_its_output_kept(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_compare import run_in_own_process

    script = tmp_path / "slow_row.py"  # a row that starts a process of its own (as compile workers do), prints, then hangs
    script.write_text("""import subprocess, sys, time
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(f"loading the model (helper {helper.pid})", flush=True)
time.sleep(60)
""")
    result = run_in_own_process("slow_row", [sys.executable, str(script)], 3, tmp_path / "slow_row.json")
    assert result["status"] == "timed_out" and "killed" in result["error"] and result["seconds"] < 10
    assert result["output_tail"].startswith("loading the model")
    helper = int(result["output_tail"].split("helper ")[1].rstrip(")"))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and Path(f"/proc/{helper}").exists():
        time.sleep(0.1)
    assert not Path(f"/proc/{helper}").exists(), "the row's own subprocesses are killed with it"


def test_rows_that_no_longer_fit_the_budget_are_reported_as_not_run(tmp_path, capsys):
    import argparse

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_compare import GPU_ROWS, run_rows, tables

    args = argparse.Namespace(json=tmp_path / "m.json", shape="qwen2.5-0.5b", steps=2, completion_tokens=64, dry_run=False, fail_in=None)
    results = run_rows(GPU_ROWS, tmp_path / "model", tmp_path, args, budget_s=5)
    assert _rows(capsys.readouterr().out) == results == json.loads((tmp_path / "m.json").read_text())
    assert [r["variant"] for r in results] == list(GPU_ROWS)
    assert all(r["status"] == "not_run" and "of the 5 s budget left" in r["error"] for r in results)
    assert "| trl_16bit | not run: " in tables(results) and "| gen_dynamic | not run: " in tables(results)


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
