"""Getting grpo-lite onto a notebook runtime: one address everywhere, each notebook's install cell run for real on a
runtime without a GPU, and on a T4 and an L4 (an nvidia-smi that answers as one) the pip lines it runs.

The slow tests build the wheel once and a fresh venv without grpo_lite, holding what Colab preinstalls that
matters here (torch, ipykernel, ipywidgets, matplotlib); each install cell then runs in a real kernel there.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import nbformat
import pytest
from packaging.utils import canonicalize_name
from resolution import would_install

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
REPOSITORY = re.search(r'^Repository = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE).group(1)  # [project.urls]
OWNER_NAME = REPOSITORY.removeprefix("https://github.com/")


def _cells(path: Path) -> list:
    return nbformat.read(path, as_version=4).cells


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_badges_and_install_cell_use_the_declared_repository(path):
    cells = _cells(path)
    url = f"github.com/{OWNER_NAME}/blob/main/notebooks/{path.name}"
    assert f"(https://colab.research.google.com/github/{OWNER_NAME}/blob/main/notebooks/{path.name})" in cells[0].source
    assert f"(https://kaggle.com/kernels/welcome?src=https://{url})" in cells[0].source
    parameters = next(c for c in cells if "parameters" in c.metadata.get("tags", []))
    assert f'"git+{REPOSITORY}"' in parameters.source


def test_no_other_address_for_grpo_lite_anywhere():
    texts = [p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *NOTEBOOKS]]
    addresses = {m for text in texts for m in re.findall(r"github\.com/([\w.-]+/grpo-lite)\b", text)}
    assert addresses == {OWNER_NAME}
    assert not any(re.search(r"pip install [\"']?grpo-lite\[", text) for text in texts), "grpo-lite is not on the package index"


def _outside_the_repository() -> dict:
    """The environment without a way to this checkout's grpo_lite: PYTHONPATH, or VIRTUAL_ENV, whose site-packages
    IPython adds to sys.path ("Attempting to work in a virtualenv")."""
    return {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _run(*command, cwd=None, env=None, **options):
    """Run ``command`` outside the repository, where ``python -c`` would import its grpo_lite."""
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=900, cwd=cwd or Path.home(),
                          env=env or _outside_the_repository(), **options)
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-3000:])
    return done


@pytest.fixture(scope="module")
def fresh_runtime(tmp_path_factory):
    """A built wheel, and a venv with torch (the local CPU wheel) and a kernel but no grpo_lite."""
    where = tmp_path_factory.mktemp("runtime")
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", where / "dist", ROOT)
    _run(sys.executable, "-m", "venv", where / "venv")
    python = where / "venv" / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", "--no-compile", "torch==2.13.0")
    _run(python, "-m", "pip", "install", "-q", "--no-compile", "ipykernel", "ipywidgets>=7.7", "matplotlib")
    assert subprocess.run([python, "-c", "import grpo_lite"], capture_output=True, cwd=where, env=_outside_the_repository()).returncode == 1
    _run(python, "-m", "ipykernel", "install", "--prefix", where / "jupyter", "--name", "fresh-runtime")
    return where, python


def _install_cell(path: Path) -> str:
    return next(c.source for c in _cells(path) if c.cell_type == "code" and "%pip install" in c.source)


def test_every_notebook_has_the_same_install_cell():  # so the branches tested on notebook 01 are every notebook's
    assert len({_install_cell(path) for path in NOTEBOOKS}) == 1


def _fake_nvidia_smi(tmp_path: Path, card: str) -> dict:
    """The environment with an ``nvidia-smi`` on PATH that answers as a runtime with ``card`` does (no GPU here)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\necho '| 0  {card}  Off | 00000000:00:04.0 Off |'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    return {**_outside_the_repository(), "PATH": f"{bin_dir}:{os.environ['PATH']}"}


RECORDING_PIP = """
import json
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
pip, calls = shell.find_line_magic("pip"), []
def recording_pip(line):
    calls.append(line)
    if "--no-deps" in line:  # grpo-lite alone, for real: the cell reads its stack from the installed package
        pip(line)
    elif "--report" in line:  # the stack: pip's plan for real, written to the cell's report, and nothing installed
        pip(line + " --dry-run --use-feature=fast-deps")
shell.register_magic_function(recording_pip, magic_kind="line", magic_name="pip")
shell.user_ns.update(GRPO_LITE_FROM={where!r}, SMOKE=False)
shell.run_cell({code!r}).raise_error()
print("pip lines:", json.dumps(calls))
"""


def _cell_on_a_gpu(fresh_runtime, tmp_path, card: str) -> tuple[list[str], Path, str]:
    """The pip lines the first notebook's install cell runs on a runtime with ``card``: grpo-lite's own install for real,
    the stack's as pip's dry run (vLLM cannot be installed here). Returns them, the stack folder the cell chose from and
    what the cell printed."""
    where, python = fresh_runtime
    script = RECORDING_PIP.format(where=str(where / "dist"), code=_install_cell(NOTEBOOKS[0]))
    done = _run(python, "-c", script, env=_fake_nvidia_smi(tmp_path, card))
    printed, recorded = done.stdout.rsplit("pip lines:", 1)
    site = _run(python, "-c", "import grpo_lite, pathlib; print(pathlib.Path(grpo_lite.__file__).parent)").stdout.strip()
    return json.loads(recorded), Path(site) / "assets" / "stacks", printed


