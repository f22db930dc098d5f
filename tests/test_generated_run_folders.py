"""Run folders made from the states a user's folder is found in, not from a list of cases someone thought of.

Each input is a folder in one state (none yet, empty, holding only the user's files, a finished run, a run cut short:
its last checkpoint half saved or gone, its weights or summary gone, its last metrics line lost; a run whose run.yaml
was edited: another learning rate, more steps, another reward, text that is no YAML, nothing), with the user's own files
beside it or not, and a call of ``train()`` into it: fresh, ``resume=True``, ``overwrite=True`` or both, with the run's
settings, more steps, another learning rate, another reward or other rows. It runs up to TRL's trainer; a few train for
real.

Each input ends one of two ways: refused with a UserError naming the folder or what differs, every file in the folder as
it was; or accepted, and then: a fresh run only into a folder holding no run, ``overwrite`` replacing only what a run
writes, ``resume`` continuing the run in the folder from its newest whole checkpoint (a run that is finished, or whose
folder holds no run, is refused or goes to a fresh folder). Whatever happens, no file of the user's is lost or changed,
and a resumed run loses nothing the folder held: every file is still there (a checkpoint passed over as
``partial-checkpoint-N``), its metrics lines first in metrics.jsonl. Anything else fails the test, unless its input is of
a class in KNOWN_DEFECTS.
"""

import functools
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from generated import TRAININGS, Reached, bounded, judge, refused_naming, up_to_the_trainer
from hypothesis import given
from hypothesis import strategies as st

from grpo_lite import load_model, prepare_dataset, train
from grpo_lite.errors import UserError
from grpo_lite.run.files import METRICS_FILE, RECORD_STAMP, RUN_FILE, record_change
from grpo_lite.training import trainer

ROWS = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)]
OTHER_ROWS = [{"question": f"What is {i} times {i}?", "answer": str(i * i)} for i in range(4)]
RUN = dict(preset="cpu-smoke", max_steps=2, save_steps=1, num_generations=4, per_device_train_batch_size=4,
           max_completion_length=6, dashboard=False)
USER_FILES = {"notes.txt": "mine", "data/rows.csv": "question,answer\n2+2,4\n", "run.yaml.bak": "my copy"}
STATES = ("no folder", "an empty folder", "the user's files only", "a finished run", "a run cut short",
          "a run with its run.yaml edited")
CUTS = ("its last checkpoint half saved", "its last checkpoint gone", "its weights gone", "its summary gone",
        "its last metrics line lost")
EDITS = ("another learning rate", "more steps", "another reward", "text that is no YAML", "nothing", "one key changed",
         "cut short", "its stamp line removed", "gone")
CHANGES = ("the run's settings", "more steps", "another learning rate", "another reward", "other rows")
# Classes of input that fail today, each with what it does now; an entry goes when its fix is in.
KNOWN_DEFECTS: dict[str, str] = {}


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return load_model(str(tiny_model_dir), lora_rank=8)


@pytest.fixture(scope="module")
def finished(tiny, tmp_path_factory):
    """A run of two steps, a checkpoint after each: the folder every state is made from."""
    model, tokenizer = tiny
    folder = tmp_path_factory.mktemp("finished") / "run"
    train(model, tokenizer, prepare_dataset(ROWS, system_prompt=None), ["numeric_correctness_reward"], output_dir=folder,
          **RUN)
    assert {"checkpoint-1", "checkpoint-2", RUN_FILE, METRICS_FILE} <= {p.name for p in folder.iterdir()}
    return folder


