"""Where the dashboard is drawn: a notebook output, a terminal, or plain log lines.

Every view takes the same :class:`Frame`. The notebook view updates one display handle holding one
fixed-size HTML block (an inline PNG and a table): flicker-free, no widget manager or CDN needed, and the
last frame stays in the saved notebook. The terminal view is a rich ``Live`` panel. A frame is the same size
at step 10 and at step 50,000: warnings come as a :class:`~grpo_lite.monitor.health.WarningSummary` (one line
per rule, then the newest few), the charts as one PNG of downsampled series, the samples as the newest few.
"""

from __future__ import annotations

import base64
import html
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..run.settings import ConfigError
from .health import HealthWarning, WarningSummary
from .samples import episode, question_of, result_text

COMPLETION_CHARS = 300  # of each turn's text and each tool result


@dataclass
class Frame:
    """Everything one redraw shows."""

    header: dict[str, str]
    latest: dict[str, Any]
    warnings: WarningSummary = field(default_factory=WarningSummary)  # a list of HealthWarning is summarised too
    samples: list[dict[str, Any]] = field(default_factory=list)
    png: bytes | None = None


def _fmt(value: Any) -> str:
    """Numbers to 4 significant digits; a missing value (a reward that did not apply) is blank."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


LATEST_KEYS = ("reward", "reward_std", "frac_reward_zero_std", "kl", "completions/mean_length", "completions/clipped_ratio", "grad_norm")


def latest_values(latest: dict[str, Any]) -> list[tuple[str, str]]:
    """The newest step's headline metrics, then its ``invariants/*`` checks when the run logs them."""
    invariants = sorted(k for k in latest if k.startswith("invariants/"))
    return [(key.removeprefix("invariants/"), _fmt(latest.get(key))) for key in (*LATEST_KEYS, *invariants)]


def summary_of(warnings: WarningSummary | Sequence[HealthWarning]) -> WarningSummary:
    return warnings if isinstance(warnings, WarningSummary) else WarningSummary.of(warnings)


def _steps(rule) -> str:
    return str(rule.first_step) if rule.count == 1 else f"{rule.first_step}-{rule.last_step}"


def warnings_html(warnings: WarningSummary | Sequence[HealthWarning]) -> str:
    """The warnings as one line per rule (times fired, first and last step, latest message, fix), then the newest few."""
    summary = summary_of(warnings)
    if not summary:
        return '<ul style="color:#a33"><li>no warnings</li></ul>'
    rows = "".join(
        f"<tr><td><b>{html.escape(r.rule)}</b></td><td style='text-align:right'>{r.count:,}</td><td>{_steps(r)}</td>"
        f"<td>{html.escape(r.message)}</td><td><i>{html.escape(r.fix)}</i></td></tr>"
        for r in summary.rules
    )
    recent = "; ".join(f"step {w.step} <b>{html.escape(w.rule)}</b>" for w in reversed(summary.recent))
    return (
        '<table class="grpo-lite-warnings" style="color:#a33;margin:4px 0">'
        f"<tr><th>warning</th><th>times</th><th>steps</th><th>latest</th><th>fix</th></tr>{rows}</table>"
        f'<div style="color:#a33">{summary.total:,} warnings in all; newest: {recent}</div>'
    )


def _thumbnails_html(sample: dict[str, Any]) -> str:
    """A sample's images, small, before its question."""
    return "".join(f'<img class="grpo-lite-thumbnail" style="height:48px;margin-right:4px;vertical-align:middle" '
                   f'src="data:image/png;base64,{base64.b64encode(png).decode()}">' for png in sample.get("thumbnails", ()))


