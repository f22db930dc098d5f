"""Bad input made from the settings' declared shapes, not from a list of cases someone thought of.

Every value is drawn around the shape a setting declares (``grpo_lite.shapes``): of its kind inside and outside its
range, one of its choices or a near miss, and of every other kind (text, numbers, NaN and infinity, lists, mappings,
null). It goes in as a user gives it: a run YAML and a ``--set`` flag through the command line's entry point (in this
process), ``train()``'s and ``load_model()``'s keywords, ``plan()``'s and ``prepare_dataset()``'s arguments. Each input
ends one of two ways:

- refused: a UserError (from the command line: exit 2) whose ``grpo-lite:`` lines name the setting, with no traceback,
  no run.yaml or metrics.jsonl written and every file already in the run folder kept;
- accepted: the value read as given (numbers written as text read as numbers, a data file's path as ``{path: ...}``,
  one reward as a list of one) and the run carried to the trainer, its GRPOConfig built and run.yaml written; the model
  is the session's tiny one and training itself is left out.

Nothing else: an exception of any other kind (a traceback) or a value read as something else (a silent change) fails
the test. The number of inputs and of each outcome is printed in the session summary (conftest.py, generated_inputs).

Which values Hypothesis draws depends on more than the seed: on the settings this stack's GRPOConfig has (the two ends
of the supported range differ by dozens of fields, so one draw picks different settings on each) and on the constants
of every module of this project imported so far (Hypothesis mixes them into its draws: the suite and this file alone
draw differently). So before the drawn values, :func:`test_every_setting_meets_every_kind_of_value` gives every
setting this stack declares one value of every kind, through one of its routes: what the draws may miss, it does not.
"""

import contextlib
import dataclasses
import functools
import io
import json
import math
import os
import tempfile
import typing
from pathlib import Path

import pytest
import yaml
from generated import Reached, SilentChange, bounded, judge, same, up_to_the_trainer
from hypothesis import given
from hypothesis import strategies as st

from grpo_lite import load_model, plan, prepare_dataset, train
from grpo_lite.data.prepare import DATA_KEYS
from grpo_lite.errors import UserError
from grpo_lite.launch import recipe
from grpo_lite.launch.cli import main
from grpo_lite.machine.planner import PLAN_ARGUMENTS
from grpo_lite.run.porting import port_overrides
from grpo_lite.run.settings import OPTION_RANGES, SECTION_FIXES, Heldout, LoadSettings, RunSettings, declared, grpo_config_shapes
from grpo_lite.shapes import AnyOf, Anything, Declared, Exactly, Flag, Kind, ListOf, Mapping, Number, Text, Whole

ROWS = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(8)]
# Classes of input that fail today, each with what it does now; an entry goes when its fix is in.
KNOWN_DEFECTS = {
    "a load setting among load.from_pretrained's keywords": "the run YAML's load: {from_pretrained: {lora_rank: 0}} passes "
                                                           "its check, and load_model(**load, **from_pretrained) raises "
                                                           "TypeError: got multiple values for keyword argument "
                                                           "(grpo_lite/launch/recipe.py; found by these tests)",
}
BASE = {"model": "tiny", "dataset": {"path": "rows.jsonl"}, "rewards": ["numeric_correctness_reward"], "preset": "cpu-smoke",
        "overrides": {"max_steps": 1, "num_generations": 4, "per_device_train_batch_size": 4, "max_completion_length": 8}}
QUICK = dict(preset="cpu-smoke", max_steps=1, num_generations=4, per_device_train_batch_size=4, max_completion_length=8,
             dashboard=False)
KEPT = ".notes.txt"  # a hidden file of the user's in the run folder (one of any other name is refused): never lost


# --- values drawn from a shape ---------------------------------------------------------------------------------------

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
OTHER_KINDS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.integers(-(10**9), 10**9),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-300]),
    TEXT, st.sampled_from(["", " ", "1e-5", "nan", "inf", "true", "null", "auto", "5", "-1", "0.5"]),
    st.lists(st.integers(0, 3), max_size=2), st.lists(TEXT, max_size=2),
    st.dictionaries(st.sampled_from(["a", "path", "n", "lora_rank", "max_steps"]), st.integers(-1, 3), max_size=2),
)


