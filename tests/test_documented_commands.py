"""The ``grpo-lite`` commands the README and docs show work as written."""

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_lite.launch.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def documented_commands() -> list[str]:
    """Every ``grpo-lite <command> ...`` in a code span or a shell block of the README and docs."""
    commands = []
    for doc in DOCS:
        text = doc.read_text()
        commands += re.findall(r"`(grpo-lite [a-z][\w-]* [^`]+)`", text)  # a bare `grpo-lite plan` is a mention
        commands += re.findall(r"^\s*(grpo-lite [a-z][^\n`]*)$", text, flags=re.MULTILINE)
    return sorted(set(commands))


def test_the_docs_show_every_command():
    shown = {shlex.split(command)[1] for command in documented_commands()}
    assert shown >= {"demo", "train", "score", "plan", "launch-kit"}


@pytest.mark.parametrize("command", documented_commands())
def test_each_documented_command_parses(command):
    argv = shlex.split(re.sub(r"\$\w+", "0", command))[1:]  # shell variables ($SEED) stand for numbers here
    if "--help" in argv:
        with pytest.raises(SystemExit) as shown:
            build_parser().parse_args(argv)
        assert shown.value.code == 0
        return
    build_parser().parse_args(argv)


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    assert command in documented_commands(), f"{command!r} is no longer in the docs; update this test"
    executable = str(Path(sys.executable).with_name("grpo-lite"))  # the console script, as a user runs it
    return subprocess.run([executable, *shlex.split(command)[1:]], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_plan_as_written(tmp_path):
    done = _run("grpo-lite plan Qwen2.5-1.5B --gpu T4 --num-generations 8", tmp_path)
    assert done.returncode in (0, 1), done.stderr  # 1: it does not fit, and the nearest config that does is shown
    assert "peak memory" in done.stdout


@pytest.mark.slow
def test_score_as_written(tmp_path):
    rows = [{"prompt": "What is 3 + 4?", "completion": f"<reasoning>3 + 4</reasoning><answer>{n}</answer>", "answer": "7"}
            for n in (7, 8)]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "my_module.py").write_text("def my_reward(completions, **kwargs):\n    return [0.5] * len(completions)\n")
    done = _run("grpo-lite score --rewards gsm8k,my_module:my_reward --data samples.jsonl", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "2 rows x 6 functions" in done.stdout


@pytest.mark.slow
def test_launch_kit_as_written(tmp_path):
    shutil.copy(ROOT / "examples" / "tiny_cpu.yaml", tmp_path / "recipe.yaml")
    done = _run("grpo-lite launch-kit recipe.yaml --out launch --num-gpus 4", tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "launch" / "recipe.yaml").exists() and "accelerate launch" in done.stdout
