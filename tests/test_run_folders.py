"""A run folder is never overwritten by accident: from Python, a run YAML, --set, train_stages and the launch kit.

A run given no output_dir gets a fresh outputs/<model>-<n>; a folder holding another run is refused before anything is
written, naming the folder and the three ways on (resume, another folder, overwrite); overwrite=True replaces that run's
files and keeps every other file, and run.yaml records it. Every way a folder can look, called every way
(test_a_call_replaces_no_file_it_did_not_write): a file that was there before the call is there after it, byte for
byte, unless the call resumed or overwrote a grpo-lite run as asked, and then the user's own files are.
"""

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import yaml

from grpo_lite import Stage, prepare_dataset, read_metrics, train, train_stages
from grpo_lite.data.prepare import DatasetError
from grpo_lite.errors import UserError
from grpo_lite.launch.cli import main
from grpo_lite.launch.kit import launch_commands, write_launch_kit
from grpo_lite.run.files import earlier_run, fresh_run_dir, record_origin, run_name
from grpo_lite.run.record import RunRecord, read_run
from grpo_lite.run.settings import ConfigError, RunSettings

ROWS = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(8)]
QUICK = dict(preset="cpu-smoke", max_steps=1, num_generations=4, per_device_train_batch_size=4, max_completion_length=8,
             dashboard=False)
THREE_WAYS = ("resume=True (--resume)", "another output_dir (--output-dir)", "overwrite=True (overwrite: true)")


@pytest.fixture
def dataset():
    return prepare_dataset(ROWS, system_prompt=None)


def _earlier_run(folder: Path) -> dict[str, bytes]:
    """A finished run's files, as train() leaves them (its run.yaml as a run writes it), and a file of the user's beside
    them; returns their bytes."""
    (folder / "checkpoint-2").mkdir(parents=True)
    RunRecord(RunSettings(model="earlier", rewards=["exact_match_reward"])).write(folder / "run.yaml")
    files = {"metrics.jsonl": b'{"step": 1, "reward": 0.5}\n', "checkpoint-2/trainer_state.json": b"{}",
             "adapter_model.safetensors": b"earlier weights", "notes.txt": b"the user's own notes"}
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return {"run.yaml": (folder / "run.yaml").read_bytes(), **files}


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder``, by its path inside it, and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _unchanged(folder: Path, files: dict[str, bytes]) -> bool:
    return _files(folder) == files


def test_train_twice_into_the_default_folder_keeps_both_runs(tiny_model, dataset, tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    model, tokenizer = tiny_model
    with caplog.at_level("INFO", logger="grpo_lite"):
        first = train(model, tokenizer, dataset, "numeric_correctness_reward", **QUICK)
        first_files = {p.name: p.read_bytes() for p in first.output_dir.iterdir() if p.is_file()}
        second = train(first.model, tokenizer, dataset, "numeric_correctness_reward", **QUICK)
    name = run_name(str(model.config._name_or_path))
    assert (first.output_dir, second.output_dir) == (Path("outputs", f"{name}-1"), Path("outputs", f"{name}-2"))
    assert {p.name: p.read_bytes() for p in first.output_dir.iterdir() if p.is_file()} == first_files  # intact
    for result in (first, second):
        assert {"run.yaml", "metrics.jsonl"} <= {p.name for p in result.output_dir.iterdir()}
        assert [r["step"] for r in read_metrics(result.output_dir)] == [1]
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("run files go to")]
    assert said == [f"run files go to {first.output_dir} (no output_dir was given: each such run gets a fresh folder)",
                    f"run files go to {second.output_dir} (no output_dir was given: each such run gets a fresh folder)"]