def _near(bound, wide: int):
    return st.integers(-wide, wide) if bound is None else st.integers(int(bound) - 3, int(bound) + 3)


def around(shape):
    """Values of the shape's own kind, inside and just outside what it allows."""
    if isinstance(shape, Declared):
        return around(shape.shape)
    if isinstance(shape, Flag):
        return st.booleans()
    if isinstance(shape, Whole):
        return st.one_of(_near(shape.low, 50), _near(shape.high, 10**6), st.integers(-(10**6), 10**6))
    if isinstance(shape, Number):
        edges = [b for b in (shape.low, shape.high) if b is not None]
        return st.one_of(st.sampled_from(edges or [0.0]), st.floats(-1e6, 1e6), st.floats(-2, 2), _near(shape.low, 50),
                         st.floats(allow_nan=True, allow_infinity=True))
    if isinstance(shape, Text):
        if shape.among:
            return st.one_of(st.sampled_from(shape.among), st.sampled_from([c[:-1] for c in shape.among]),
                             st.sampled_from([c.upper() for c in shape.among]))
        return st.one_of(TEXT, st.sampled_from(["", "  "]))
    if isinstance(shape, Exactly):
        return st.just(shape.value)
    if isinstance(shape, AnyOf):
        return st.one_of([around(option) for option in shape.options])
    if isinstance(shape, ListOf):
        return st.lists(around(shape.item), max_size=3)
    if isinstance(shape, Mapping):
        if shape.keys is None:
            return st.dictionaries(TEXT, OTHER_KINDS, max_size=2)
        return st.fixed_dictionaries({}, optional={key: around(value) for key, value in shape.keys.items()})
    assert isinstance(shape, (Kind, Anything)), shape
    return OTHER_KINDS


def values(shape):
    """Any value a user might give where ``shape`` belongs: of its kind, or of another."""
    return st.one_of(around(shape), OTHER_KINDS)


# --- the settings, by the names a run YAML and --set give them --------------------------------------------------------

# A section, drawn as the mapping a run YAML holds: its known keys with values of any shape, or another kind.
SECTIONS = {"load": Mapping(declared(LoadSettings)), "dataset": Mapping(DATA_KEYS),
            "heldout": Mapping({**DATA_KEYS, "n": declared(Heldout)["n"], "samples": declared(Heldout)["samples"]}),
            "overrides": Mapping(grpo_config_shapes())}
SETTINGS = {
    **grpo_config_shapes(),  # GRPOConfig's fields, under the run setting of one name where there is one (output_dir)
    **{key: OPTION_RANGES[key] for key in OPTION_RANGES},
    **{key: shape for key, shape in declared(RunSettings).items() if key not in SECTION_FIXES},
    **SECTIONS,
    **{f"load.{key}": shape for key, shape in declared(LoadSettings).items()},
    **{f"dataset.{key}": shape for key, shape in DATA_KEYS.items()},
    **{f"heldout.{key}": shape for key, shape in {**DATA_KEYS, **declared(Heldout)}.items() if key != "data"},
}


def _inside(value) -> bool:
    """A run folder a generated output_dir may name: one inside the test's own working folder."""
    return not isinstance(value, str) or not (Path(value).is_absolute() or ".." in Path(value).parts or value.startswith("~"))


def _setting_and_value(names, shape_of=lambda key: SETTINGS[key]):
    return st.sampled_from(sorted(names)).flatmap(
        lambda key: st.tuples(st.just(key), values(shape_of(key)).filter(_inside if key == "output_dir" else lambda _: True)))


