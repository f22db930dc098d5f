"""tests/gpu/run.sh, the one command a GPU machine runs: its plan fits one call, and its dry run (GPU_DRY_RUN=1: this
machine's CPU and Python, no kit) runs every part end to end and leaves what a reader needs in $OUT."""

import importlib.util
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "gpu" / "run.sh"
PARTS = ["setup", "tests", "compare", "families"]  # in priority order
OUTPUTS = {"timeline.txt", "versions.txt", "gpu-tests.log", "gpu-tests.xml", "gpu-failures.log", "gpu_compare.json",
           "gpu_compare.md", "gpu_compare.log"}
CALL_S, PLAN_S = 600, 560  # the GPU machine runs one command for at most 10 minutes; the plan keeps 40 s spare


def run_script(*args: str, timeout: int = 60, **env: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])  # python3 is this checkout's
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PATH": path, **env})


def plan_rows(text: str) -> dict[str, tuple[int, int]]:
    """{part: (limit s, planned s)} from the plan the script prints."""
    return {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(r"^(\w+) +(\d+) +(\d+)  ", text, re.MULTILINE)}


def test_the_plan_runs_the_parts_in_priority_order_within_one_call():
    done = run_script("plan")
    assert done.returncode == 0, done.stderr
    rows = plan_rows(done.stdout)
    total_limit, total_planned = rows.pop("total")
    assert list(rows) == PARTS
    assert sum(planned for _, planned in rows.values()) == total_planned <= total_limit == PLAN_S < CALL_S
    assert all(planned <= limit for limit, planned in rows.values())
    assert {"test_gpu_load.py", "test_gpu_train.py", "test_gpu_t4_fp16.py", "test_gpu_out_of_memory.py",
            "test_gpu_environments.py"} <= {p.name for p in (ROOT / "tests" / "gpu").glob("test_gpu_*.py")}
    refused = run_script("load")
    assert refused.returncode == 2 and "usage: bash tests/gpu/run.sh all | plan | PART..." in refused.stderr


@pytest.mark.slow
def test_the_dry_run_runs_every_part_and_leaves_what_a_reader_needs(tmp_path):
    out = tmp_path / "out"
    # two of the comparison's rows, one of each kind: tests/test_benchmarks.py runs every dry-run row
    done = run_script("all", timeout=1500, GPU_DRY_RUN="1", OUT=str(out), GPU_COMPARE_ROWS="trl_16bit,gen_dynamic")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    # the planned time of each part on a GPU, before it runs
    planned = plan_rows(done.stdout.split("== setup")[0])
    assert list(planned) == [*PARTS, "total"]
    assert {p.name for p in out.iterdir()} == OUTPUTS and len(OUTPUTS) <= 8
    # each part ran (or says why not), with its measured seconds beside its limit and planned seconds
    timeline = (out / "timeline.txt").read_text()
    measured = {m[1]: (m[4], m[5]) for m in re.finditer(r"^(\w+) +(\d+) +(\d+) +([\d.]+|-)  (.+)$", timeline, re.MULTILINE)}
    assert list(measured) == PARTS
    families = (ROOT / "tests" / "gpu" / "test_gpu_families.py").exists()
    for part, (seconds, result) in measured.items():
        assert result == ("ok" if part != "families" or families else "not run: its test file does not exist"), (part, result)
        assert seconds == "-" or float(seconds) <= planned[part][0] + 30  # measured, within the part's limit
    # pytest's log with the durations and one JUnit file holding every GPU test, each skipped here for want of CUDA
    log = (out / "gpu-tests.log").read_text()
    assert log.count("slowest durations") == 1 + families  # the GPU tests share one pytest process
    cases = ET.parse(out / "gpu-tests.xml").getroot().iter("testcase")
    files = {case.get("classname").rsplit(".", 1)[-1] for case in cases}
    assert {"test_gpu_load", "test_gpu_train", "test_gpu_t4_fp16", "test_gpu_out_of_memory", "test_gpu_environments",
            "test_gpu_vision"} <= files  # the vision and environment parts run too, each skipped for want of CUDA
    assert (out / "gpu-failures.log").read_text() == ""  # nothing failed
    # the comparison's rows as JSON and as tables; the device and versions
    rows = json.loads((out / "gpu_compare.json").read_text())
    assert rows and all(r["status"] == "ok" for r in rows), rows
    assert "| trl_16bit | " in (out / "gpu_compare.md").read_text() and "[trl_16bit] " in (out / "gpu_compare.log").read_text()
    versions = (out / "versions.txt").read_text()
    assert "device: no CUDA GPU (CPU)" in versions and "trl: " in versions and "unsloth: " in versions
    # what `python benchmarks/gpu_compare.py --publish $OUT` puts in docs/benchmarks.md
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_compare import HEADING, section

    text = section(rows, versions.splitlines(), "`bash tests/gpu/run.sh all`", timeline)
    assert text.startswith(f"{HEADING}\n\n`bash tests/gpu/run.sh all` on no CUDA GPU (CPU), ")
    assert "| trl_16bit | " in text and "| gen_dynamic | " in text and "\ntests " in text


