"""LiveDashboard: watch a GRPO run while it trains, in a notebook, a terminal or a log.

It shows reward (with a smoothed line), reward_std and frac_reward_zero_std, KL, per-reward means,
completion length and truncation, grad norm (and, in a run with tools, tool calls and failures, turns per episode
and how episodes ended), the latest samples each as its episode, turn by turn, with where it ended, each reward's
score and advantage (a plain reply is an episode of one model turn), health warnings with a fix, and a header
(model, backend, step / max steps, elapsed, time left, tokens/s).
The numbers, samples and warnings are redrawn at each logged step (at most every ``min_interval`` s; they
cost milliseconds). The charts, and ``dashboard.png`` in the output dir, are re-rendered only while all
drawing stays within ``max_overhead`` of the training time, and once more when training ends. Only the
main process draws. A redraw costs the same at step 50,000 as at step 10, and what the dashboard holds stays
the same size: the warnings as one line per rule, the chart series downsampled as they arrive
(:class:`~grpo_lite.monitor.figure.ChartData`), the newest ``HISTORY_KEPT`` step records (metrics.jsonl has them all)
(benchmarks/long_run.py measures it). In a notebook a Stop button ends training after the current step with a checkpoint
(in a terminal, Ctrl-C does, through ``train``).

It only draws: the samples it shows are the run's :class:`~grpo_lite.monitor.samples.SampleLog`'s, the
metrics come from the Trainer's logs, and the Stop button asks the trainer's
:class:`~grpo_lite.run.stopping.StopSwitch`. ``grpo_lite.train`` attaches one (and removes the Trainer's own
progress printing, so the dashboard is the run's one voice); with a bare TRL trainer::

    samples, dashboard = SampleLog("outputs/run"), LiveDashboard("outputs/run")
    trainer = GRPOTrainer(..., callbacks=[samples, dashboard])   # samples first: the dashboard shows them
    attach_all(trainer)                                           # grpo_lite.run.callbacks
    trainer.train()
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path
from typing import Any

from ..log import logger
from ..model.load import loaded_as
from ..run.callbacks import RunCallback
from ..run.files import DASHBOARD_FILE, replace_file
from ..run.settings import ConfigError
from ..run.stopping import StopSwitch, stop_switch
from .figure import ChartData, dashboard_figure, figure_png
from .health import HealthMonitor
from .metrics import read_metrics
from .samples import SampleLog
from .views import Frame, make_view, resolve_view

FIRST_CHART_SECONDS = 1.0  # the first chart's budget: importing matplotlib and a 6-panel PNG on a slow CPU
HISTORY_KEPT = 1_000  # step records held in memory (the charts keep their own downsampled series)


def duration(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour on."""
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def template_header(chat_template_kwargs: dict[str, Any] | None) -> dict[str, str]:
    """The header's entry for the chat template's keyword arguments a run renders its prompts with, if any."""
    if not chat_template_kwargs:
        return {}
    return {"chat template": ", ".join(f"{key}={value!r}" for key, value in chat_template_kwargs.items())}