def _replaced(printed: str, stack: str) -> dict[str, tuple[str, str]]:
    """What the install cell says the stack replaced: name -> (the runtime's version, the stack's)."""
    said = next(line for line in printed.splitlines() if line.startswith(f"{stack} replaced "))
    listed = said.split("as Unsloth and vLLM need: ", 1)[1]
    return {} if listed == "none" else {name: (old, new) for name, old, _, new in (item.split() for item in listed.split(", "))}


@pytest.mark.slow
@pytest.mark.parametrize("card, stack", [("Tesla T4", "t4.txt"), ("NVIDIA L4", "vllm.txt")])
def test_the_install_cell_takes_unsloths_branch_for_the_card_and_says_what_its_stack_replaces(fresh_runtime, tmp_path, card,
                                                                                             stack):
    """Unsloth's Colab GRPO notebook ("Colab Extra Install", unslothai/notebooks nb/Qwen2.5_(3B)-GRPO.ipynb @ bdda2efc)
    installs vllm==0.11.2 where nvidia-smi's answer holds "Tesla T4" and vllm==0.15.1 on any other GPU; the cell installs
    the T4 stack there and the vLLM stack elsewhere, each with Unsloth and vLLM, the stack the repository's, and says each
    of the runtime's packages pip's plan replaces. The runtime's torch (2.13.0 here) is the vLLM stack's, so the cell's
    line keeps it on an L4, where pip, asked plainly for the Unsloth extra, would replace it (Unsloth's torchvision and
    xformers hold no torch bound that keeps 2.13); a T4's stack needs torch 2.9.0 instead."""
    where, python = fresh_runtime
    wheel = next((where / "dist").glob("*.whl")).resolve().as_uri()
    try:
        calls, stacks, printed = _cell_on_a_gpu(fresh_runtime, tmp_path, card)
        pins = {canonicalize_name(name): version for name, version in
                (line.split("==") for line in (stacks / stack).read_text().splitlines() if "==" in line and line[0] != "#")}
    finally:
        subprocess.run([python, "-m", "pip", "uninstall", "-q", "-y", "grpo-lite"], capture_output=True, cwd=where,
                       env=_outside_the_repository())
    assert calls[0] == f'install -q --no-deps "grpo-lite @ {wheel}"'
    assert re.fullmatch(rf'install -q -c {re.escape(str(stacks / stack))} --report \S+/pip-report\.json '
                        rf'"grpo-lite\[unsloth,vllm\] @ {re.escape(wheel)}" jupyter-ui-poll', calls[1]), calls[1]
    replaced = _replaced(printed, stack)
    assert replaced and all(new.split("+")[0] == pins[name] for name, (_, new) in replaced.items()), replaced
    torch = tuple(version.split("+")[0] for version in replaced.get("torch", ()))  # the runtime's is the local 2.13.0+cpu
    assert torch == (("2.13.0", "2.9.0") if card == "Tesla T4" else ()), replaced


@pytest.mark.slow
def test_asked_plainly_for_the_unsloth_extra_pip_would_replace_the_runtimes_torch(fresh_runtime, tmp_path):
    """What the cell's stack is for: pip, asked plainly for the Unsloth extra on the runtime above, replaces its torch
    2.13.0, which the vLLM stack keeps (the test above)."""
    where, python = fresh_runtime
    wheel = next((where / "dist").glob("*.whl")).resolve().as_uri()
    plain = would_install(python, "install", "-q", f"grpo-lite[unsloth] @ {wheel}", report=tmp_path / "plain.json", cwd=where,
                          env=_outside_the_repository())
    assert "torch" in plain, "pip would have kept torch anyway: the stack's line no longer shows what it is for"


@pytest.mark.slow
def test_the_install_cell_installs_from_the_wheel_and_notebook_01_then_runs(fresh_runtime, tmp_path, monkeypatch):
    """Notebook 01 whole, from its install cell on, in the fresh runtime: every notebook's install cell is the same one
    (test_every_notebook_has_the_same_install_cell), and tests/test_notebooks.py runs each notebook whole."""
    from nbclient import NotebookClient

    where, python = fresh_runtime
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setenv("JUPYTER_PATH", str(where / "jupyter" / "share" / "jupyter"))
    monkeypatch.setenv("GRPO_LITE_FROM", str(where / "dist"))
    monkeypatch.setenv("GRPO_LITE_SMOKE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    assert shutil.which("nvidia-smi") is None, "the no-GPU branch is the one installed for real: no nvidia-smi on PATH"
    path = NOTEBOOKS[0]
    subprocess.run([python, "-m", "pip", "uninstall", "-q", "-y", "grpo-lite"], capture_output=True, cwd=where,
                   env=_outside_the_repository())
    notebook = nbformat.read(path, as_version=4)
    workdir = tmp_path / path.stem
    workdir.mkdir()
    client = NotebookClient(notebook, timeout=900, startup_timeout=300, kernel_name="fresh-runtime", resources={"metadata": {"path": str(workdir)}})
    client.execute()
    install = next(c for c in notebook.cells if c.cell_type == "code" and "%pip install" in c.source).metadata.execution
    took = datetime.fromisoformat(install["shell.execute_reply"]) - datetime.fromisoformat(install["iopub.execute_input"])
    print(f"{path.name}: install cell {took.total_seconds():.0f} s")  # the figure docs/notebooks.md quotes (pytest -s)
    installed = subprocess.run([python, "-c", "import grpo_lite; print(grpo_lite.__file__)"], capture_output=True, text=True, cwd=where)
    assert installed.returncode == 0 and str(where / "venv") in installed.stdout, installed.stderr[-1000:]
    assert (workdir / "outputs" / "quickstart-1" / "metrics.jsonl").exists()