def as_read(key: str, value, text: bool):
    """The value as the documented readings give it back: numbers written as text (YAML, --set), a data file's
    path as its section, one reward as a list of one."""
    if text:
        value = SETTINGS[key].from_text(value)
    if key in ("dataset", "heldout") and isinstance(value, str):
        return {"path": value}
    if key == "rewards" and isinstance(value, str):
        return [value]
    return value


def read_back(key: str, got: RunSettings):
    section, dot, name = key.partition(".")
    if dot and section == "load":
        return getattr(got.load, name)
    if dot and section == "dataset":
        return got.dataset[name]
    if dot and section == "heldout":
        return getattr(got.heldout, name) if name in ("n", "samples") else got.heldout.data[name]
    if key == "load":
        return {k: getattr(got.load, k) for k in got.load.to_dict()} if got.load is not None else None
    if key == "heldout":
        return {k: v for k, v in got.heldout.to_dict().items() if k not in ("n", "samples")} if got.heldout else None
    if key in declared(RunSettings):
        return getattr(got, key)
    return got.overrides[key]


def expected_back(key: str, value, text: bool):
    read = as_read(key, value, text)
    if key == "load" and isinstance(read, dict):
        return {**LoadSettings().to_dict(), **LoadSettings.read(read)[0].to_dict()}
    if key == "heldout" and isinstance(read, dict):
        return {k: v for k, v in read.items() if k not in ("n", "samples")}
    return read


def names_of(key: str, value) -> list[str]:
    """What a refusal's line says to name the setting ``key``: its own name or its section's, or for a whole section
    one of the settings in it."""
    section, dot, name = key.partition(".")
    inside = [str(k) for k in value] if key in SECTIONS and isinstance(value, dict) else []
    return [name, section] if dot else [key, "reward" if key == "rewards" else key, *inside]


# --- running an input ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    """The session's tiny model, loaded once, and the rows train() is given, prepared once."""
    model, tokenizer = load_model(str(tiny_model_dir), lora_rank=8)
    return model, tokenizer, prepare_dataset(ROWS, system_prompt=None)


