"""The public API is small, pinned, documented, and the only thing the notebooks and the README import."""

import importlib
import json
import re
from pathlib import Path

import grpo_lite

ROOT = Path(__file__).resolve().parents[1]
GRPO_LITE_API = [
    "check_runtime", "run_dir", "load_model", "build_tiny_model", "prepare_dataset", "load_builtin",
    "REASONING_SYSTEM_PROMPT", "preview", "plan", "warmup_format", "train", "train_stages", "Stage", "gymnasium_environment",
    "http_environment", "LiveDashboard", "show_run",
    "read_metrics", "rescore_run", "evaluate", "compare", "export", "generate", "run_demo",
]


def test_grpo_lite_exports_exactly_the_notebook_api_and_each_name_resolves():
    assert grpo_lite.__all__ == GRPO_LITE_API
    for name in grpo_lite.__all__:
        assert getattr(grpo_lite, name) is not None


def test_every_public_name_is_documented():
    page = (ROOT / "docs" / "api.md").read_text()
    assert [name for name in grpo_lite.__all__ if f"`{name}`" not in page] == []


def test_the_names_docs_place_in_modules_are_there():
    page = (ROOT / "docs" / "api.md").read_text()
    rows = [line.split("|")[1:3] for line in page.split("## Importable from their modules")[1].splitlines()
            if line.startswith("| `grpo_lite")]
    assert len(rows) > 10
    for modules, names in rows:
        paths = re.findall(r"`([\w.]+)`", modules)
        full = [paths[0]] + [paths[0].rsplit(".", 1)[0] + path for path in paths[1:]]  # `.disk` is a sibling
        found = {name: any(hasattr(importlib.import_module(path), name) for path in full)
                 for name in re.findall(r"`(\w+)`", names)}
        assert all(found.values()), (modules, found)


def _imported(text: str, package: str) -> set[str]:
    found = set()
    for names in re.findall(rf"^\s*from {package} import (\([\w ,\n]+\)|[\w ,]+)", text, re.M):
        found |= {name.strip() for name in names.strip("()").split(",") if name.strip()}
    return found


def test_notebooks_and_the_readme_import_only_public_names():
    import rewards

    sources = {"README.md": (ROOT / "README.md").read_text()}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        sources[path.name] = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
    for path in sorted((ROOT / "docs").glob("*.md")):
        sources[f"docs/{path.name}"] = path.read_text()
    api, rewards_page = (ROOT / "docs" / "api.md").read_text(), (ROOT / "docs" / "rewards.md").read_text()
    for name, text in sources.items():
        assert _imported(text, "grpo_lite") - set(grpo_lite.__all__) == set(), name
        assert _imported(text, "rewards") - set(rewards.__all__) == set(), name
        # a name taken from a module is one the API page (or the rewards page) places there
        for module, names in re.findall(r"^\s*from ((?:grpo_lite|rewards)\.[\w.]+) import ([\w ,]+)", text, re.M):
            page = api if module.startswith("grpo_lite") else rewards_page
            assert all(re.search(rf"`{n.strip()}\b", page) for n in names.split(",")), (name, module, names)