def make_folder(finished: Path, at: Path, state: str, detail: str | None, user_files: list[str], pick: int = 0) -> None:
    """The folder ``at`` in ``state`` (with the cut or edit ``detail``; ``pick`` chooses the line an edit changes or cuts
    at), the user's files among it."""
    if state in STATES[3:]:
        shutil.copytree(finished, at)
    elif state != "no folder":
        at.mkdir()
    if state == "a run cut short":
        if detail == "its last checkpoint half saved":
            (at / "checkpoint-2" / "trainer_state.json").unlink()
        elif detail == "its last checkpoint gone":
            shutil.rmtree(at / "checkpoint-2")
        elif detail == "its weights gone":
            for weights in at.glob("adapter_*"):
                weights.unlink()
        elif detail == "its summary gone":
            (at / "train_summary.json").unlink(missing_ok=True)
        else:
            lines = (at / METRICS_FILE).read_text().splitlines(keepends=True)
            (at / METRICS_FILE).write_text("".join(lines[:-1]))
    elif state == "a run with its run.yaml edited":
        record = at / RUN_FILE
        text = record.read_text()
        document = yaml.safe_load(text)
        if detail == "another learning rate":
            document["grpo_config"]["learning_rate"] *= 10
        elif detail == "more steps":
            document["overrides"]["max_steps"] = document["grpo_config"]["max_steps"] = 3
        elif detail == "another reward":
            document["rewards"] = ["exact_match_reward"]
        if detail == "one key changed":  # by hand, the line's value and nothing else
            lines = text.splitlines(keepends=True)
            at_line = [i for i, line in enumerate(lines) if re.fullmatch(r" *[a-z_]+: [^\s\[{].*\n", line)][pick % 50]
            indent, key = re.match(r"( *)([a-z_]+):", lines[at_line]).groups()
            lines[at_line] = f"{indent}{key}: edited by hand\n"
            record.write_text("".join(lines))
        elif detail == "cut short":
            record.write_text(text[:1 + pick % (len(text) - len(text.splitlines()[-1]) - 2)])
        elif detail == "its stamp line removed":
            record.write_text(text.rpartition(RECORD_STAMP)[0])
        elif detail == "gone":
            record.unlink()
        else:
            record.write_text("model: [unclosed\n" if detail == "text that is no YAML" else
                              "" if detail == "nothing" else yaml.safe_dump(document, sort_keys=False))
    for name in user_files:
        (at / name).parent.mkdir(parents=True, exist_ok=True)
        (at / name).write_text(USER_FILES[name])


def files_in(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()} \
        if folder.is_dir() else {}


@st.composite
def situations(draw):
    """A folder's state (with its cut or edit), the user's files in it, and the call of train() into it."""
    state = draw(st.sampled_from(STATES))
    detail = draw(st.sampled_from(CUTS if state == "a run cut short" else EDITS)) if state in STATES[4:] else None
    user_files = [] if state == "no folder" else draw(st.lists(st.sampled_from(sorted(USER_FILES)), unique=True, max_size=2))
    resume, overwrite = draw(st.booleans()), draw(st.integers(0, 3)) == 0
    return state, detail, user_files, resume, overwrite, draw(st.sampled_from(CHANGES)), draw(st.integers(0, 10**6))


def expected_end(state: str, detail: str | None, user_files: tuple, resume: bool, overwrite: bool,
                 change: str, pick: int = 0) -> tuple[str, set[str]]:
    """How a call must end: ``accepted`` (for a finished run resumed: with nothing trained and the folder as it was),
    ``refused``, or ``refused or elsewhere`` (refused, or run in a fresh folder of its own); and the KNOWN_DEFECTS
    classes the call belongs to. A folder holding no run but files of the user's is refused whatever is asked: nothing
    there is replaced. A run whose run.yaml was edited since (cut short or removed too) is replaced by overwrite, as its
    refusal offers, and refused otherwise. The user's files beside a run are the run's folder's: kept."""
    if (user_files and state in STATES[:3]) or (state == STATES[5] and not (overwrite and not resume)) or (resume and overwrite):
        return "refused", set()
    if state in STATES[:3]:  # a new folder: resume=True starts the run there (a notebook cell run again resumes it)
        return "accepted", set()
    if not resume:
        return ("accepted" if overwrite else "refused"), set()
    if detail == "another learning rate" or change in ("another learning rate", "another reward"):
        return "refused", set()  # what the checkpoint was trained with differs from what is asked
    return "accepted", set()


def _keywords(change: str) -> tuple[list, dict]:
    """The rewards and keywords of a call with ``change``."""
    rewards = ["exact_match_reward"] if change == "another reward" else ["numeric_correctness_reward"]
    keywords = dict(RUN, max_steps=3) if change == "more steps" else dict(RUN)
    if change == "another learning rate":
        keywords["learning_rate"] = 0.123
    return rewards, keywords


