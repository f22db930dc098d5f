"""Click the dashboard's Stop button the way a notebook frontend does, on a real kernel, while it trains.

A kernel is started with ``jupyter_client`` from a given Python (a kernel environment, see
``kernel_envs.py``); cells are sent as execute requests, all at once when asked (as "Run all" does). When the
dashboard reports ``click_at_step`` logged steps, the button's click goes to the kernel as the frontend sends it:
a ``comm_msg`` on the shell channel with ``{"method": "custom", "content": {"event": "click"}}`` for the
button's comm id (taken from its ``comm_open``).
"""

from __future__ import annotations

import os
import queue
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

STEP = re.compile(r"<b>step</b> (\d+)/(\d+)")


@dataclass
class Clicked:
    """What the kernel did: each cell's stdout, the buttons it drew, the step the click was sent at."""

    stdout: list[str] = field(default_factory=list)
    buttons: list[str] = field(default_factory=list)
    clicked_at: int | None = None
    errors: list[str] = field(default_factory=list)

    def trained(self, cell: int) -> list[int]:
        """The ``trained N`` numbers the cell printed."""
        return [int(n) for n in re.findall(r"trained (\d+)", self.stdout[cell])]


def run_and_click(python: str, cells: list[str], cwd: Path, *, click_at_step: int = 2, click_button: int = 1,
                  env: dict[str, str] | None = None, timeout: float = 600) -> Clicked:
    """Run ``cells`` (queued together) on a kernel of ``python``; click the ``click_button``-th button drawn
    (counting from 1) once a dashboard drawn after it shows step ``click_at_step``."""
    from jupyter_client import KernelManager

    manager = KernelManager()
    manager.kernel_spec.argv = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    manager.start_kernel(cwd=str(cwd), env={**os.environ, **(env or {})})
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        ids = [client.execute(code) for code in cells]
        return _watch(client, ids, click_at_step, click_button, time.monotonic() + timeout)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _watch(client, ids: list[str], click_at_step: int, click_button: int, deadline: float) -> Clicked:
    result = Clicked(stdout=["" for _ in ids])
    replies: set[str] = set()
    while len(replies) < len(ids):
        if time.monotonic() > deadline:
            raise TimeoutError(f"cells still running; so far {result}")
        try:
            message = client.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        parent = message["parent_header"].get("msg_id")
        kind, content = message["msg_type"], message["content"]
        if kind == "comm_open" and content.get("data", {}).get("state", {}).get("_model_name") == "ButtonModel":
            result.buttons.append(content["comm_id"])
        elif kind == "stream" and content["name"] == "stdout" and parent in ids:
            result.stdout[ids.index(parent)] += content["text"]
        elif kind == "error":
            result.errors.append(f"{content['ename']}: {content['evalue']}")
        elif kind in ("display_data", "update_display_data") and result.clicked_at is None \
                and len(result.buttons) >= click_button:
            step = STEP.search(content.get("data", {}).get("text/html", ""))
            if step and int(step.group(1)) >= click_at_step:
                result.clicked_at = int(step.group(1))
                comm_id = result.buttons[click_button - 1]
                client.session.send(client.shell_channel.socket, client.session.msg(
                    "comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}}))
        elif kind == "status" and content["execution_state"] == "idle" and parent in ids:
            replies.add(parent)
    return result
