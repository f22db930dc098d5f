"""The dashboard's charts, drawn with matplotlib's object API (no pyplot: safe in threads and kernels)."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from rewards.diagnoses import DIAGNOSIS


def _series(history: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    steps, values = [], []
    for record in history:
        value = record.get(key)
        if isinstance(value, (int, float)) and math.isfinite(value):
            steps.append(record["step"])
            values.append(float(value))
    return steps, values


def smoothed(values: Sequence[float], weight: float = 0.8) -> list[float]:
    """Exponential moving average, debiased (TensorBoard's smoothing)."""
    out, last = [], 0.0
    for i, value in enumerate(values, start=1):
        last = weight * last + (1 - weight) * value
        out.append(last / (1 - weight**i))
    return out


def dashboard_figure(history: Sequence[dict[str, Any]]):
    """A 2x3 figure of the step records: reward, reward spread, KL, per-reward means, completion length
    with the clipped ratio, loss and grad norm."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=(12, 6), dpi=80)
    figure.subplots_adjust(left=0.05, right=0.95, top=0.94, bottom=0.08, wspace=0.3, hspace=0.4)
    axes = figure.subplots(2, 3)
    reward, spread, kl, per_reward, length, grad = axes.flat

    steps, values = _series(history, "reward")
    reward.plot(steps, values, ".", color="tab:blue", alpha=0.4, label="reward")
    if values:
        reward.plot(steps, smoothed(values), color="tab:blue", label="smoothed")
    reward.set_title("reward (mean)")
    reward.legend(loc="lower right", fontsize=8)

    spread.plot(*_series(history, "reward_std"), color="tab:orange", label="reward_std")
    spread.plot(*_series(history, "frac_reward_zero_std"), color="tab:red", linestyle="--", label="frac_reward_zero_std")
    spread.axhline(DIAGNOSIS["no_signal"].thresholds["reward_std"], color="grey", linewidth=0.5)  # the no_signal warning's line
    spread.set_title("reward spread within groups")
    spread.legend(loc="upper right", fontsize=8)

    kl_steps, kl_values = _series(history, "kl")
    if kl_values:
        kl.plot(kl_steps, kl_values, color="tab:purple")
        kl.axhline(DIAGNOSIS["kl_high"].thresholds["kl"], color="grey", linewidth=0.5)
    else:
        kl.text(0.5, 0.5, "no KL logged\n(beta = 0)", ha="center", va="center", transform=kl.transAxes)
    kl.set_title("KL to the reference")

    names = sorted({k[len("rewards/"):-len("/mean")] for r in history for k in r if k.startswith("rewards/") and k.endswith("/mean")})
    for name in names:
        per_reward.plot(*_series(history, f"rewards/{name}/mean"), label=name)
    per_reward.set_title("per-reward means")
    if names:
        per_reward.legend(loc="upper left", fontsize=7)

    length.plot(*_series(history, "completions/mean_length"), color="tab:green", label="mean length")
    length.set_title("completion length (tokens); clipped ratio (dotted)")
    clipped = length.twinx()
    clipped.plot(*_series(history, "completions/clipped_ratio"), color="tab:red", linestyle=":", label="clipped ratio")
    clipped.set_ylim(0, 1.05)
    clipped.set_ylabel("clipped ratio", fontsize=8)

    grad.plot(*_series(history, "grad_norm"), color="tab:brown", label="grad_norm")
    grad.plot(*_series(history, "loss"), color="tab:gray", label="loss")
    grad.set_title("grad norm and loss")
    grad.legend(loc="upper right", fontsize=8)
    for axis in axes.flat:
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_xlabel("step", fontsize=8)
        axis.tick_params(labelsize=7)
    return figure


def figure_png(figure) -> bytes:
    """The figure as PNG bytes, rendered by Agg (no display, no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buffer = io.BytesIO()
    FigureCanvasAgg(figure).print_png(buffer)
    return buffer.getvalue()