def episode_lines(sample: dict[str, Any]) -> list[tuple[str, str]]:
    """A sample's episode as the views draw it, line by line: ``("model", text)``, ``("call", "tool(arguments)")``,
    ``("tool", "tool -> result")``, ``("environment", text)`` (a rollout function's environment); a plain reply is one
    model line. Rows written before episodes were logged are read as their completion's episode."""
    turns = sample.get("episode") or episode(sample["completion"])[0]
    lines = []
    for turn in turns:
        if turn["turn"] == "tool":
            lines.append(("tool", f"{turn['tool']} -> {result_text(turn['result'])[:COMPLETION_CHARS]}"))
            continue
        if turn["turn"] == "environment":
            lines.append(("environment", turn["text"][:COMPLETION_CHARS]))
            continue
        if turn["text"] or not turn["calls"]:  # an empty reply is still the model's turn; a bare call is its calls
            lines.append(("model", turn["text"][:COMPLETION_CHARS]))
        lines += [("call", f"{call['tool']}({_arguments(call['arguments'])})") for call in turn["calls"]]
    return lines


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, dict):
        return ", ".join(f"{name}={value!r}" for name, value in arguments.items())
    return "" if arguments is None else str(arguments)


def ended(sample: dict[str, Any]) -> str:
    """Where a sample's episode ended (done, turn limit, tool error); a row without one ended done."""
    return sample.get("ended") or "done"


TURN_STYLE = {"model": "", "call": "color:#1a5fb4", "tool": "color:#26734d", "environment": "color:#26734d"}


def _episode_html(sample: dict[str, Any]) -> str:
    lines = "".join(f'<div class="grpo-lite-turn grpo-lite-{kind}" style="{TURN_STYLE[kind]}">{html.escape(text)}</div>'
                    for kind, text in episode_lines(sample))
    return (f"<details><summary>{html.escape(sample['completion'][:60])}</summary>"
            f"<div style='white-space:pre-wrap;font-family:monospace'>{lines}</div></details>")


def frame_html(frame: Frame) -> str:
    """One self-contained HTML block (fixed width, so updates do not reflow the page)."""
    header = " &middot; ".join(f"<b>{html.escape(k)}</b> {html.escape(v)}" for k, v in frame.header.items())
    latest = "".join(f'<div style="margin-right:14px"><b>{html.escape(k)}</b><br>{v}</div>' for k, v in latest_values(frame.latest))
    image = f'<img style="width:960px" src="data:image/png;base64,{base64.b64encode(frame.png).decode()}">' if frame.png else ""
    names = sorted({n for s in frame.samples for n in s["rewards"]})
    rows = "".join(
        "<tr>"
        f"<td>{s['step']}</td><td>{_thumbnails_html(s)}{html.escape(question_of(s['prompt'])[:80])}</td>"
        f"<td>{_episode_html(s)}</td><td>{html.escape(ended(s))}</td>"
        + "".join(f"<td>{_fmt(s['rewards'].get(n))}</td>" for n in names)
        + f"<td>{_fmt(s['total'])}</td><td>{_fmt(s['advantage'])}</td></tr>"
        for s in frame.samples
    )
    heads = "".join(f"<th>{html.escape(n)}</th>" for n in names)
    return (
        '<div class="grpo-lite-dashboard" style="width:980px;font-family:sans-serif;font-size:12px">'
        f'<div>{header}</div><div style="display:flex;flex-wrap:wrap;margin:6px 0">{latest}</div>'
        f"{warnings_html(frame.warnings)}{image}"
        f"<table><tr><th>step</th><th>prompt</th><th>episode</th><th>ended</th>{heads}<th>total</th><th>advantage</th></tr>{rows}</table>"
        "</div>"
    )