class LiveDashboard(RunCallback):
    """A ``TrainerCallback`` drawing the run's dashboard; see the module docstring.

    Args:
        output_dir: where ``dashboard.png`` goes; default: the trainer's ``output_dir``.
        trainer: the ``GRPOTrainer`` it watches; or call :meth:`attach` once it exists.
        view: ``"auto"``, ``"notebook"``, ``"terminal"`` or ``"log"``.
        max_overhead: the share of training time all drawing may take; charts wait until they fit (the last
            frame, drawn when training ends, comes on top).
        min_interval: seconds between two redraws of the numbers and samples.
        samples_shown: how many of the newest completions the table shows.
        stop_button: show a Stop button in notebooks (it asks the trainer's :class:`~grpo_lite.run.stopping.StopSwitch`).
    """

    def __init__(self, output_dir: str | Path | None = None, *, trainer=None, view: str = "auto",
                 max_overhead: float = 0.02, min_interval: float = 1.0, samples_shown: int = 6,
                 stop_button: bool = True):
        if not 0 < max_overhead <= 1:
            raise ConfigError(f"LiveDashboard max_overhead={max_overhead}: use a share of training time in (0, 1]")
        self.output_dir = Path(output_dir) if output_dir else None
        self.trainer = trainer
        self.view_kind = resolve_view(view)
        self.max_overhead = max_overhead
        self.min_interval = min_interval
        self.samples_shown = samples_shown
        self.stop_button = stop_button
        self.history: deque[dict[str, Any]] = deque(maxlen=HISTORY_KEPT)  # the newest step records
        self.chart = ChartData()
        self.health = HealthMonitor()
        self.samples: SampleLog | None = None  # the run's, found at the start of training
        self.header: dict[str, str] = {}
        self.view = None
        self.redraws = 0
        self.charts = 0
        self.draw_seconds = 0.0
        self.png: bytes | None = None
        self.stop: StopSwitch | None = None
        self._is_main = True
        self._start_step = 0
        self._start_tokens = 0.0
        self._train_start = time.perf_counter()
        self._last_step_end = self._train_start
        self._trained_until: float | None = None  # the last step's end once training is over (evaluation after it is not training)
        self._last_draw_end = 0.0
        self._chart_cost = FIRST_CHART_SECONDS

    @classmethod
    def of_finished_run(cls, output_dir: str | Path, *, history: list[dict[str, Any]], header: dict[str, str],
                        health: HealthMonitor, samples: list[dict[str, Any]], view: str = "auto") -> LiveDashboard:
        """The dashboard of a run that is not training (``show_run``): it shows what it is given; call :meth:`show`."""
        dashboard = cls(output_dir, view=view, stop_button=False)
        dashboard.history.extend(history)
        dashboard.chart = ChartData(history)
        dashboard.header = dict(header)
        dashboard.health = health
        dashboard.samples = SampleLog(None)  # holds the samples read from the run; writes nothing
        dashboard.samples.add(samples[-dashboard.samples.recent.maxlen:])
        return dashboard

    def show(self) -> None:
        """Draw once, in a view of its own (a finished run's dashboard)."""
        self.view = make_view(self.view_kind)
        self.draw()
        self.view.close()

    def attach(self, trainer) -> LiveDashboard:
        """Give the dashboard its trainer (built after the callback, which the trainer needs first). The Stop
        button asks the trainer's StopSwitch, which is added when the trainer has none."""
        self.trainer = trainer
        self.stop = stop_switch(trainer)
        return self

    # Trainer events -------------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._is_main = state.is_world_process_zero
        if not self._is_main:
            return
        self.output_dir = self.output_dir or Path(args.output_dir)
        callbacks = getattr(getattr(self.trainer, "callback_handler", None), "callbacks", ())
        self.samples = next((c for c in callbacks if isinstance(c, SampleLog)), None)
        records = [r for r in read_metrics(self.output_dir) if r.get("step", 0) <= state.global_step]  # resumed: the steps before
        self.history = deque(records, maxlen=HISTORY_KEPT)
        self.chart = ChartData(records)
        reward_names = getattr(self.trainer, "reward_func_names", ())
        self.health = HealthMonitor(beta=getattr(args, "beta", None), max_steps=state.max_steps, reward_names=reward_names)
        for record in records:
            self.health.update(record)
        loaded = loaded_as(model)
        name = str(getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__)
        self.header = {"model": Path(name).name or name, "backend": loaded.backend.name if loaded else "transformers",
                       **template_header(getattr(args, "chat_template_kwargs", None))}
        self._train_start = time.perf_counter()
        self._trained_until = None
        self._start_step = state.global_step
        self._start_tokens = float(self.history[-1].get("num_tokens") or 0) if self.history else 0.0
        self.view = None  # drawn from the first step on: evaluation before it is not training, and nothing to stop

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not self._is_main or not logs or "reward" not in logs:
            return
        record = {"step": state.global_step, **logs}
        self.history.append(record)
        self.chart.add(record)
        for warning in self.health.update(record):
            logger.warning(str(warning))
        now = time.perf_counter()
        if now - self._last_draw_end >= self.min_interval:
            self.draw(state, chart=self._chart_fits_budget(now))

    def on_step_begin(self, args, state, control, **kwargs):
        if self._is_main and self.view is None:  # the first step, after any evaluation before it: the clock starts
            self._train_start = self._last_step_end = time.perf_counter()
            on_stop = self.request_stop if self.stop_button and self.stop is not None else None
            self.view = make_view(self.view_kind, on_stop=on_stop)

    def on_step_end(self, args, state, control, **kwargs):
        self._last_step_end = time.perf_counter()
        if self._is_main and self.view is not None:
            self.view.poll()  # delivers a Stop click to the switch, which acts at this step's end
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if not self._is_main:
            return
        self._trained_until = self._last_step_end
        self.view = self.view or make_view(self.view_kind)  # a run that had no step to train still gets its frame
        self.draw(state)
        self.close()  # before any evaluation after training: the Stop button goes with the last step

    def close(self) -> None:
        """Close the view (a terminal's live panel, the Stop button); ``train`` calls this however training ends."""
        if self.view is not None:
            self.view.close()

    # Drawing ----------------------------------------------------------------------------------------

    def _chart_fits_budget(self, now: float) -> bool:
        """Whether one more chart (costing what the last one did) keeps all drawing within ``max_overhead``."""
        return self.draw_seconds + self._chart_cost <= self.max_overhead * (now - self._train_start)

    def _header(self, state) -> dict[str, str]:
        if state is None:  # show_run: a finished run's header comes from its files
            return dict(self.header)
        elapsed = (self._trained_until or time.perf_counter()) - self._train_start
        header = {**self.header, "step": f"{state.global_step}/{state.max_steps}", "elapsed": duration(elapsed)}
        if self.stop is not None and self.stop.requested:
            header["stopping"] = self.stop.reason
        done = state.global_step - self._start_step
        if done > 0:
            header["left"] = duration(elapsed / done * max(state.max_steps - state.global_step, 0))
            tokens = float(self.history[-1].get("num_tokens") or 0) - self._start_tokens if self.history else 0
            header["tokens/s"] = f"{tokens / elapsed:.0f}" if tokens > 0 else "-"
        return header

    def frame(self, state=None) -> Frame:
        """What the next redraw shows; ``state`` is the trainer's (None when re-drawing a finished run)."""
        return Frame(
            header=self._header(state),
            latest=self.history[-1] if self.history else {},
            warnings=self.health.summary(),
            samples=[self._with_thumbnails(row) for row in list(self.samples.recent)[-self.samples_shown:]] if self.samples is not None else [],
            png=self.png,
        )

    def _with_thumbnails(self, row: dict[str, Any]) -> dict[str, Any]:
        """A sample as the views show it: with its images' thumbnails (PNG bytes) where it has images."""
        if not row.get("images"):
            return row
        pngs = [self.samples.thumbnail(name, self.output_dir) for name in row["images"]]
        return {**row, "thumbnails": [png for png in pngs if png]}

    def draw(self, state=None, chart: bool = True) -> None:
        """Redraw now; with ``chart``, re-render the charts and ``dashboard.png`` (written whole, so that a
        reader never sees half a file) first."""
        start = time.perf_counter()
        if chart and self.chart.steps:
            self.png = figure_png(dashboard_figure(self.chart))
            if self.output_dir:
                self.output_dir.mkdir(parents=True, exist_ok=True)
                replace_file(self.output_dir / DASHBOARD_FILE, self.png)
            self.charts += 1
            self._chart_cost = time.perf_counter() - start
        if self.view is not None:
            self.view.update(self.frame(state))
        self.redraws += 1
        self._last_draw_end = time.perf_counter()
        self.draw_seconds += self._last_draw_end - start

    def request_stop(self) -> None:
        """End training after the current step, saving a checkpoint (the Stop button calls this)."""
        self.stop.request("the dashboard's Stop button")
