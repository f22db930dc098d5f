"""A long run stays light: what the dashboard, its charts and the reports draw does not grow with the run.

The timings are in benchmarks/long_run.py (docs/benchmarks.md); these tests hold the mechanisms that bound them:
warnings drawn as one line per rule, chart series downsampled as they arrive (a spike kept), reports that draw
their first rows and count the rest.
"""

import csv
import io

import pytest

from grpo_lite.monitor.dashboard import LiveDashboard
from grpo_lite.monitor.figure import BUCKETS, RECENT_POINTS, ChartData, Downsampled, dashboard_figure, smoothed
from grpo_lite.monitor.health import KEPT, HealthMonitor, WarningSummary, replay
from grpo_lite.monitor.views import Frame, frame_html, frame_rich
from rewards import check_rewards, numeric_correctness_reward, soft_xml_format_reward


def step(n: int, tied: bool) -> dict:
    """A step record; a tied step (every completion scoring the same) raises no_signal, the next one clears it."""
    return {"step": n, "reward": 0.5 + (n % 7) / 10, "reward_std": 0.0 if tied else 0.4, "frac_reward_zero_std": 1.0 if tied else 0.0,
            "kl": 0.01, "grad_norm": 0.3, "loss": 0.01, "completions/mean_length": 100.0, "completions/clipped_ratio": 0.0,
            "rewards/correct/mean": 0.5, "rewards/correct/std": 0.4}


def stream(steps: int) -> list[dict]:
    return [step(n, tied=n % 2 == 0) for n in range(1, steps + 1)]


def monitor_after(steps: int) -> HealthMonitor:
    monitor = HealthMonitor(beta=0.04, reward_names=["correct"])
    for record in stream(steps):
        monitor.update(record)
    return monitor


def rendered(frame: Frame) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(frame_rich(frame))
    return console.file.getvalue()


def test_the_warning_summary_stays_the_same_size_however_often_a_rule_fires():
    short, long = monitor_after(100), monitor_after(4_000)
    assert long.rules["no_signal"].count == 2_000 and long.rules["no_signal"].first_step == 2
    assert long.rules["no_signal"].last_step == 4_000 and long.total >= 2_000
    assert len(long.warnings) == KEPT, "the occurrences kept in memory are bounded"
    frames = {n: Frame(header={"step": str(n)}, latest={}, warnings=m.summary()) for n, m in ((100, short), (4_000, long))}
    html = {n: frame_html(frame) for n, frame in frames.items()}
    text = {n: rendered(frame) for n, frame in frames.items()}
    assert abs(len(html[4_000]) - len(html[100])) < 100, "only the counts and step numbers differ"
    assert text[4_000].count("\n") == text[100].count("\n")
    assert "2,000" in html[4_000] and "2-4000" in html[4_000] and "step 4000" in html[4_000]
    warnings_table = html[4_000].split('class="grpo-lite-warnings"')[1].split("</table>")[0]
    assert warnings_table.count("<tr>") == 1 + len(long.rules), "one line per rule under the header"


def test_a_list_of_warnings_is_drawn_as_the_same_summary():
    warnings = replay(stream(400), beta=0.04, reward_names=["correct"])
    assert len(warnings) >= 200, "replay gives every occurrence: the full record behind the bounded one"
    summary = WarningSummary.of(warnings)
    as_list = frame_html(Frame(header={}, latest={}, warnings=warnings))
    assert as_list == frame_html(Frame(header={}, latest={}, warnings=summary))
    assert summary.rules[0].count == 200 and len(summary.recent) == 5


def test_the_dashboards_frame_carries_the_summary_not_every_warning(tmp_path):
    dashboard = LiveDashboard(tmp_path, view="log")
    dashboard.health = monitor_after(1_000)
    frame = dashboard.frame()
    assert isinstance(frame.warnings, WarningSummary) and frame.warnings.total == dashboard.health.total
    assert len(frame.warnings.recent) <= 5


def test_a_downsampled_series_keeps_a_planted_spike_and_dip():
    series = Downsampled()
    for n in range(1, 50_001):
        series.append(n, 100.0 if n == 12_345 else -100.0 if n == 30_001 else 1.0)
    steps, values = series.points()
    assert len(steps) <= 2 * BUCKETS + 2 + RECENT_POINTS
    assert (12_345, 100.0) in zip(steps, values) and (30_001, -100.0) in zip(steps, values)
    assert steps == sorted(steps)
    assert steps[-RECENT_POINTS:] == list(range(50_001 - RECENT_POINTS, 50_001)), "every point of the recent window"