def frame_rich(frame: Frame):
    """The same frame as a rich renderable for terminals."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    latest = Table.grid(padding=(0, 2))
    values = latest_values(frame.latest)
    latest.add_row(*[Text(k, style="bold") for k, _ in values])
    latest.add_row(*[v for _, v in values])
    names = sorted({n for s in frame.samples for n in s["rewards"]})
    samples = Table("step", "episode", "ended", *names, "total", "adv", expand=True)
    for s in frame.samples[-4:]:
        turns = " | ".join(text for _, text in episode_lines(s))
        samples.add_row(str(s["step"]), Text(turns[:120].replace("\n", "\\n")), ended(s),
                        *[_fmt(s["rewards"].get(n)) for n in names], _fmt(s["total"]), _fmt(s["advantage"]))
    warnings = [Text(f"! {line}", style="yellow") for line in summary_of(frame.warnings).lines()]
    title = "  ".join(f"{k}: {v}" for k, v in frame.header.items())
    return Panel(Group(latest, *warnings, samples), title=title, title_align="left")


class NotebookView:
    """One display handle, updated in place; with ``on_stop``, a :class:`StopButton` above it where the kernel
    can deliver its click while training (else a line saying how to stop)."""

    def __init__(self, on_stop=None):
        from IPython import get_ipython
        from IPython.display import HTML, display

        from .stop_button import StopButton, click_delivery, why_no_button

        self._html = HTML
        self.stop_button = None
        if on_stop is not None:
            kernel = getattr(get_ipython(), "kernel", None)
            delivery = click_delivery(kernel)
            if delivery is None:
                print(f"grpo-lite: {why_no_button(kernel)}")
            else:
                self.stop_button = StopButton(on_stop, kernel, delivery)
        self.handle = display(HTML("<i>grpo-lite: waiting for the first step...</i>"), display_id=True)

    def poll(self) -> None:
        if self.stop_button is not None:
            self.stop_button.poll()

    def update(self, frame: Frame) -> None:
        self.handle.update(self._html(frame_html(frame)))

    def close(self) -> None:
        if self.stop_button is not None:
            self.stop_button.close()


class TerminalView:
    def __init__(self):
        from rich.console import Console
        from rich.live import Live

        self.live = Live(console=Console(), auto_refresh=False, transient=False)
        self.live.start()

    def update(self, frame: Frame) -> None:
        self.live.update(frame_rich(frame), refresh=True)

    def poll(self) -> None:
        """Ctrl-C is the terminal's stop control (see ``grpo_lite.run.stopping.InterruptStops``)."""

    def close(self) -> None:
        self.live.stop()


class LogView:
    """For logs and CI: one line per redraw, warnings as they come."""

    def update(self, frame: Frame) -> None:
        values = " ".join(f"{k}={_fmt(frame.latest.get(k))}" for k in ("reward", "reward_std", "kl"))
        print(f"grpo-lite: step {frame.header.get('step', '?')} {values}", file=sys.stderr, flush=True)

    def poll(self) -> None:
        """Nothing to poll: stop with Ctrl-C."""

    def close(self) -> None:
        pass


def in_notebook() -> bool:
    """True under a Jupyter kernel (JupyterLab, Colab, Kaggle, VS Code); False in a terminal, even in IPython."""
    if "IPython" not in sys.modules:  # never import IPython just to find out
        return False
    shell = sys.modules["IPython"].get_ipython()
    return getattr(shell, "kernel", None) is not None


VIEWS = ("auto", "notebook", "terminal", "log")


def resolve_view(kind: str) -> str:
    """``"auto"`` made concrete: the notebook view under a Jupyter kernel (JupyterLab, Colab, Kaggle, VS Code),
    rich in a terminal, log lines otherwise; ``"notebook"`` without a kernel to show HTML falls back to log lines."""
    if kind not in VIEWS:
        raise ConfigError(f"dashboard view {kind!r}: use one of {', '.join(map(repr, VIEWS))}")
    if kind == "auto":
        kind = "notebook" if in_notebook() else "terminal" if sys.stdout.isatty() else "log"
    return "log" if kind == "notebook" and not in_notebook() else kind


def make_view(kind: str, on_stop=None):
    """The view for ``kind`` (see :func:`resolve_view`); ``on_stop`` is called when the notebook's Stop button
    is clicked (other views stop on Ctrl-C)."""
    kind = resolve_view(kind)
    if kind == "notebook":
        return NotebookView(on_stop)
    return TerminalView() if kind == "terminal" else LogView()
