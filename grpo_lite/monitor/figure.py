"""The dashboard's charts, drawn with matplotlib's object API (no pyplot: safe in threads and kernels).

A chart costs the same at step 50,000 as at step 1,000: :class:`ChartData` takes each step record as it
arrives (nothing is re-read from the history) and keeps each metric as a :class:`Downsampled` series: every
point of the newest steps, and before them a bounded number of buckets, each drawn as its lowest and highest
point, so a one-step spike stays on the chart however long the run. ``dashboard.png`` is drawn from the same data.
"""

from __future__ import annotations

import io
import math
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from rewards.diagnoses import DIAGNOSIS

from .samples import EPISODE_METRICS

RECENT_POINTS = 256  # the newest points of a series, each drawn
BUCKETS = 256  # at most this many buckets before them, two points each (even: buckets merge in pairs)
SMOOTHING = 0.8
CHARTED = ("reward", "reward_std", "frac_reward_zero_std", "kl", "completions/mean_length", "completions/clipped_ratio",
           "grad_norm", "loss", "tools/call_frequency", "tools/failure_frequency", *EPISODE_METRICS)  # the last where a run has tools


class Downsampled:
    """One metric's points for display, appended as they arrive, in bounded memory and at a bounded cost per draw.

    The newest ``recent`` points are kept as they are. Older points fall into buckets of ``width`` consecutive points,
    each kept as its lowest and highest point; when there are ``buckets`` of them, neighbours merge in pairs and
    ``width`` doubles. :meth:`points` gives at most ``2 * buckets + 2 + recent`` points, a spike included.
    """

    def __init__(self, recent: int = RECENT_POINTS, buckets: int = BUCKETS):
        if buckets < 2 or buckets % 2:
            raise ValueError(f"Downsampled buckets={buckets}: use an even number of 2 or more")
        self.recent: deque[tuple[int, float]] = deque()
        self.recent_size = recent
        self.max_buckets = buckets
        self.width = 1  # points per closed bucket
        self.buckets: list[list] = []  # closed buckets: [min_step, min_value, max_step, max_value, count]
        self.open: list | None = None  # the bucket being filled
        self.count = 0  # points appended in all

    def append(self, step: int, value: float) -> None:
        self.count += 1
        self.recent.append((step, value))
        if len(self.recent) > self.recent_size:
            self._into_bucket(*self.recent.popleft())

    def _into_bucket(self, step: int, value: float) -> None:
        bucket = self.open
        if bucket is None:
            bucket = self.open = [step, value, step, value, 0]
        if value < bucket[1]:
            bucket[0], bucket[1] = step, value
        if value > bucket[3]:
            bucket[2], bucket[3] = step, value
        bucket[4] += 1
        if bucket[4] >= self.width:
            self.buckets.append(bucket)
            self.open = None
            if len(self.buckets) >= self.max_buckets:
                self.buckets = [_merged(a, b) for a, b in zip(self.buckets[0::2], self.buckets[1::2])]
                self.width *= 2

    def points(self) -> tuple[list[int], list[float]]:
        """Steps and values to draw, in step order: each bucket's low and high point, then every recent point."""
        steps: list[int] = []
        values: list[float] = []
        for low_step, low, high_step, high, _ in (*self.buckets, *([self.open] if self.open else [])):
            pair = ((low_step, low), (high_step, high)) if low_step <= high_step else ((high_step, high), (low_step, low))
            for step, value in pair[: 1 if low_step == high_step else 2]:
                steps.append(step)
                values.append(value)
        for step, value in self.recent:
            steps.append(step)
            values.append(value)
        return steps, values

    def __len__(self) -> int:
        return self.count


def _merged(a: list, b: list) -> list:
    low = a[:2] if a[1] <= b[1] else b[:2]
    high = a[2:4] if a[3] >= b[3] else b[2:4]
    return [*low, *high, a[4] + b[4]]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


class ChartData:
    """The series the charts draw, kept incrementally: :meth:`add` each step record as it arrives."""

    def __init__(self, records: Iterable[dict[str, Any]] = (), *, recent: int = RECENT_POINTS, buckets: int = BUCKETS):
        self._options = {"recent": recent, "buckets": buckets}
        self.series: dict[str, Downsampled] = {}
        self.steps = 0
        self._ema = 0.0
        self._rewards = 0  # finite rewards seen (the smoothing's debias)
        self._keys: tuple[str, ...] = ()
        self._reward_keys: list[str] = []
        for record in records:
            self.add(record)

    def _append(self, key: str, step: int, value: float) -> None:
        series = self.series.get(key)
        if series is None:
            series = self.series[key] = Downsampled(**self._options)
        series.append(step, value)

    def add(self, record: dict[str, Any]) -> None:
        """Take one step record (a line of metrics.jsonl)."""
        self.steps += 1
        step = record.get("step", self.steps)
        for key in CHARTED:
            value = _number(record.get(key))
            if value is not None:
                self._append(key, step, value)
        keys = tuple(record)
        if keys != self._keys:  # records of a run share their keys: the per-reward ones are found once
            self._keys = keys
            self._reward_keys = [key for key in keys if key.startswith("rewards/") and key.endswith("/mean")]
        for key in self._reward_keys:
            value = _number(record[key])
            if value is not None:
                self._append(key, step, value)
        reward = _number(record.get("reward"))
        if reward is not None:  # the smoothed line, as smoothed() computes it, one point at a time
            self._rewards += 1
            self._ema = SMOOTHING * self._ema + (1 - SMOOTHING) * reward
            self._append("reward (smoothed)", step, self._ema / (1 - SMOOTHING**self._rewards))

    def points(self, key: str) -> tuple[list[int], list[float]]:
        series = self.series.get(key)
        return series.points() if series is not None else ([], [])

    @property
    def reward_names(self) -> list[str]:
        return sorted(k[len("rewards/"):-len("/mean")] for k in self.series if k.startswith("rewards/"))