@pytest.mark.parametrize(("change", "origin"), [
    (lambda text: text, "run"),
    (lambda text: text.replace("model: earlier", "model: later"), "edited run"),
    (lambda text: "# mine\n" + text, "edited run"),
    (lambda text: text + "# kept for the paper\n", "edited run"),
    (lambda text: text.rpartition("# written by grpo-lite")[0], "other"),
    (lambda text: "model: earlier\nrewards: [exact_match_reward]\n", "other"),
], ids=["as written", "a value changed", "a comment added", "a line after the stamp", "the stamp removed", "a recipe"])
def test_a_run_record_tells_a_run_s_own_from_an_edited_or_another_file(change, origin, tmp_path):
    written = RunRecord(RunSettings(model="earlier", rewards=["exact_match_reward"])).write(tmp_path / "run.yaml").read_text()
    (tmp_path / "run.yaml").write_text(change(written))
    assert record_origin(tmp_path / "run.yaml") == origin
    assert read_run(tmp_path).settings.model in ("earlier", "later")  # a stamp is a YAML comment: the record reads as before


def test_fresh_folders_number_on_past_the_highest_and_name_the_model(tmp_path):
    (tmp_path / "Qwen2.5-1.5B-Instruct-1").mkdir()
    (tmp_path / "Qwen2.5-1.5B-Instruct-7").mkdir()
    (tmp_path / "Qwen2.5-1.5B-Instruct-x").mkdir()
    assert fresh_run_dir(run_name("unsloth/Qwen2.5-1.5B-Instruct"), tmp_path) == tmp_path / "Qwen2.5-1.5B-Instruct-8"
    assert fresh_run_dir(run_name("./my model/"), tmp_path) == tmp_path / "my-model-1"


def test_train_into_a_folder_holding_a_run_is_refused_before_anything_is_written(tiny_model, dataset, tmp_path):
    model, tokenizer = tiny_model
    files = _earlier_run(tmp_path / "run")
    with pytest.raises(ConfigError) as refused:
        train(model, tokenizer, dataset, "numeric_correctness_reward", output_dir=tmp_path / "run", **QUICK)
    message = str(refused.value)
    assert message.startswith(f"the run: output_dir {str(tmp_path / 'run')!r} holds another run (adapter_model.safetensors, "
                              "checkpoint-2, metrics.jsonl, run.yaml)")
    assert all(way in message for way in THREE_WAYS)
    assert _unchanged(tmp_path / "run", files)


@pytest.mark.parametrize("refusal", ["setting", "dataset", "dashboard"])
def test_a_refused_train_leaves_no_run_yaml_or_metrics(refusal, tiny_model, dataset, tmp_path):
    model, tokenizer = tiny_model
    keywords = {**QUICK, "output_dir": tmp_path / "run"}
    if refusal == "setting":
        keywords["learning_rate"] = float("nan")
    elif refusal == "dataset":
        dataset = dataset.map(lambda row, i: {"prompt": [] if i == 3 else row["prompt"]}, with_indices=True)
    else:
        keywords["dashboard"] = "widget"
    with pytest.raises(DatasetError if refusal == "dataset" else ConfigError, match={
            "setting": "learning_rate=nan: give a number", "dataset": r"row 3, column 'prompt': the chat prompt is empty",
            "dashboard": "dashboard view 'widget'"}[refusal]):
        train(model, tokenizer, dataset, "numeric_correctness_reward", **keywords)
    assert not (tmp_path / "run" / "run.yaml").exists() and not (tmp_path / "run" / "metrics.jsonl").exists()


def test_overwrite_replaces_the_earlier_run_keeps_other_files_and_is_recorded(tiny_model, dataset, tmp_path, caplog):
    model, tokenizer = tiny_model
    _earlier_run(tmp_path / "run")
    with caplog.at_level("WARNING", logger="grpo_lite"):
        result = train(model, tokenizer, dataset, "numeric_correctness_reward", output_dir=tmp_path / "run", overwrite=True,
                       **QUICK)
    assert (tmp_path / "run" / "notes.txt").read_bytes() == b"the user's own notes"
    assert not (tmp_path / "run" / "checkpoint-2").exists()  # the earlier run's checkpoint would have mixed with this one's
    assert read_run(result.output_dir).settings.overwrite is True and read_run(result.output_dir).settings.model != "earlier"
    assert [r["step"] for r in read_metrics(result.output_dir)] == [1]
    assert any("overwrite=True: removed the earlier run's adapter_model.safetensors, checkpoint-2, metrics.jsonl, run.yaml"
               in r.getMessage() for r in caplog.records)


