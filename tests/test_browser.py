"""The dashboard in JupyterLab, in a real headless browser: it updates while training runs, and Stop stops it."""

import re
import shutil
import time
from pathlib import Path

import pytest
from jupyter_harness import CHROMIUM, chromium_page, jupyter_lab, open_notebook, run_all_cells, screenshot_live, wait_for_all_cells

NOTEBOOK = Path(__file__).parent / "notebooks" / "dashboard_run.ipynb"
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "browser"
MAX_STEPS = 100_000  # only Stop ends the run: the test waits for frames and clicks however slow the machine is

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (Debian package 'chromium')"),
]


def dashboard_header(page) -> str | None:
    header = page.locator(".grpo-lite-dashboard > div").first
    return header.text_content() if header.count() else None  # text_content: the cell may be scrolled out of view


def test_dashboard_updates_live_and_the_stop_button_ends_training(tmp_path):
    shutil.copy(NOTEBOOK, tmp_path / NOTEBOOK.name)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    # a generous drawing budget, so that charts come within a few seconds of training
    env = {"DASHBOARD_TEST_STEPS": str(MAX_STEPS), "DASHBOARD_TEST_OVERHEAD": "0.5", "MPLBACKEND": "Agg"}
    with jupyter_lab(tmp_path, env=env) as lab, chromium_page() as page:
        open_notebook(page, lab, NOTEBOOK.name)
        run_all_cells(page)

        frames_seen: list[str] = []
        deadline = time.monotonic() + 300
        while len(frames_seen) < 3:
            assert time.monotonic() < deadline, f"the dashboard showed {frames_seen} in 300 s; server log: {lab.log}"
            header = dashboard_header(page)
            if header and "step" in header and header not in frames_seen:
                frames_seen.append(header)
            time.sleep(0.1)
        page.locator(".grpo-lite-dashboard img").wait_for(timeout=120_000)  # the charts, once they fit the budget
        screenshot_live(page, ".grpo-lite-dashboard", ARTIFACTS / "dashboard-live.png")

        page.locator("button", has_text="Stop").click()
        summary = page.locator(".jp-OutputArea-output", has_text=re.compile(r"trained \d+ of \d+ steps"))
        summary.wait_for(timeout=120_000)
        screenshot_live(page, ".grpo-lite-dashboard", ARTIFACTS / "dashboard-stopped.png")
        summary = summary.text_content()

    trained = int(re.search(r"trained (\d+) of", summary).group(1))
    assert 3 <= trained < MAX_STEPS, summary
    assert (tmp_path / "run" / f"checkpoint-{trained}").is_dir(), "Stop saves a checkpoint of the last step"
    steps = [int(s) for s in re.findall(r"step\s+(\d+)/", " ".join(frames_seen))]
    assert steps == sorted(steps) and len(set(steps)) == 3, frames_seen


def test_quickstart_notebook_runs_in_jupyterlab_and_draws_the_dashboard(tmp_path):
    quickstart = Path(__file__).resolve().parents[1] / "notebooks" / "01_quickstart_gsm8k.ipynb"
    shutil.copy(quickstart, tmp_path / quickstart.name)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    env = {"GRPO_LITE_SMOKE": "1", "HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg"}
    with jupyter_lab(tmp_path, env=env) as lab, chromium_page() as page:
        open_notebook(page, lab, quickstart.name)
        run_all_cells(page)
        progress = wait_for_all_cells(page, timeout=600)
        assert not progress["errors"], progress
        dashboards = page.locator(".grpo-lite-dashboard")
        assert dashboards.count() >= 2, "the demo and the training run each draw a dashboard"
        training = dashboards.nth(1)
        assert "step" in training.text_content() and training.locator("img").count() >= 1
        training.locator("img").first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "quickstart-dashboard.png"))
    assert (tmp_path / "outputs" / "quickstart-1" / "adapter" / "adapter_config.json").exists()


def test_preview_browser_moves_filters_and_rescores_a_redefined_reward(tmp_path):
    notebook = Path(__file__).parent / "notebooks" / "preview_browser.ipynb"
    shutil.copy(notebook, tmp_path / notebook.name)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with jupyter_lab(tmp_path, env={"HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg"}) as lab, chromium_page() as page:
        open_notebook(page, lab, notebook.name)
        run_all_cells(page)
        progress = wait_for_all_cells(page, timeout=300)
        assert not progress["errors"], progress
        view = page.locator(".grpo-lite-preview")
        view.wait_for(timeout=60_000)
        position = view.locator(".widget-label", has_text="group").first

        def shown() -> str:
            return position.text_content()

        assert shown() == "group 0 (1 of 4)"
        view.locator("button", has_text="next").click()
        page.wait_for_function("() => document.querySelector('.grpo-lite-preview').textContent.includes('group 1 (2 of 4)')")
        view.locator("button", has_text="previous").click()
        page.wait_for_function("() => document.querySelector('.grpo-lite-preview').textContent.includes('group 0 (1 of 4)')")
        view.locator("select").select_option("no signal")
        page.wait_for_function("() => document.querySelector('.grpo-lite-preview').textContent.includes('group 1 (1 of 2)')")
        assert "Spell dog" in view.locator(".grpo-lite-preview-group").text_content()

        before = view.locator(".grpo-lite-preview-group table").text_content()
        view.locator("button", has_text="re-score").click()
        page.wait_for_function("() => document.querySelector('.grpo-lite-preview').textContent.includes('re-scored with')")
        cells = view.locator(".grpo-lite-preview-group td").all_text_contents()
        view.screenshot(path=str(ARTIFACTS / "preview-browser.png"))
    assert "7" not in before.split() and cells.count("7") == 4, "re-score used the planted reward as redefined"