@contextlib.contextmanager
def run_folder():
    """A working folder holding the rows file and a run folder with a file of the user's in it; afterwards, that file
    must still be there."""
    before = Path.cwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        try:
            Path("rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
            Path("out").mkdir()
            Path("out", KEPT).write_text("mine")
            yield Path(folder)
            assert Path("out", KEPT).read_text() == "mine", "a file of the user's in the run folder was lost"
        finally:
            os.chdir(before)


def classes_of(key: str, value) -> set[str]:
    """The KNOWN_DEFECTS classes the setting ``key`` given ``value`` belongs to."""
    given = value if key == "load.from_pretrained" else value.get("from_pretrained") if key == "load" and isinstance(
        value, dict) else None
    clash = isinstance(given, dict) and set(given) & set(declared(LoadSettings))
    return {"a load setting among load.from_pretrained's keywords"} if clash else set()


def _reached(*args, **kwargs):
    raise Reached


@contextlib.contextmanager
def loading_the_tiny_model(tiny, captured: dict):
    """Everything real up to TRL's trainer (:func:`generated.up_to_the_trainer`), the model the session's tiny one
    whatever loads it, and the settings a run YAML was read into kept in ``captured``."""
    model, tokenizer, _ = tiny
    with up_to_the_trainer(captured) as patch:
        patch.setattr("grpo_lite.model.tiny.build_tiny_model", lambda *a, **k: "tiny")
        patch.setattr("grpo_lite.model.load.load_model", lambda *a, **k: (model, tokenizer))
        run = recipe.run_recipe

        def recording(settings, **keywords):
            captured["settings"] = settings
            return run(settings, **keywords)

        patch.setattr(recipe, "run_recipe", recording)
        yield


def _refused_by_name(lines: list[str], key: str, value) -> bool:
    return any(name in line for line in lines for name in names_of(key, value))


def _no_run_written(root: Path) -> bool:
    return not any(root.rglob("run.yaml")) and not any(root.rglob("metrics.jsonl"))


def _accepted(key, value, text, got):
    wanted = expected_back(key, value, text)
    if key == "overrides":
        value = value or {}  # overrides: null is none
        back = {k: got.overrides.get(k) for k in value}
        wanted = {k: SETTINGS[k].from_text(v) if k in SETTINGS and text else v for k, v in value.items()}
        if not same(back, wanted):
            raise SilentChange(f"{key}={value!r} read as {back!r}")
        return
    back = read_back(key, got)
    if not same(back, wanted):
        raise SilentChange(f"{key}={value!r} read as {back!r}, not {wanted!r}")


def _place(document: dict, key: str, value) -> None:
    section, dot, name = key.partition(".")
    if dot and section in ("dataset", "heldout"):  # a new source replaces the old one, as --set does
        document[section] = {name: value} if name in ("path", "builtin") else {"path": "rows.jsonl", name: value}
    elif dot:
        document[section] = {**(document.get(section) or {}), name: value}
    elif key in declared(RunSettings):
        document[key] = value
    else:
        document["overrides"][key] = value


def _flag(value) -> str | None:
    """``value`` as one ``--set`` word spells it, or None where one word cannot."""
    flag = yaml.safe_dump(value, default_flow_style=True, width=10**9).removesuffix("\n...\n").removesuffix("\n")
    return None if "\n" in flag or not same(yaml.safe_load(flag), value) and value == value else flag


def through_the_command_line(route: str, key: str, value, tiny) -> str:
    """``grpo-lite train`` with ``key`` set to ``value`` in a run YAML (``yaml``; ``twice``: given twice there) or by
    ``--set``: how it ended, ``refused`` or ``accepted``, or an AssertionError saying what went wrong."""
    flag = _flag(value)
    if flag is None:
        route = "yaml"  # a value one --set word cannot spell
    if route == "twice" and key not in declared(RunSettings):
        route = "yaml"  # a key given twice: at the top level of a run YAML
    captured: dict = {}
    with run_folder() as root, loading_the_tiny_model(tiny, captured):
        document = {**BASE, "overrides": dict(BASE["overrides"])}
        argv = ["train", "recipe.yaml", *([] if key == "output_dir" else ["--output-dir", "out"])]
        if route in ("yaml", "twice"):
            _place(document, key, value)
        else:
            argv += ["--set", f"{key}={flag}"]
        text = yaml.safe_dump(document, allow_unicode=True)
        Path("recipe.yaml").write_text(text + f"{key}: {flag}\n" if route == "twice" else text)
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                rc = main(argv)
        except Reached:
            assert route != "twice", f"{key} given twice was read"
            _accepted(key, value, True, captured["settings"])
            return "accepted"
        err = said.getvalue()
        lines = [line for line in err.splitlines() if line.startswith("grpo-lite: ")]
        assert rc == 2 and "Traceback" not in err, err
        assert _refused_by_name(lines, key, value), f"{key}={value!r} refused without naming it:\n{err}"
        assert route != "twice" or any(f"{key!r} is given twice" in line for line in lines), err
        assert _no_run_written(root), f"{key}={value!r} refused after writing a run"
        return "refused"


TRAIN_KEYWORDS = {"preset", "reward_weights", "reward_timeout", "tool_timeout", "rollout_timeout", "overwrite", "output_dir",
                  "rewards", "heldout_n", "heldout_samples"}
API_SETTINGS = sorted(TRAIN_KEYWORDS | (set(grpo_config_shapes()) - {"output_dir"}))
ROUTE_SETTINGS = sorted(SETTINGS)


def _api_shape(key):
    return {"heldout_n": declared(Heldout)["n"], "heldout_samples": declared(Heldout)["samples"]}.get(key) or SETTINGS[key]


# GRPOConfig fields TRL or transformers read into another form in __post_init__ (an enum, a list, a derived batch, no
# pinned memory on a CPU); transformers 4 also turns average_tokens_across_devices off on one process, takes local_rank
# from the process it runs in and moves tpu_metrics_debug into debug (transformers/training_args.py)
TRL_REREADS = {"accelerator_config", "average_tokens_across_devices", "dataloader_pin_memory", "debug", "eval_strategy",
               "fsdp", "generation_batch_size", "gradient_checkpointing_kwargs", "hub_strategy",
               "include_num_input_tokens_seen", "local_rank", "logging_dir", "logging_strategy", "lr_scheduler_type", "optim",
               "report_to", "save_strategy", "steps_per_generation", "torch_empty_cache_steps", "tpu_metrics_debug",
               "warmup_steps"}


def through_train(key: str, value, tiny) -> str:
    """``train()`` with the keyword ``key`` set to ``value``: how it ended, or an AssertionError saying what went wrong."""
    model, tokenizer, dataset = tiny
    captured: dict = {}
    with run_folder() as root, up_to_the_trainer(captured):
        keywords = {**QUICK, "output_dir": "out", key: value}
        rewards = keywords.pop("rewards", ["numeric_correctness_reward"])
        if key.startswith("heldout_"):
            keywords["heldout"] = dataset
        try:
            train(model, tokenizer, dataset, rewards, **keywords)
        except Reached:
            config = captured["config"]
            if key in grpo_config_shapes() and key not in QUICK and isinstance(value, (bool, int, str)):
                ported = port_overrides("cpu-smoke", {key: value})  # a carried-over value, said in one line
                wanted = ported.overrides.get(key, value)
                assert wanted == value or any(key in note for note in ported.notes)
                if not (getattr(config, key) == wanted or key in TRL_REREADS):
                    raise SilentChange(f"{key}={value!r} became {getattr(config, key)!r}") from None
            return "accepted"
        except UserError as error:
            lines = str(error).splitlines()
            assert _refused_by_name(lines, key.replace("heldout_", "heldout."), value) or _refused_by_name(lines, key, value), \
                f"{key}={value!r} refused without naming it: {error}"
            assert _no_run_written(root), f"{key}={value!r} refused after writing a run"
            return "refused"
        raise AssertionError("train() returned without training")


# --- every setting with every kind of value, the same on each stack ---------------------------------------------------

# One value of each kind a user might give anywhere: null, a flag, a whole number at and above the usual lower bounds, a
# fraction, no number, text (a word, blank, a number written as text), a list, a mapping and one whose key names a setting.
KINDS = {"null": None, "true": True, "0": 0, "7": 7, "0.5": 0.5, "NaN": math.nan, "text": "fast", "blank text": "",
         "number as text": "1e-5", "list": [1], "mapping": {"a": 1}, "mapping of a setting": {"lora_rank": 1}}
READ_FROM_TEXT = {"number as text", "NaN"}  # kinds a run YAML and --set read in their own way (YAML's .nan, text to number)
EVERY_SETTING = sorted(set(ROUTE_SETTINGS) | set(API_SETTINGS))


def _route(key: str, kind: str, turn: int) -> str:
    """How the setting ``key`` gets the value of ``kind``: train()'s keyword where it has one (the cheapest way to the
    trainer) unless the kind is read from text; else a run YAML and --set by turns."""
    if key in API_SETTINGS and (kind not in READ_FROM_TEXT or key not in ROUTE_SETTINGS):
        return "train"
    return ("yaml", "set")[turn % 2]


def _through(route: str, key: str, value, tiny) -> str:
    return through_train(key, value, tiny) if route == "train" else through_the_command_line(route, key, value, tiny)


@pytest.mark.parametrize("kind", KINDS)
def test_every_setting_meets_every_kind_of_value(kind, tiny, generated_inputs):
    """Each setting this stack declares gets the value of ``kind`` (train()'s keyword, a run YAML or --set); every input
    that ends otherwise than refused by name or read as given is listed."""
    value = KINDS[kind]
    failed = []
    for number, key in enumerate(EVERY_SETTING):
        route = _route(key, kind, number + list(KINDS).index(kind))
        try:
            judge(generated_inputs, "settings", functools.partial(_through, route, key, value, tiny), classes_of(key, value),
                  KNOWN_DEFECTS)
        except Exception as failure:
            failed.append(f"{key}={value!r} ({route}): {type(failure).__name__}: {str(failure).splitlines()[0][:300]}")
    assert not failed, f"{len(failed)} of {len(EVERY_SETTING)} settings given {kind}:\n" + "\n".join(failed)


def _holds_anything(shape) -> bool:
    if isinstance(shape, (Anything, Declared)):
        return isinstance(shape, Anything) or _holds_anything(shape.shape)
    if isinstance(shape, AnyOf):
        return any(_holds_anything(option) for option in shape.options)
    return isinstance(shape, ListOf) and _holds_anything(shape.item)


def test_every_grpo_config_field_has_the_shape_of_its_type_with_its_names_resolved():
    """A type named by text (transformers 4.56: ``Optional["ParallelismConfig"]``) is the class it names: only a field
    typed Any allows any value."""
    from trl import GRPOConfig

    types_of = typing.get_type_hints(GRPOConfig)
    loose = [key for key, shape in grpo_config_shapes().items() if _holds_anything(shape) and types_of[key] is not typing.Any]
    assert not loose, f"GRPOConfig fields whose shape lets any value through: {loose}"


# --- drawn values -----------------------------------------------------------------------------------------------------

@bounded()
@given(route=st.sampled_from(["yaml", "set", "twice"]), setting=_setting_and_value(ROUTE_SETTINGS))
def test_a_run_yaml_or_set_value_of_any_shape_is_refused_by_name_or_read_as_given(route, setting, tiny, generated_inputs):
    key, value = setting
    judge(generated_inputs, "settings", lambda: through_the_command_line(route, key, value, tiny), classes_of(key, value),
          KNOWN_DEFECTS)


@bounded()
@given(setting=_setting_and_value(API_SETTINGS, _api_shape))
def test_a_train_keyword_of_any_shape_is_refused_by_name_or_trains_as_given(setting, tiny, generated_inputs):
    key, value = setting
    judge(generated_inputs, "settings", lambda: through_train(key, value, tiny))


LOAD_ARGUMENTS = sorted(set(declared(LoadSettings)) - {"from_pretrained"})


@bounded()
@given(function=st.sampled_from(["load_model", "plan", "prepare_dataset"]), data=st.data())
def test_an_argument_of_any_shape_is_refused_by_name_or_taken_as_given(function, data, tiny_model_dir, generated_inputs):
    declared_here = {"load_model": {k: declared(LoadSettings)[k] for k in LOAD_ARGUMENTS}, "plan": PLAN_ARGUMENTS,
                     "prepare_dataset": {k: DATA_KEYS[k] for k in ("question", "answer", "system_prompt",
                                                                     "max_prompt_tokens", "on_long_prompt")}}[function]
    key = data.draw(st.sampled_from(sorted(declared_here)))
    value = data.draw(values(declared_here[key]))

    def check():
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("grpo_lite.model.load.choose_backend", _reached)  # every check passed: the model would load
            try:
                if function == "load_model":
                    load_model(str(tiny_model_dir), **{key: value})
                elif function == "plan":
                    result = plan("Qwen2.5-1.5B", **{key: value})
                    if key in {f.name for f in dataclasses.fields(result.run)} and not same(getattr(result.run, key), value):
                        raise SilentChange(f"plan({key}={value!r}) planned {getattr(result.run, key)!r}")
                else:
                    rows = prepare_dataset(ROWS, **{key: value})
                    if key == "system_prompt" and value and not same(rows[0]["prompt"][0]["content"], value):
                        raise SilentChange(f"system_prompt={value!r} became {rows[0]['prompt'][0]['content']!r}")
            except Reached:
                return "accepted"
            except UserError as error:
                assert any(key in line for line in str(error).splitlines()), f"{function}({key}={value!r}): {error}"
                return "refused"
            return "accepted"

    judge(generated_inputs, "arguments", check)
