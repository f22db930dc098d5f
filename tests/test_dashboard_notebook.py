"""The dashboard under a real Jupyter kernel: the saved notebook keeps its final frame, the run dir its files; a run with
tools keeps its episodes there, turn by turn."""

import re
from pathlib import Path

import nbformat
import pytest
from stacks import newer_only

NOTEBOOK = Path(__file__).parent / "notebooks" / "dashboard_run.ipynb"
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "dashboard"


def outputs(notebook, mime: str) -> list[str]:
    """Every output of that MIME type left in the notebook."""
    cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    return [output["data"][mime] for cell in cells for output in cell.outputs if mime in output.get("data", {})]


@pytest.mark.slow
def test_the_saved_notebook_holds_the_final_dashboard(tmp_path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("DASHBOARD_TEST_STEPS", "4")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, startup_timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, ARTIFACTS / NOTEBOOK.name)

    frames = [html for html in outputs(notebook, "text/html") if "grpo-lite-dashboard" in html]
    assert len(frames) == 1, "one display handle, updated in place"
    final = frames[0]
    assert "step</b> 4/4" in final
    assert re.search(r'<img [^>]*src="data:image/png;base64,[A-Za-z0-9+/]{1000,}', final)
    assert re.search(r"<b>reward_std</b><br>[-0-9.e]+<", final)
    assert re.search(r"<b>kl</b><br>[-0-9.e]+<", final), "beta=0.04, so kl is logged and shown"
    assert "<th>episode</th><th>ended</th><th>length_reward</th><th>mentions_answer_reward</th><th>total</th><th>advantage</th>" in final
    # each reply is an episode of one model turn, drawn as a tool-calling rollout's turns are
    assert final.count('<div class="grpo-lite-turn grpo-lite-model"') == final.count('class="grpo-lite-turn') == 6
    assert final.count("<tr><td>4</td>") == 6, "the table shows the newest six completions, from step 4"
    widgets = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"].values()
    buttons = [w["state"] for w in widgets if w["model_name"] == "ButtonModel"]
    assert [(b["description"], b["disabled"]) for b in buttons] == [("Training ended", True)], "the Stop button, off at the end"
    assert "trained 4 of 4 steps" in notebook.cells[-1].outputs[0]["text"]

    run = tmp_path / "run"
    assert (run / "dashboard.png").read_bytes()[:4] == b"\x89PNG"
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 4
    assert len((run / "samples.jsonl").read_text().splitlines()) == 4 * 8


EPISODES_RUN = """
import sys
sys.path.insert(0, {tests!r})
from games import build_tool_calling_model, calls_reward, guess
from grpo_lite import load_model, prepare_dataset, train

model, tokenizer = load_model(str(build_tool_calling_model(Path("tool-caller"))), lora_rank=8)
rows = prepare_dataset([{{"question": f"Find my number from 1 to {{9 - i % 3}}.", "answer": "5"}} for i in range(4)],
                       system_prompt=None)
train(model, tokenizer, rows, [calls_reward], tools=[guess], max_tool_calling_iterations=1, output_dir="run",
      dashboard="notebook", preset="cpu-smoke", max_steps=2, num_generations=4, per_device_train_batch_size=4,
      max_completion_length=192)
"""


@pytest.mark.slow
@newer_only("tools")
def test_the_saved_notebook_holds_each_episode_turn_by_turn(tmp_path):
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("from pathlib import Path\n" + EPISODES_RUN.format(
        tests=str(Path(__file__).parent)))])
    NotebookClient(notebook, timeout=600, startup_timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, ARTIFACTS / "episodes_run.ipynb")

    [final] = [html for html in outputs(notebook, "text/html") if "grpo-lite-dashboard" in html]
    assert "step</b> 2/2" in final and "<th>episode</th><th>ended</th><th>calls_reward</th>" in final
    # a rollout that called guess: its call, then the tool's answer, as the saved output keeps them
    assert re.search(r'grpo-lite-call"[^>]*>guess\(number=\d\)</div><div class="grpo-lite-turn grpo-lite-tool"[^>]*>'
                     r"guess -&gt; (correct|higher|lower)</div>", final), final
    assert re.search(r"<td>(done|turn limit|tool error)</td>", final)
