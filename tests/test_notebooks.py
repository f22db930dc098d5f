"""The notebooks run as written, and as users run them: each executes top to bottom under a real Jupyter kernel in smoke
mode, then again in the same kernel ("Run all" a second time), which trains again in folders of its own, said, keeping
the first run's."""

import base64
import io
import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from families import has_torchvision
from stacks import newer_only

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IDS = [path.name for path in NOTEBOOKS]
VISION_NOTEBOOK = "07_vision_grpo.ipynb"
# The vision notebook's processor needs torchvision, which imports only beside torch's CUDA build: .ci/run runs it in
# .venv-newest with the tests marked cuda_build (docs/stacks.md, "torchvision")
NEEDS_TORCHVISION = [pytest.mark.cuda_build, pytest.mark.skipif(not has_torchvision(), reason="the vision notebook's "
                                                                 "processor needs torchvision (docs/stacks.md, 'torchvision')")]
# The games-and-tools notebook trains with tools and an environment, which only the latest stack's TRL runs. The vision
# notebook's first run is on Colab's free T4: its smoke run is on the T4 stack too (both_stacks)
NEEDS = {VISION_NOTEBOOK: [*NEEDS_TORCHVISION, pytest.mark.both_stacks],
         "08_games_and_tools.ipynb": [newer_only("environment_factory")]}
SMOKE_RUNS = [pytest.param(path, id=path.name, marks=NEEDS.get(path.name, ())) for path in NOTEBOOKS]
THUMBNAIL = re.compile(r'<img class="grpo-lite-thumbnail"[^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def test_there_is_a_notebook_per_workflow():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "07", "08"], IDS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_stripped_and_opens_with_badge_parameters_and_install(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    first = notebook.cells[0]
    assert first.cell_type == "markdown" and "colab.research.google.com/github/" in first.source and path.name in first.source
    assert "GPU" in first.source or "CPU" in first.source, "say what hardware it needs"
    parameters = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(parameters) == 1 and "GRPO_LITE_SMOKE" in parameters[0].source
    assert "kaggle.com/kernels/welcome?src=" in first.source, "a Kaggle badge next to the Colab one"
    assert "GRPO_LITE_FROM" in parameters[0].source
    code = [c.source for c in notebook.cells if c.cell_type == "code"]
    install = next(i for i, source in enumerate(code) if "%pip install" in source and "find_spec" in source)
    assert "check_runtime(allow_cpu=SMOKE)" in code[install + 1], "the runtime check comes right after the install"
    for cell in notebook.cells:
        if cell.cell_type == "code" and not cell.metadata.get("keep_output"):
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: strip outputs before committing"
    assert notebook.metadata.get("accelerator") == "GPU"


@pytest.mark.slow
@pytest.mark.parametrize("path", SMOKE_RUNS)
def test_notebook_runs_in_smoke_mode(path, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("GRPO_LITE_SMOKE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=900, startup_timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute(cleanup_kc=False)  # raises CellExecutionError, with the cell and traceback, on any error
    assert os.listdir(tmp_path), "the notebook should leave its outputs in its working directory"
    first = run_folders(tmp_path)
    assert first, "the notebook should train at least one run"
    client.execute()  # "Run all" again, in the same kernel
    out = ROOT / "test-artifacts" / "notebooks"
    out.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, out / path.name)
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, json.dumps(errors)[:2000]
    both = run_folders(tmp_path)
    assert {folder: both.get(folder) for folder in first} == first, "the second run changed a run of the first"
    said = "\n".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
    again = sorted(set(both) - set(first))
    assert len(again) == len(first), f"the second run should train as many runs, in folders of their own: {again}"
    unsaid = [folder for folder in again if not any(NUMBERED.search(part.name) and str(part) in said
                                                     for part in [folder, *folder.parents])]
    assert not unsaid, f"the second run trained in folders it did not say: {unsaid}"
    if path.name == VISION_NOTEBOOK:
        assert_dashboard_shows_a_sample_image(notebook, tmp_path / "outputs" / "vision-grpo-2" / "run")


NUMBERED = re.compile(r"-\d+$")  # a folder of its own: run_dir's and the demo's <name>-<n>


def run_folders(root: Path) -> dict[Path, str]:
    """Each run folder under ``root`` (relative to it: what a notebook's cells name), with its run.yaml."""
    return {path.parent.relative_to(root): path.read_text() for path in root.rglob("run.yaml")}


def assert_dashboard_shows_a_sample_image(notebook, run_folder: Path):
    """The training cell's saved output (the dashboard's display, as its last update left it) holds thumbnails, each
    the PNG of an image the run's samples.jsonl names: one of the notebook's one-colour squares."""
    from PIL import Image

    from grpo_lite.monitor.samples import read_samples

    cell = next(c for c in notebook.cells if c.cell_type == "code" and "result = train(" in c.source)
    # the dashboard is one display_data output (IPython's display handle); nbclient writes each update into it
    pages = [o.data["text/html"] for o in cell.outputs if o.output_type == "display_data" and "text/html" in o.data]
    shown = [base64.b64decode(png) for page in pages for png in THUMBNAIL.findall(page)]
    assert shown, f"no thumbnail in the training cell's saved outputs: {json.dumps(cell.outputs)[:2000]}"
    sampled = {(run_folder / name).read_bytes() for row in read_samples(run_folder) for name in row["images"]}
    assert sampled and all(png in sampled for png in shown), "a thumbnail that is no image of the run's samples"
    for png in shown:
        colours = Image.open(io.BytesIO(png)).convert("RGB").getcolors()
        assert colours is not None and len(colours) == 1 and colours[0][1] in {(255, 0, 0), (0, 128, 0), (0, 0, 255), (255, 255, 0)}