def test_resume_and_overwrite_are_one_or_the_other_and_resume_names_its_folder(tiny_model, dataset, tmp_path):
    model, tokenizer = tiny_model
    with pytest.raises(ConfigError, match="resume=True and overwrite=True together"):
        train(model, tokenizer, dataset, "numeric_correctness_reward", output_dir=tmp_path, resume=True, overwrite=True, **QUICK)
    with pytest.raises(ConfigError, match=r"resume=True needs the run to continue: give its output_dir \(--output-dir\)"):
        train(model, tokenizer, dataset, "numeric_correctness_reward", resume=True, **QUICK)


def test_a_run_on_several_processes_names_its_folder(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    settings = RunSettings(model="tiny", rewards=["exact_match_reward"], preset="cpu-smoke",
                           overrides={"per_device_train_batch_size": 4, "num_generations": 4})
    assert "output_dir: a run on 2 processes needs one folder they all write to; give output_dir (--output-dir)" in \
        settings.problems()
    assert all("--output-dir" in command for mode, command in launch_commands(model="tiny", num_gpus=2).items()
               if "accelerate" in command)


# --- a run YAML and --set -------------------------------------------------------------------------------------------

RECIPE = {"model": "tiny", "dataset": {"builtin": "arithmetic"}, "rewards": ["numeric_correctness_reward"],
          "preset": "cpu-smoke", "overrides": {"max_steps": 1}}


@pytest.mark.parametrize("how", ["yaml", "flag", "set"])
def test_the_command_line_refuses_a_folder_holding_a_run_and_says_the_three_ways(how, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    files = _earlier_run(tmp_path / "run")
    recipe = {**RECIPE, "output_dir": "run"} if how == "yaml" else RECIPE
    Path("recipe.yaml").write_text(yaml.safe_dump(recipe))
    argv = {"yaml": [], "flag": ["--output-dir", "run"], "set": ["--set", "output_dir=run"]}[how]
    assert main(["train", "recipe.yaml", *argv]) == 2
    err = capsys.readouterr().err
    assert "grpo-lite: the run: output_dir 'run' holds another run (adapter_model.safetensors, checkpoint-2" in err
    assert all(way in err for way in THREE_WAYS) and "Traceback" not in err
    assert _unchanged(tmp_path / "run", files) and sorted(p.name for p in tmp_path.iterdir()) == ["recipe.yaml", "run"]


@pytest.mark.parametrize("how", ["yaml", "set"])
def test_overwrite_from_a_run_yaml_or_set_lets_the_run_start(how, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _earlier_run(tmp_path / "run")
    started = []

    def build(path):
        started.append(path)
        raise SystemExit("the model would load now")

    monkeypatch.setattr("grpo_lite.model.tiny.build_tiny_model", build)
    Path("recipe.yaml").write_text(yaml.safe_dump({**RECIPE, **({"overwrite": True} if how == "yaml" else {})}))
    with pytest.raises(SystemExit, match="the model would load now"):
        main(["train", "recipe.yaml", "--output-dir", "run", *(["--set", "overwrite=true"] if how == "set" else [])])
    assert started == [Path("run") / "tiny-model"]


def test_the_command_line_without_an_output_dir_takes_a_fresh_folder_each_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("recipe.yaml").write_text(yaml.safe_dump(RECIPE))
    folders = []

    def build(path):
        folders.append(path)
        path.mkdir(parents=True)  # as the tiny model's files would make it
        raise SystemExit("the model would load now")

    monkeypatch.setattr("grpo_lite.model.tiny.build_tiny_model", build)
    for _ in range(2):
        with pytest.raises(SystemExit):
            main(["train", "recipe.yaml"])
    assert folders == [Path("outputs/tiny-1/tiny-model"), Path("outputs/tiny-2/tiny-model")]


@pytest.mark.slow
def test_the_command_line_trains_twice_into_fresh_folders_and_both_runs_are_intact(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("recipe.yaml").write_text(yaml.safe_dump({**RECIPE, "overrides": {"max_steps": 1, "max_completion_length": 8}}))
    assert main(["train", "recipe.yaml"]) == 0
    first = {p.name: p.read_bytes() for p in Path("outputs/tiny-1").iterdir() if p.is_file()}
    assert main(["train", "recipe.yaml"]) == 0
    assert {p.name: p.read_bytes() for p in Path("outputs/tiny-1").iterdir() if p.is_file()} == first
    assert {"run.yaml", "metrics.jsonl"} <= set(first) and {"run.yaml", "metrics.jsonl"} <= set(earlier_run("outputs/tiny-2"))
    assert "run files in outputs/tiny-2" in capsys.readouterr().out


# --- train_stages and the launch kit ---------------------------------------------------------------------------------

def test_train_stages_refuses_an_earlier_plan_before_its_first_stage(tiny_model, dataset, tmp_path):
    model, tokenizer = tiny_model
    RunRecord(RunSettings(model="earlier", rewards=["exact_match_reward"])).write(tmp_path / "plan" / "2-correct" / "run.yaml")
    stages = [Stage("soft_xml_format_reward", max_steps=1, name="format"), Stage("numeric_correctness_reward", max_steps=1,
                                                                                name="correct")]
    with pytest.raises(ConfigError, match=r"train_stages: output_dir '.*2-correct' holds another run \(run.yaml\)"):
        train_stages(stages, model, tokenizer, dataset, output_dir=tmp_path / "plan", **QUICK)
    assert not (tmp_path / "plan" / "1-format").exists()  # refused before the first stage, not after it


def test_train_stages_without_an_output_dir_takes_a_fresh_folder(tiny_model, dataset, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model, tokenizer = tiny_model
    quick = {k: v for k, v in QUICK.items() if k != "max_steps"}
    results = train_stages([Stage("numeric_correctness_reward", max_steps=1, name="only")], model, tokenizer, dataset, **quick)
    name = run_name(str(model.config._name_or_path))
    assert results[0].output_dir == Path("outputs", f"{name}-1", "1-only")
    assert read_metrics(Path("outputs", f"{name}-1"))[0]["stage"] == "only"


def test_a_launch_kit_is_not_written_over_another(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("recipe.yaml").write_text(yaml.safe_dump(RECIPE))
    assert main(["launch-kit", "recipe.yaml", "--out", "kit"]) == 0
    (tmp_path / "kit" / "recipe.yaml").write_text("# edited by hand\n" + (tmp_path / "kit" / "recipe.yaml").read_text())
    capsys.readouterr()
    assert main(["launch-kit", "recipe.yaml", "--out", "kit"]) == 2
    err = capsys.readouterr().err
    assert "grpo-lite: kit already holds a launch kit (LAUNCH.md, accelerate, recipe.yaml): write it into another folder " \
           "(--out), or replace it with overwrite=True (--overwrite)" in err
    assert (tmp_path / "kit" / "recipe.yaml").read_text().startswith("# edited by hand")
    assert main(["launch-kit", "recipe.yaml", "--out", "kit", "--overwrite"]) == 0
    assert not (tmp_path / "kit" / "recipe.yaml").read_text().startswith("# edited by hand")
    recipe = yaml.safe_load((tmp_path / "kit" / "recipe.yaml").read_text())
    assert "output_dir" not in recipe  # each single-GPU run of it gets a fresh folder
    with pytest.raises(ConfigError, match="already holds a launch kit"):
        write_launch_kit(RECIPE, tmp_path / "kit")


# --- every way a folder can look x every way of calling ----------------------------------------------------------------

CALLS = ("train", "train resume=True", "train overwrite=True", "cli", "cli --resume", "cli --set overwrite=true")
REFUSED, STARTED, RESUMED, OVERWROTE = "refused", "started", "resumed", "overwrote"
# What each call does to each folder: refused (every file as it was, byte for byte), started (a new run in a folder with
# nothing in it), resumed (the run goes on from its checkpoint), overwrote (the run's files replaced, the user's kept)
OUTCOMES = {
    "no folder": (STARTED, STARTED, STARTED, STARTED, STARTED, STARTED),
    "empty": (STARTED, STARTED, STARTED, STARTED, STARTED, STARTED),
    "only hidden entries": (STARTED, STARTED, STARTED, STARTED, STARTED, STARTED),
    "finished run": (REFUSED, RESUMED, OVERWROTE, REFUSED, RESUMED, OVERWROTE),
    "partial run with a checkpoint": (REFUSED, RESUMED, OVERWROTE, REFUSED, RESUMED, OVERWROTE),
    "run with no checkpoint": (REFUSED, REFUSED, OVERWROTE, REFUSED, REFUSED, OVERWROTE),
    "exported adapter": (REFUSED, REFUSED, REFUSED, REFUSED, REFUSED, REFUSED),
    "the user's own files": (REFUSED, REFUSED, REFUSED, REFUSED, REFUSED, REFUSED),
    "edited run.yaml": (REFUSED, REFUSED, OVERWROTE, REFUSED, REFUSED, OVERWROTE),
    "run.yaml of another model": (REFUSED, REFUSED, OVERWROTE, REFUSED, REFUSED, OVERWROTE),
}
USERS_NOTES = b"the user's own notes"
TEMPLATE = dict(QUICK, max_steps=2, save_steps=1)  # the finished run every run folder below is made from


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, tiny_model_dir):
    """A run trained 2 steps with a checkpoint after each, and its adapter exported beside it (``export``)."""
    from grpo_lite import export, load_model

    folder = tmp_path_factory.mktemp("template") / "run"
    model, tokenizer = load_model(str(tiny_model_dir), lora_rank=8)
    result = train(model, tokenizer, prepare_dataset(ROWS, system_prompt=None), "numeric_correctness_reward",
                   output_dir=folder, **TEMPLATE)
    export(result.model, tokenizer, folder.parent / "export")
    return folder


def _make(state: str, folder: Path, template: Path) -> list[str]:
    """Make ``folder`` look as ``state`` says, from a finished run and its export; returns the user's own files in it."""
    if state == "no folder":
        return []
    if state == "empty":
        folder.mkdir()
        return []
    if state == "only hidden entries":  # what Jupyter leaves in a folder it showed a file of
        (folder / ".ipynb_checkpoints").mkdir(parents=True)
        (folder / ".ipynb_checkpoints" / "notes-checkpoint.txt").write_bytes(USERS_NOTES)
        return [".ipynb_checkpoints/notes-checkpoint.txt"]
    if state == "exported adapter":
        shutil.copytree(template.parent / "export", folder)
        return []
    if state == "the user's own files":  # tokenizer.json and README.md: names a run writes too
        mine = {"notes.txt": USERS_NOTES, "README.md": b"# my experiments", "tokenizer.json": b"{}", "data/rows.jsonl": b"{}\n"}
        for name, content in mine.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(content)
        return list(mine)
    shutil.copytree(template, folder)
    (folder / "notes.txt").write_bytes(USERS_NOTES)
    if state == "partial run with a checkpoint":  # killed after checkpoint-1: no final weights
        shutil.rmtree(folder / "checkpoint-2")
        for name in ("adapter_model.safetensors", "adapter_config.json", "train_summary.json"):
            (folder / name).unlink()
    elif state == "run with no checkpoint":  # killed before its first save, or trained with save_strategy="no"
        for checkpoint in folder.glob("checkpoint-*"):
            shutil.rmtree(checkpoint)
    elif state == "edited run.yaml":
        (folder / "run.yaml").write_text("# next: learning_rate 1e-5\n" + (folder / "run.yaml").read_text())
    elif state == "run.yaml of another model":
        record = read_run(folder)
        dataclasses.replace(record, settings=dataclasses.replace(record.settings, model="someone/other-model")).write(
            folder / "run.yaml")
    return ["notes.txt"]


def _call(call: str, folder: Path, tiny_model_dir: Path, request) -> tuple[str, str]:
    """Make ``call`` into ``folder``: ("refused", its message) or ("ran", what it said)."""
    capsys = request.getfixturevalue("capsys")
    capsys.readouterr()
    if call.startswith("train"):
        model, tokenizer = request.getfixturevalue("tiny_model")
        asked = {"train resume=True": {"resume": True}, "train overwrite=True": {"overwrite": True}}.get(call, {})
        try:
            train(model, tokenizer, prepare_dataset(ROWS, system_prompt=None), "numeric_correctness_reward",
                  output_dir=folder, **TEMPLATE, **asked)
        except UserError as refused:
            return "refused", str(refused)
        return "ran", capsys.readouterr().err
    Path("rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    recipe = {"model": str(tiny_model_dir), "load": {"lora_rank": 8}, "dataset": {"path": "rows.jsonl", "system_prompt": None},
              "rewards": ["numeric_correctness_reward"], "preset": TEMPLATE["preset"],
              "overrides": {key: value for key, value in TEMPLATE.items() if key not in ("preset", "dashboard")}}
    Path("recipe.yaml").write_text(yaml.safe_dump(recipe))
    code = main(["train", "recipe.yaml", "--output-dir", str(folder), *call.split()[1:]])
    said = capsys.readouterr()
    assert code in (0, 2) and "Traceback" not in said.err, said.err[-2000:]
    return ("ran", said.out + said.err) if code == 0 else ("refused", said.err)


CASES = [pytest.param(state, call, id=f"{state}-{call}", marks=[pytest.mark.slow] if OUTCOMES[state][i] != REFUSED else [])
         for state in OUTCOMES for i, call in enumerate(CALLS)]


@pytest.mark.parametrize(("state", "call"), CASES)
def test_a_call_replaces_no_file_it_did_not_write(state, call, finished_run, tiny_model_dir, tmp_path, monkeypatch, request):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "run"
    users = _make(state, folder, finished_run)
    before = _files(folder) if folder.exists() else {}
    ran, said = _call(call, folder, tiny_model_dir, request)
    after = _files(folder) if folder.exists() else {}
    expected = OUTCOMES[state][CALLS.index(call)]
    if expected == REFUSED:
        assert ran == "refused", said[-3000:]
        assert after == before  # byte for byte, and nothing added
        assert str(folder) in said
        assert "--output-dir" in said or "another output_dir" in said  # and how to go on
        why = ("cannot resume the run" if state == "run.yaml of another model" and "resume" in call else
               "was changed after the run wrote it" if state == "edited run.yaml" and "resume" in call else
               "no complete checkpoint to resume from" if state == "run with no checkpoint" and "resume" in call else
               "holds files no grpo-lite run wrote" if state in ("exported adapter", "the user's own files") else
               "holds another run")
        assert why in said
        return
    assert ran == "ran", said[-3000:]
    assert record_origin(folder / "run.yaml") == "run" and read_run(folder).settings.model == str(tiny_model_dir)
    assert all(after.get(name) == before[name] for name in users)  # the user's own files, byte for byte
    assert [record["step"] for record in read_metrics(folder)] == [1, 2]  # each step once, a resumed one's too
    if expected == STARTED:
        assert set(before) == set(users) and str(folder) in said  # "saved the adapter and tokenizer to", "run files in"
        if "resume" in call:
            assert f"no complete checkpoint in {folder} to resume from; training from the start" in said
    elif expected == OVERWROTE:
        assert "overwrite=True: removed the earlier run's" in said
    else:
        resumed = "checkpoint-2" if state == "finished run" else "checkpoint-1"
        assert f"resuming from {resumed}" in said
        if state == "finished run":  # nothing left to train: nothing changes
            assert "trained its max_steps=2 already (checkpoint-2): nothing is trained or written" in said
            assert after == before
        assert {name: content for name, content in after.items() if name.startswith(resumed + "/")} == \
            {name: content for name, content in before.items() if name.startswith(resumed + "/")}