def smoothed(values: Sequence[float], weight: float = SMOOTHING) -> list[float]:
    """Exponential moving average, debiased (TensorBoard's smoothing)."""
    out, last = [], 0.0
    for i, value in enumerate(values, start=1):
        last = weight * last + (1 - weight) * value
        out.append(last / (1 - weight**i))
    return out


def dashboard_figure(data: ChartData | Sequence[dict[str, Any]]):
    """A 2x3 figure of a run's series (a :class:`ChartData`, or the step records, read into one): reward, reward
    spread, KL, per-reward means (an environment's reward among them), completion length with the clipped ratio, loss
    and grad norm; a run with tools or a rollout function gets a third row: tool calls and failures, the model's turns per episode, and the
    share of episodes that ended at the turn limit or in a tool error."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    data = data if isinstance(data, ChartData) else ChartData(data)
    _series = data.points
    episodes = "tools/call_frequency" in data.series or "episodes/model_turns" in data.series

    figure = Figure(figsize=(12, 9 if episodes else 6), dpi=80)
    figure.subplots_adjust(left=0.05, right=0.95, top=0.94, bottom=0.08, wspace=0.3, hspace=0.4)
    axes = figure.subplots(3 if episodes else 2, 3)
    reward, spread, kl, per_reward, length, grad = axes.flat[:6]

    steps, values = _series("reward")
    reward.plot(steps, values, ".", color="tab:blue", alpha=0.4, label="reward")
    if values:
        reward.plot(*_series("reward (smoothed)"), color="tab:blue", label="smoothed")
    reward.set_title("reward (mean)")
    reward.legend(loc="lower right", fontsize=8)

    spread.plot(*_series("reward_std"), color="tab:orange", label="reward_std")
    spread.plot(*_series("frac_reward_zero_std"), color="tab:red", linestyle="--", label="frac_reward_zero_std")
    spread.axhline(DIAGNOSIS["no_signal"].thresholds["reward_std"], color="grey", linewidth=0.5)  # the no_signal warning's line
    spread.set_title("reward spread within groups")
    spread.legend(loc="upper right", fontsize=8)

    kl_steps, kl_values = _series("kl")
    if kl_values:
        kl.plot(kl_steps, kl_values, color="tab:purple")
        kl.axhline(DIAGNOSIS["kl_high"].thresholds["kl"], color="grey", linewidth=0.5)
    else:
        kl.text(0.5, 0.5, "no KL logged\n(beta = 0)", ha="center", va="center", transform=kl.transAxes)
    kl.set_title("KL to the reference")

    names = data.reward_names
    for name in names:
        per_reward.plot(*_series(f"rewards/{name}/mean"), label=name)
    per_reward.set_title("per-reward means")
    if names:
        per_reward.legend(loc="upper left", fontsize=7)

    length.plot(*_series("completions/mean_length"), color="tab:green", label="mean length")
    length.set_title("completion length (tokens); clipped ratio (dotted)")
    clipped = length.twinx()
    clipped.plot(*_series("completions/clipped_ratio"), color="tab:red", linestyle=":", label="clipped ratio")
    clipped.set_ylim(0, 1.05)
    clipped.set_ylabel("clipped ratio", fontsize=8)

    grad.plot(*_series("grad_norm"), color="tab:brown", label="grad_norm")
    grad.plot(*_series("loss"), color="tab:gray", label="loss")
    grad.set_title("grad norm and loss")
    grad.legend(loc="upper right", fontsize=8)
    if episodes:
        _episode_charts(_series, *axes.flat[6:])
    for axis in axes.flat:
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_xlabel("step", fontsize=8)
        axis.tick_params(labelsize=7)
    return figure


def _episode_charts(series, tools, turns, endings) -> None:
    tools.plot(*series("tools/call_frequency"), color="tab:blue", label="calls per episode")
    tools.plot(*series("tools/failure_frequency"), color="tab:red", linestyle="--", label="share of calls failed")
    tools.set_title("tool calls and failures")
    tools.legend(loc="upper right", fontsize=8)
    turns.plot(*series("episodes/model_turns"), color="tab:green")
    turns.set_title("model turns per episode")
    endings.plot(*series("episodes/turn_limit"), color="tab:orange", label="turn limit")
    endings.plot(*series("episodes/tool_error"), color="tab:red", linestyle="--", label="tool error")
    endings.set_ylim(-0.05, 1.05)
    endings.set_title("episodes ended at")
    endings.legend(loc="upper right", fontsize=8)


def figure_png(figure) -> bytes:
    """The figure as PNG bytes, rendered by Agg (no display, no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buffer = io.BytesIO()
    FigureCanvasAgg(figure).print_png(buffer)
    return buffer.getvalue()
