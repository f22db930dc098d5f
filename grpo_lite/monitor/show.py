"""show_run: the dashboard of a finished or interrupted run, re-drawn from the files in its output dir.

For a user who reconnects to Colab after a disconnect: ``metrics.jsonl`` holds every logged step and
``samples.jsonl`` the completions, so the whole history, warnings included, comes back.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import NotFound
from ..run.files import RUN_FILE
from ..run.record import read_run
from .dashboard import LiveDashboard, duration, template_header
from .health import HealthMonitor
from .metrics import read_metrics
from .samples import read_samples


def show_run(output_dir: str | Path, view: str = "auto") -> LiveDashboard:
    """Draw the dashboard of the run in ``output_dir`` and rewrite its ``dashboard.png``.

    Returns the dashboard, whose ``chart``, ``health`` (``health.rules``: every rule's count; ``health.summary()``),
    ``samples.recent`` and ``history`` (the newest step records) hold what it drew. The page is the same size for a
    run of 50,000 steps as for one of 10; every occurrence of every warning: ``replay(read_metrics(output_dir))``.
    """
    output_dir = Path(output_dir)
    history = read_metrics(output_dir)
    if not history:
        raise NotFound(f"show_run: no metrics.jsonl with logged steps in {output_dir}; pass the output_dir "
                                "that train() wrote to")
    run = read_run(output_dir) if (output_dir / RUN_FILE).exists() else None
    options = run.grpo_config if run else {}
    last_step = history[-1]["step"]
    health = HealthMonitor(beta=options.get("beta"), max_steps=options.get("max_steps"),
                           reward_names=run.reward_names if run else ())
    for record in history:
        health.update(record)
    header = {
        "model": Path(run.settings.model).name if run else "-",
        "backend": str(run.chosen.get("backend") or "transformers") if run else "transformers",
        "step": f"{last_step}/{options['max_steps']}" if options.get("max_steps", -1) > 0 else str(last_step),
        "elapsed": duration(history[-1].get("time", 0) - history[0].get("time", 0)),
        **template_header(run.settings.chat_template_kwargs if run else None),
    }
    dashboard = LiveDashboard.of_finished_run(output_dir, history=history, header=header, health=health,
                                              samples=read_samples(output_dir), view=view)
    dashboard.show()
    return dashboard