def test_a_short_series_is_drawn_whole_and_the_smoothed_line_matches():
    records = stream(200)
    chart = ChartData(records)
    assert chart.points("reward") == ([r["step"] for r in records], [r["reward"] for r in records])
    assert chart.points("reward (smoothed)")[1] == pytest.approx(smoothed([r["reward"] for r in records]))
    assert chart.reward_names == ["correct"]


def test_the_chart_draws_a_spike_of_a_long_run_from_bounded_series():
    chart = ChartData()
    for n in range(1, 20_001):
        chart.add({**step(n, tied=False), "reward": 50.0 if n == 7_777 else 0.5})
    figure = dashboard_figure(chart)
    dots = figure.axes[0].lines[0]
    assert len(dots.get_xdata()) <= 2 * BUCKETS + 2 + RECENT_POINTS
    assert 50.0 in list(dots.get_ydata()) and 7_777 in list(dots.get_xdata())


RIGHT = "<reasoning>\n3 + 4 = 7\n</reasoning>\n<answer>\n7\n</answer>"
WRONG = "<reasoning>\n3 + 4 = 8\n</reasoning>\n<answer>\n8\n</answer>"


def lab_rows(n: int) -> list[dict]:
    """Groups of 4; every third group ties (all wrong)."""
    return [{"prompt": f"q{i // 4}", "completion": WRONG if (i // 4) % 3 == 0 or i % 2 else RIGHT, "answer": "7"} for i in range(n)]


def test_a_reports_display_shows_its_first_rows_and_counts_the_rest(tmp_path):
    report = check_rewards([soft_xml_format_reward, numeric_correctness_reward], lab_rows(500))
    text, html = str(report), report._repr_html_()
    assert "Reward lab: 500 rows x 2 functions" in text
    assert "... and 480 more rows: report.rows" in text and "480 more rows" in html
    assert "rows 0-19 of 500" in text
    no_signal = [p for p in report.problems if p.kind == "no_signal"]
    assert len(no_signal) == 42 and text.count("no_signal") == 1 and "42 times" in text, "one line for the kind, counted"
    assert len(report.rows) == 500
    path = report.to_csv(tmp_path / "lab.csv")
    with path.open() as handle:
        written = list(csv.DictReader(handle))
    assert len(written) == 500 and written[499]["numeric_correctness_reward"] == "0.0"
    assert set(written[0]) == {"row", "group", "completion", "parsed", "gold", "soft_xml_format_reward",
                               "numeric_correctness_reward", "total", "advantage"}


def test_a_reports_display_is_the_same_size_for_ten_times_the_rows():
    small, large = (check_rewards([soft_xml_format_reward, numeric_correctness_reward], lab_rows(n)) for n in (200, 2_000))
    assert abs(len(str(large)) - len(str(small))) < 200
    assert abs(len(large._repr_html_()) - len(small._repr_html_())) < 400
    large.rows_shown = 3
    assert "... and 1,997 more rows" in str(large)


def test_a_preview_report_shows_its_first_groups_and_counts_the_rest():
    from grpo_lite.evaluation.group_preview import report_on
    from grpo_lite.model.inference import Completion

    rows = lab_rows(200)  # 50 groups of 4
    completions = [Completion(row["completion"], tuple(range(10)), False) for row in rows]
    groups = [list(range(g * 4, g * 4 + 4)) for g in range(50)]
    settings = {"reward_weights": None, "scale_rewards": "group", "multi_objective_aggregation": "sum_then_normalize"}
    report = report_on(rows, groups, completions, [numeric_correctness_reward], settings, [])
    text = str(report)
    assert "Preview: 50 prompts x 4 completions" in text and "groups 0-19 of 50" in text
    assert "... and 30 more groups: report.groups, report.browse()" in text
    assert "per function" in text and "numeric_correctness_reward" in text


def test_show_run_draws_a_page_of_the_same_size_for_a_long_run(tmp_path):
    from grpo_lite import show_run
    from grpo_lite.run.files import METRICS_FILE, write_jsonl

    pages = {}
    for steps in (100, 3_000):
        run = tmp_path / str(steps)
        run.mkdir()
        write_jsonl(run / METRICS_FILE, stream(steps))
        dashboard = show_run(run, view="log")
        frame = dashboard.frame()
        frame.png = None  # the chart's PNG is as large as its pixels; the rest is what could grow
        pages[steps] = frame_html(frame)
        assert dashboard.health.rules["no_signal"].count == steps // 2
    assert abs(len(pages[3_000]) - len(pages[100])) < 100