def folder_ends(tiny, finished, situation, real: bool) -> str:
    """``train()`` into the folder of ``situation``, up to the trainer (or, ``real``, training): how it ended, once the
    end and the folder are checked against what :func:`expected_end` allows."""
    state, detail, user_files, resume, overwrite, change, pick = situation
    expected, _ = expected_end(*situation)
    model, tokenizer = tiny
    rewards, keywords = _keywords(change)
    dataset = prepare_dataset(OTHER_ROWS if change == "other rows" else ROWS, system_prompt=None)
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work, "run")
        make_folder(finished, folder, state, detail, user_files, pick)
        edit = record_change(folder) if state == STATES[5] else ""
        before = files_in(folder)
        captured: dict = {}
        try:
            with up_to_the_trainer(captured) as patch:
                chosen = trainer.resume_checkpoint
                patch.setattr(trainer, "resume_checkpoint", lambda *a, **k: captured.setdefault("checkpoint", chosen(*a, **k)))
                if real:
                    patch.setattr(trainer, "grpo_trainer", _real_trainer(captured))
                train(model, tokenizer, dataset, rewards, output_dir=folder, resume=resume, overwrite=overwrite, **keywords)
        except Reached:
            pass
        except UserError as error:
            assert expected != "accepted", f"refused: {error}"
            assert files_in(folder) == before, f"refused ({error}) after changing the folder"
            if state == STATES[5] and resume and not overwrite:  # what the edit changed, by key, or that it cut or removed
                assert edit and edit in str(error), f"refused without saying what the edit changed ({edit!r}): {error}"
                assert _says_the_edit(detail, edit), f"{detail}: said as {edit!r}"
            return refused_naming(error, str(folder), "learning_rate", "reward", RUN_FILE, "resume=True and overwrite=True")
        assert expected != "refused", "accepted"
        after = files_in(folder)
        if "config" not in captured:  # a finished run resumed: nothing left to train
            assert resume and after == before, "a call that trained nothing changed the folder"
            return "accepted"
        for name in user_files:
            assert after.get(name) == USER_FILES[name].encode(), f"the user's {name} was lost or changed"
        if Path(captured["config"].output_dir) != folder:  # a fresh folder of its own: this one as it was
            assert after == before, "a run that went elsewhere changed the folder"
            return "accepted"
        assert expected == "accepted", f"ran in the folder, where it must be refused or run elsewhere ({sorted(before)})"
        if resume:
            _assert_resumed(before, after, captured.get("checkpoint"), real)
        return "accepted"


def _says_the_edit(detail: str, said: str) -> bool:
    """Whether ``said`` (:func:`~grpo_lite.run.files.record_change`) tells the edit ``detail`` made."""
    return {"another learning rate": "grpo_config.learning_rate: ", "more steps": "max_steps: 2 -> 3",
            "another reward": "rewards: ['numeric_correctness_reward'] -> ['exact_match_reward']",
            "text that is no YAML": "no longer reads as YAML", "nothing": "cut short after line 0 of",
            "one key changed": "-> 'edited by hand'", "cut short": "cut short after line",
            "its stamp line removed": "cut short after line", "gone": "it is gone"}[detail] in said


def _assert_resumed(before: dict, after: dict, checkpoint, real: bool) -> None:
    """A resumed run continues from the newest whole checkpoint and keeps its metrics lines first; up to the trainer,
    everything the folder held is still there (a checkpoint passed over renamed partial-...), as training's own
    rotation of checkpoints and its new weights have not begun."""
    newest = max((int(Path(n).parts[0].split("-")[1]) for n in before
                  if Path(n).parts[0].startswith("checkpoint-") and Path(n).name == "trainer_state.json"), default=None)
    got = int(checkpoint.name.split("-")[1]) if checkpoint is not None else None
    assert got == newest, f"resumed from checkpoint {got}, not the newest whole one {newest}"
    assert after.get(METRICS_FILE, b"").startswith(before.get(METRICS_FILE, b"")), "resuming lost metrics lines"
    for name, data in ({} if real else before).items():
        renamed = [kept for moved, kept in after.items() if moved.startswith("partial-") and moved.partition("/")[2] ==
                   name.partition("/")[2] and moved.partition("/")[0].endswith(name.partition("/")[0])]
        assert name == RUN_FILE or after.get(name) == data or data in renamed, f"resuming lost {name}"


def _real_trainer(captured: dict):
    """TRL's trainer, built and recorded: the run trains for real."""
    build = trainer.grpo_trainer

    def recording(model, tokenizer, dataset, rewards, config, callbacks, **options):
        captured.update(config=config)
        return build(model, tokenizer, dataset, rewards, config, callbacks, **options)

    return recording


@bounded()
@given(situation=situations())
def test_train_into_a_folder_in_any_state_keeps_what_it_holds_or_is_refused_naming_it(situation, tiny, finished,
                                                                                   generated_inputs):
    judge(generated_inputs, "run folders", functools.partial(folder_ends, tiny, finished, situation, False),
          expected_end(*situation)[1], KNOWN_DEFECTS)


@bounded(TRAININGS)
@given(situation=situations())
def test_a_real_run_into_a_folder_in_any_state_keeps_what_it_holds(situation, tiny, finished, generated_inputs):
    judge(generated_inputs, "run folders, trained", functools.partial(folder_ends, tiny, finished, situation, True),
          expected_end(*situation)[1], KNOWN_DEFECTS)
