"""The live dashboard on a real tiny GRPO run: files, frames, show_run, and stopping gracefully."""

import os
import re
import signal
import time

import pytest
from rich.console import Console

from grpo_lite import LiveDashboard, prepare_dataset, read_metrics, show_run, train
from grpo_lite.monitor.samples import SampleLog, episode, read_samples
from grpo_lite.monitor.views import Frame, frame_html, frame_rich
from grpo_lite.run.callbacks import RunCallback, attach_all

QUICK = dict(preset="cpu-smoke", num_generations=4, per_device_train_batch_size=8, max_completion_length=12)


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) / 10 for c in completions]


def maybe_none_reward(completions, **kwargs):
    return [None if i == 0 else float("a" in c[0]["content"]) for i, c in enumerate(completions)]


@pytest.fixture
def questions():
    return prepare_dataset([{"question": f"Spell {w}", "answer": w} for w in ["cat", "dog", "owl", "bee"] * 4], system_prompt=None)


def test_a_run_leaves_png_samples_and_invariants(tiny_model, questions, tmp_path):
    model, tokenizer = tiny_model
    result = train(model, tokenizer, questions, [length_reward, maybe_none_reward], output_dir=tmp_path, max_steps=3,
                   dashboard="log", **QUICK)
    assert (tmp_path / "dashboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    samples = read_samples(tmp_path)
    assert [s["step"] for s in samples] == [1] * 8 + [2] * 8 + [3] * 8
    last = samples[-8:]
    assert [s["advantage"] for s in last] == pytest.approx(list(result.trainer._logs["advantages"]))
    assert last[0]["rewards"]["maybe_none_reward"] is None and isinstance(last[1]["rewards"]["length_reward"], float)
    records = read_metrics(tmp_path)
    assert all(abs(r["invariants/within_group_adv_sum_absmax"]) < 1e-3 for r in records)
    assert all("invariants/advantage_abs_mean" in r for r in records)


def test_show_run_redraws_a_finished_run_from_its_files(tiny_model, questions, tmp_path):
    model, tokenizer = tiny_model
    train(model, tokenizer, questions, [length_reward], output_dir=tmp_path, max_steps=2, dashboard=False, **QUICK)
    assert not (tmp_path / "dashboard.png").exists()
    dashboard = show_run(tmp_path, view="log")
    assert [r["step"] for r in dashboard.history] == [1, 2] and len(dashboard.samples.recent) == 16
    html = frame_html(dashboard.frame())
    assert "data:image/png;base64," in html and "reward_std" in html and "<b>kl</b>" in html
    assert (tmp_path / "dashboard.png").exists()
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl"):
        show_run(tmp_path / "nothing")


def test_redraws_are_throttled_to_the_overhead_budget(tiny_model, questions, tmp_path):
    model, tokenizer = tiny_model
    eager = LiveDashboard(view="log", max_overhead=1.0, min_interval=0.0)
    throttled = LiveDashboard(view="log", max_overhead=0.02, min_interval=0.0)
    train(model, tokenizer, questions, [length_reward], output_dir=tmp_path, max_steps=8, dashboard=eager,
          callbacks=[throttled], **QUICK)
    assert eager.redraws == throttled.redraws == 8 + 1, "numbers and samples at every step, and at the end"
    # charts wait until they fit the budget (how many fit depends on the machine); the last comes at the end
    assert eager.charts >= throttled.charts >= 1
    assert (tmp_path / "dashboard.png").exists()
    assert [s["step"] for s in read_samples(tmp_path)] == [step for step in range(1, 9) for _ in range(8)], "written once"


def test_works_with_a_bare_trl_trainer(tiny_model, questions, tmp_path):
    from trl import GRPOTrainer

    from grpo_lite.run.config import make_config
    from grpo_lite.training.trl_compat import enable_cpu_logprobs

    enable_cpu_logprobs()
    model, tokenizer = tiny_model
    config = make_config("cpu-smoke", output_dir=tmp_path, max_steps=2, num_generations=4, per_device_train_batch_size=8,
                         max_completion_length=12)
    samples, dashboard = SampleLog(tmp_path), LiveDashboard(view="log")
    trainer = GRPOTrainer(model=model, reward_funcs=[length_reward], args=config, train_dataset=questions,
                          processing_class=tokenizer, callbacks=[samples, dashboard])
    attach_all(trainer)
    trainer.train()
    assert (tmp_path / "dashboard.png").exists() and dashboard.redraws >= 1
    assert [s["step"] for s in read_samples(tmp_path)] == [1] * 8 + [2] * 8
    assert [r["step"] for r in dashboard.history] == [1, 2]
    assert dashboard.frame().samples == list(samples.recent)[-dashboard.samples_shown:]  # the run's samples, shown


def test_the_dashboard_only_draws(tiny_model, questions, tmp_path):
    # without a SampleLog it writes no samples.jsonl, and it leaves the Trainer's own callbacks alone
    from trl import GRPOTrainer

    from grpo_lite.run.config import make_config
    from grpo_lite.training.trl_compat import enable_cpu_logprobs

    enable_cpu_logprobs()
    model, tokenizer = tiny_model
    config = make_config("cpu-smoke", output_dir=tmp_path, max_steps=1, num_generations=4, per_device_train_batch_size=8,
                         max_completion_length=12)
    dashboard = LiveDashboard(view="log")
    trainer = GRPOTrainer(model=model, reward_funcs=[length_reward], args=config, train_dataset=questions,
                          processing_class=tokenizer, callbacks=[dashboard])
    before = [type(c).__name__ for c in trainer.callback_handler.callbacks]
    dashboard.attach(trainer)
    trainer.train()
    assert not (tmp_path / "samples.jsonl").exists() and dashboard.frame().samples == []
    assert [type(c).__name__ for c in trainer.callback_handler.callbacks] == [*before, "StopSwitch"]
    assert (tmp_path / "dashboard.png").exists()


def test_the_notebook_html_escapes_completions_and_leaves_missing_scores_blank():
    sample = {"step": 3, "prompt": "user: add <b>", "completion": "<script>alert(1)</script>",
              "rewards": {"format": None, "correct": 1.0}, "total": 1.0, "advantage": -0.5}
    html = frame_html(Frame(header={"step": "3/10"}, latest={"reward": 0.5, "invariants/kl_share": 0.1}, samples=[sample]))
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<td>1</td><td></td><td>1</td><td>-0.5</td>" in html  # correct, format (blank), total, advantage
    assert "<b>kl_share</b>" in html


def test_each_sample_is_drawn_as_its_episode_turn_by_turn_and_a_plain_reply_as_one_model_turn():
    call = {"type": "function", "function": {"name": "guess", "arguments": {"number": 5}}}
    turns, ended = episode([{"role": "assistant", "content": "I try <5>", "tool_calls": [call]},
                            {"role": "tool", "name": "guess", "content": "lower"},
                            {"role": "assistant", "content": "", "tool_calls": [call]}])
    played = {"step": 2, "prompt": [{"role": "user", "content": "Find my number."}], "completion": "I try <5>",
              "episode": turns, "ended": ended, "rewards": {"NumberGuess": 0.0}, "total": 0.0, "advantage": -1.0}
    plain = {"step": 2, "prompt": "user: 2+2?", "completion": "4", "episode": episode("4")[0], "ended": "done",
             "rewards": {"NumberGuess": None}, "total": None, "advantage": None}
    html = frame_html(Frame(header={}, latest={}, samples=[played, plain]))
    assert "<th>episode</th><th>ended</th><th>NumberGuess</th>" in html
    drawn = re.findall(r'<div class="grpo-lite-turn grpo-lite-(\w+)"[^>]*>(.*?)</div>', html)
    assert drawn == [("model", "I try &lt;5&gt;"), ("call", "guess(number=5)"), ("tool", "guess -&gt; lower"),
                     ("call", "guess(number=5)"), ("model", "4")]
    assert "<td>turn limit</td><td>0</td>" in html and "<td>done</td><td></td>" in html
    panel = Console(width=200, record=True)
    panel.print(frame_rich(Frame(header={}, latest={}, samples=[played, plain])))
    text = panel.export_text()
    assert "I try <5> | guess(number=5) | guess -> lower | guess(number=5)" in text and "turn limit" in text


class StopAtStep:
    """A stand-in for a click on the notebook's Stop button (a real click is in the browser test)."""

    def __init__(self, dashboard, step):
        self.dashboard, self.step = dashboard, step

    def __call__(self, completions, trainer_state, **kwargs):
        if trainer_state.global_step == self.step:
            self.dashboard.request_stop()
        return [0.0] * len(completions)


def test_stop_request_ends_after_the_step_with_a_checkpoint(tiny_model, questions, tmp_path):
    model, tokenizer = tiny_model
    watcher = LiveDashboard(view="log")
    stop = StopAtStep(watcher, 1)
    stop.__name__ = "stop_reward"
    result = train(model, tokenizer, questions, [length_reward, stop], output_dir=tmp_path, max_steps=10, dashboard=watcher,
                   **{**QUICK, "save_steps": 100})
    assert result.trainer.state.global_step == 2
    assert (tmp_path / "checkpoint-2").is_dir()


def test_first_ctrl_c_stops_gracefully(tiny_model, questions, tmp_path):
    def interrupting_reward(completions, trainer_state, **kwargs):
        if trainer_state.global_step == 1:
            os.kill(os.getpid(), signal.SIGINT)
        return [0.0] * len(completions)

    model, tokenizer = tiny_model
    result = train(model, tokenizer, questions, [interrupting_reward], output_dir=tmp_path, max_steps=10, dashboard=False,
                   **{**QUICK, "save_steps": 100})
    assert result.trainer.state.global_step == 2 and (tmp_path / "checkpoint-2").is_dir()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_dashboard_is_the_runs_only_voice(tiny_model, questions, tmp_path, capfd):
    model, tokenizer = tiny_model
    result = train(model, tokenizer, questions, [length_reward], output_dir=tmp_path, max_steps=2, dashboard="log", **QUICK)
    out, err = capfd.readouterr()
    assert "grpo-lite: step 2/2 reward=" in err
    assert "'loss'" not in out + err, "the Trainer's per-step dict print is not printed next to the dashboard's"
    names = {type(callback).__name__ for callback in result.trainer.callback_handler.callbacks}
    assert not names & {"ProgressCallback", "PrinterCallback", "NotebookProgressCallback"}


class Recorder(RunCallback):
    """A user's callback on the declared protocol; it breaks training at its first step."""

    def __init__(self):
        self.events = []

    def attach(self, trainer):
        self.events.append(("attach", type(trainer).__name__))

    def on_step_end(self, args, state, control, **kwargs):
        raise RuntimeError("the user's callback failed")

    def close(self):
        self.events.append(("close", None))


def test_a_users_run_callback_is_attached_and_closed_when_training_fails(tiny_model, questions, tmp_path):
    model, tokenizer = tiny_model
    recorder = Recorder()
    with pytest.raises(RuntimeError, match="the user's callback failed"):
        train(model, tokenizer, questions, [length_reward], output_dir=tmp_path, max_steps=3, dashboard="log",
              callbacks=[recorder], **QUICK)
    assert recorder.events == [("attach", "GRPOTrainer"), ("close", None)]


class EvaluationAround(RunCallback):
    """After the held-out evaluation in the callback order: times the steps, sees what is drawn while the evaluation
    before training runs, and stands in for a slow evaluation after training."""

    def __init__(self, dashboard, after_seconds):
        self.dashboard, self.after_seconds = dashboard, after_seconds
        self.view_during_evaluation, self.first_step, self.last_step_end = "unset", None, None

    def on_train_begin(self, args, state, control, **kwargs):
        self.view_during_evaluation = self.dashboard.view

    def on_step_begin(self, args, state, control, **kwargs):
        self.first_step = self.first_step or time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.last_step_end = time.perf_counter()

    def on_train_end(self, args, state, control, **kwargs):
        time.sleep(self.after_seconds)


def test_the_final_frame_times_training_only_and_evaluation_shows_progress_without_stop(tiny_model, questions, tmp_path,
                                                                                        capfd):
    model, tokenizer = tiny_model
    dashboard = LiveDashboard(view="log")
    around = EvaluationAround(dashboard, after_seconds=3.0)
    result = train(model, tokenizer, questions, [length_reward], output_dir=tmp_path, max_steps=2, dashboard=dashboard,
                   heldout=questions, heldout_n=4, callbacks=[around], **QUICK)
    assert around.view_during_evaluation is None  # no dashboard, so no Stop button, while evaluation runs
    minutes, seconds = map(int, dashboard.frame(result.trainer.state).header["elapsed"].split(":"))
    trained = around.last_step_end - around.first_step
    assert minutes * 60 + seconds <= trained + 1, "the time after the last step is not training time"
    err = capfd.readouterr().err
    assert "held-out before training: greedy" in err and "held-out after training: greedy" in err and "4/4" in err


class _LoggedBatch:
    """What samples.py reads of a GRPOTrainer: its ``_logs`` of the last batch, as TRL keeps them (trl/trainer/
    grpo_trainer.py: ``images``, a list per sample, from TRL 0.25; ``image``, one per sample, in TRL 0.22). The batch is
    written here; the real trainer's, with a vision-language model, is in tests/test_vision.py."""

    def __init__(self, images_key, images):
        prompt = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What colour is it?"}]}]
        self._logs = {"prompt": [prompt] * 4, "completion": ["red", "blue", "red", "green"], "advantages": [1.0, -1.0, 0.5, -0.5],
                      "rewards": {"colour": [1.0, 0.0, 1.0, 0.0]}, images_key: images}
        self.reward_weights = [1.0]


@pytest.mark.parametrize("images_key", ["images", "image"])
def test_each_sample_refers_to_its_image_and_the_dashboard_shows_it_small(images_key, tmp_path):
    from PIL import Image

    from grpo_lite.monitor.samples import THUMBNAIL_PX, batch_samples
    from grpo_lite.monitor.show import show_run

    red, blue = Image.new("RGB", (640, 320), "red"), Image.new("L", (100, 700), 90)
    images = [red, red, blue, blue] if images_key == "image" else [[red], [red], [blue, red], [blue, red]]
    log = SampleLog(tmp_path)
    log.add(batch_samples(_LoggedBatch(images_key, images), step=1))
    rows = read_samples(tmp_path)
    assert [len(r["images"]) for r in rows] == ([1] * 4 if images_key == "image" else [1, 1, 2, 2])
    names = {name for r in rows for name in r["images"]}
    assert len(names) == 2 and {p.name for p in (tmp_path / "sample_images").iterdir()} == {n.split("/")[1] for n in names}
    assert (tmp_path / "samples.jsonl").stat().st_size < 4000  # names, not the images
    for name in names:
        with Image.open(tmp_path / name) as thumb:
            assert max(thumb.size) == THUMBNAIL_PX and thumb.mode == "RGB"
    assert rows[0]["images"] != rows[2]["images"] and rows[0]["prompt"][0]["content"][1]["text"] == "What colour is it?"

    dashboard = LiveDashboard(tmp_path, view="log")
    dashboard.samples = log
    page = frame_html(dashboard.frame())
    assert page.count('class="grpo-lite-thumbnail"') == sum(len(r["images"]) for r in rows)
    assert "What colour is it?" in page and "data:image/png;base64," in page
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5}\n')
    finished = show_run(tmp_path, view="log")  # a finished run's dashboard reads the thumbnails from its folder
    assert frame_html(finished.frame()).count('class="grpo-lite-thumbnail"') == page.count('class="grpo-lite-thumbnail"')