TRAINING_RUN = """
import signal, sys, time
def asked_to_stop(*_):  # grpo-lite's trainer: the first Ctrl-C stops after the step, the second interrupts
    print("stopping after this step", flush=True)
    signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGINT, asked_to_stop)
try:
    time.sleep(120)
except KeyboardInterrupt:
    print("summary written", flush=True)
    sys.exit(2)
"""


def test_a_part_past_its_limit_is_stopped_as_ctrl_c_twice_so_its_report_is_still_written():
    stop_at = re.search(r"^stop_at\(\) \{.*?^\}$", SCRIPT.read_text(), re.MULTILINE | re.DOTALL)[0]
    done = subprocess.run(["bash", "-c", f'{stop_at}\nstop_at 2 "$@"; echo "exit $?"', "-", sys.executable, "-c", TRAINING_RUN],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:3] == ["stopping after this step", "summary written", "exit 124"], done


def test_each_gpu_failure_is_written_when_it_happens(tmp_path, monkeypatch):
    """A part stopped at its limit ends before pytest's summary, so tests/gpu/conftest.py writes each failure at once."""
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location("gpu_conftest", ROOT / "tests" / "gpu" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    failures = tmp_path / "gpu-failures.log"
    monkeypatch.setenv("GRPO_LITE_GPU_FAILURES", str(failures))
    for failed, name in ((True, "test_a"), (False, "test_b")):
        conftest.pytest_runtest_logreport(SimpleNamespace(failed=failed, nodeid=f"tests/gpu/x.py::{name}", when="call",
                                                          duration=3.25, longreprtext=f"AssertionError in {name}"))
    assert failures.read_text() == "== tests/gpu/x.py::test_a (call, 3.2 s)\nAssertionError in test_a\n\n"


@pytest.mark.slow
def test_parts_that_no_longer_fit_the_budget_are_not_started(tmp_path):
    done = run_script("tests", "compare", timeout=600, GPU_DRY_RUN="1", OUT=str(tmp_path), GPU_RUN_BUDGET_S="25")
    timeline = (tmp_path / "timeline.txt").read_text()
    assert re.search(r"^setup .* ok$", timeline, re.MULTILINE), timeline
    assert re.search(r"^compare +300 +131 +- +not run: -?\d+ s of the budget left$", timeline, re.MULTILINE), timeline
    assert done.returncode == 0


def test_publishing_the_calls_of_one_session_merges_their_rows_tests_and_timelines(tmp_path):
    """A run that needed a second call on the warm machine (tests/gpu/README.md) is published as one: each row as
    last measured, every GPU test once, both timelines."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_compare import gathered, section

    measured = {"variant": "trl_16bit", "status": "ok", "kind": "train", "peak_allocated_gb": 1.38, "peak_on_card_gb": 2.21,
                "seconds_per_step": 4.35, "step_time_range": [4.35, 4.35], "train_tokens_per_s": 511.0, "planned_gb": 2.05,
                "shape": "qwen2.5-0.5b", "steps": 2, "completion_tokens": 64}
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
        (folder / "versions.txt").write_text("date: 2026-11-27 18:34 UTC\ncommit: abc1234\ndevice: NVIDIA H200 (139.8 GiB)\n")
    (first / "timeline.txt").write_text("what each part took (bash tests/gpu/run.sh all: budget 560 s)\ncompare  300  131  -  not run\n")
    (first / "gpu_compare.json").write_text(json.dumps([{"variant": "trl_16bit", "status": "not_run", "error": "0 s left",
                                                        "shape": "qwen2.5-0.5b", "steps": 2, "completion_tokens": 64}]))
    (first / "gpu-tests.xml").write_text(
        '<testsuites><testsuite name="pytest"><testcase classname="tests.gpu.test_gpu_load" name="test_loads" time="8.2"/>'
        '<testcase classname="tests.gpu.test_gpu_train" name="test_runs" time="3.0"><failure message="no"/></testcase>'
        '<testcase classname="" time="27.0"/></testsuite></testsuites>')
    (second / "timeline.txt").write_text("what each part took (bash tests/gpu/run.sh compare: budget 300 s)\ncompare  300  131  258.3  ok\n")
    (second / "gpu_compare.json").write_text(json.dumps([measured]))

    results, versions, how, timeline, tests = gathered([first, second])
    assert results == [measured]
    assert tests.splitlines()[2:] == ["| test_gpu_load::test_loads | passed | 8.2 |", "| test_gpu_train::test_runs | failure | 3.0 |"]
    text = section(results, versions, how, timeline, tests)
    assert "in 2 calls on one machine" in text and "| trl_16bit | 1.38 | 2.21 | 2.05 | 1.08 | 4.35 (4.35-4.35) | 511 |" in text
    assert "run.sh all: budget 560 s" in text and "run.sh compare: budget 300 s" in text and "test_gpu_load::test_loads" in text
