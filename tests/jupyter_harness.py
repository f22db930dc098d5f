"""Run notebooks in a real JupyterLab, in headless Chromium, offline.

JupyterLab listens on 127.0.0.1 with a token; Playwright drives the Debian ``chromium`` and aborts every
request that leaves the machine, so a page that needs a CDN fails here as it would offline on Colab.

    with jupyter_lab(folder, env={"MY_SETTING": "1"}) as lab, chromium_page() as page:
        open_notebook(page, lab, "run.ipynb")
        run_all_cells(page)
        page.wait_for_selector("text=done", timeout=60_000)
        page.screenshot(path="test-artifacts/run.png")
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
]
LOOPBACK = {"127.0.0.1", "localhost"}


@dataclass
class Lab:
    url: str
    token: str
    root_dir: Path
    log: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def jupyter_lab(root_dir: str | Path, env: dict[str, str] | None = None, start_timeout: float = 120) -> Iterator[Lab]:
    """A JupyterLab server over ``root_dir``, with its own settings and workspaces there; kernels inherit
    ``env``. Its log is ``<root_dir>/.jupyter-lab.log``."""
    root_dir = Path(root_dir).resolve()
    port, token = _free_port(), secrets.token_hex(16)
    runtime = root_dir / ".jupyter-runtime"
    log = root_dir / ".jupyter-lab.log"
    command = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root_dir}", "--LabApp.expose_app_in_browser=True",
    ]
    settings = root_dir / ".jupyterlab-settings"
    news = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True, exist_ok=True)
    news.write_text('{"fetchNews": "false"}')  # no "news?" popup over the page (and no request for it)
    environment = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "JUPYTERLAB_SETTINGS_DIR": str(settings),
                   "JUPYTERLAB_WORKSPACES_DIR": str(root_dir / ".jupyterlab-workspaces"), **(env or {})}
    with log.open("w") as log_file:
        server = subprocess.Popen(command, env=environment, stdout=log_file, stderr=subprocess.STDOUT, cwd=root_dir)
        lab = Lab(url=f"http://127.0.0.1:{port}", token=token, root_dir=root_dir, log=log)
        try:
            _wait_until_up(lab, server, start_timeout)
            yield lab
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()


def _wait_until_up(lab: Lab, server: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {server.returncode}:\n{lab.log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{lab.url}/api/status?token={lab.token}", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"jupyter lab did not answer within {timeout} s:\n{lab.log.read_text()[-3000:]}")


@contextmanager
def chromium_page(width: int = 1400, height: int = 1000):
    """A Playwright page in headless Chromium that can reach only this machine."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": width, "height": height})
            context.route("**/*", lambda route: route.continue_() if urlparse(route.request.url).hostname in LOOPBACK
                          else route.abort())
            yield context.new_page()
        finally:
            browser.close()


def screenshot_live(page, selector: str, path: str | Path, attempts: int = 20) -> None:
    """Screenshot the element at ``selector`` while it keeps being redrawn: a live view replaces its HTML on
    each frame, so the element found may leave the page (or never hold still) before the shot is taken; the
    next frame's is taken."""
    from playwright.sync_api import Error

    for attempt in range(attempts):
        try:
            page.locator(selector).screenshot(path=str(path), timeout=10_000)
            return
        except Error:
            if attempt == attempts - 1:
                raise


KERNEL_STATUS = """() => {
    const widget = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const kernel = widget && widget.sessionContext && widget.sessionContext.session && widget.sessionContext.session.kernel;
    return kernel ? kernel.status : null;
}"""


def kernel_status(page) -> str | None:
    """The status of the open notebook's kernel: "idle", "busy", "starting", ... (None before it exists)."""
    return page.evaluate(KERNEL_STATUS)


def open_notebook(page, lab: Lab, path: str, timeout: float = 120) -> None:
    """Open ``path`` (relative to the lab's root) in a fresh workspace and wait for its kernel to be idle."""
    page.goto(f"{lab.url}/lab/tree/{path}?token={lab.token}&reset")
    deadline = time.monotonic() + timeout
    while kernel_status(page) != "idle":
        if time.monotonic() > deadline:
            raise TimeoutError(f"the kernel of {path} was not idle within {timeout} s (status {kernel_status(page)!r})")
        time.sleep(0.25)


def run_all_cells(page) -> None:
    """Start running every cell; returns at once (the command's promise ends only when the cells do)."""
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


CELL_PROGRESS = """() => {
    const cells = window.jupyterapp.shell.currentWidget.content.widgets.filter(c => c.model.type === 'code');
    const outputs = cells.flatMap(c => c.model.outputs.toJSON());
    return {
        executed: cells.filter(c => c.model.executionCount).length,
        total: cells.length,
        errors: outputs.filter(o => o.output_type === 'error').map(o => `${o.ename}: ${o.evalue}`),
    };
}"""


def wait_for_all_cells(page, timeout: float) -> dict:
    """Wait until every code cell of the open notebook has run, or one has failed; returns
    ``{"executed": n, "total": n, "errors": ["Name: message", ...]}``."""
    deadline = time.monotonic() + timeout
    while True:
        progress = page.evaluate(CELL_PROGRESS)
        if progress["errors"] or (progress["executed"] == progress["total"] and kernel_status(page) == "idle"):
            return progress
        if time.monotonic() > deadline:
            raise TimeoutError(f"{progress['executed']} of {progress['total']} cells ran in {timeout} s")
        time.sleep(0.5)
