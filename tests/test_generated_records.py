"""Records made from what users make and return, not from a list of cases someone thought of: run.yaml's names of the
user's functions, and samples.jsonl's tool results.

Names: each input is a reward, tool or environment of one shape (a function, a lambda, a class, a callable object, a
``functools.partial`` of a built-in reward, a function or a class a helper module made, as
``grpo_lite.gymnasium_environment`` makes one), named as a built-in reward is or not, bound under its own name or
another, and living in one home: a module on the Python path, a ``.py`` file a run YAML names by path, the notebook or
script (``__main__``), or nowhere (made inside a call). run.yaml names it (``grpo_lite.run.record.reward_reference`` for a
reward, ``function_reference`` for the rest), and the name is read back as a run YAML is read (``resolve_rewards``,
``import_reference``). It ends read back as the very object recorded (which every one with a home must be), or refused
with a UserError naming it; never read back as something else (a built-in of the same name, the helper's own).

Tool results: each input is what a tool returns (text, numbers, NaN, None, dicts, lists and tuples nested, numpy
values, sets and objects JSON cannot hold, PIL images, content parts of text and images), made into the message the
model is shown as TRL 1.15 makes it, logged by the trainer and written to samples.jsonl. It ends in samples.jsonl as
the model was shown it: text as text, a list item by item (JSON's values as they are, an image as the name of its
thumbnail in the run folder, anything else as the text Python shows it by), never emptied or dropped.
"""

import functools
import itertools
import sys
import tempfile
from collections import deque
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from generated import bounded, judge, refused_naming, same
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from grpo_lite.errors import UserError
from grpo_lite.run.record import function_reference, reward_reference
from rewards import resolve_rewards
from rewards.registry import import_reference

HOMES = ("a module on the path", "a file named by path", "the notebook", "made in a call")
SHAPES = {"reward": ("function", "lambda", "callable object", "partial of a built-in", "function a helper made"),
          "environment": ("function", "class", "class a helper made", "function a helper made")}
HELPER = '''
def make_function(score):
    def made(completions=(), **kwargs):
        return [score] * len(completions)
    return made


def make_class(name):
    return type(name, (), {"__call__": lambda self, completions=(), **kwargs: [0.0] * len(completions)})
'''
_made = itertools.count()


def source(shape: str, name: str, bound: str, helper: str) -> str:
    """A module's text that binds ``bound`` to a thing of ``shape`` named ``name``."""
    made = {
        "function": f"def {name}(completions=(), **kwargs):\n    return [0.0] * len(completions)\n",
        "lambda": f"{name} = lambda completions=(), **kwargs: [0.0] * len(completions)\n",
        "class": f"class {name}:\n    def __call__(self, completions=(), **kwargs):\n        return [0.0] * len(completions)\n",
        "callable object": f"class Judge:\n    def __call__(self, completions=(), **kwargs):\n        return [0.0] * len(completions)\n"
                           f"{name} = Judge()\n",
        "partial of a built-in": f"import functools\nfrom rewards import numeric_correctness_reward\n"
                                 f"{name} = functools.partial(numeric_correctness_reward)\n",
        "function a helper made": f"from {helper} import make_function\n{name} = make_function(1.0)\n",
        "class a helper made": f"from {helper} import make_class\n{name} = make_class({name!r})\n",
    }[shape]
    return made + (f"{bound} = {name}\ndel {name}\n" if bound != name else "")


def made(home: str, text: str, bound: str, folder: Path, patch: pytest.MonkeyPatch):
    """The object ``text`` binds to ``bound``, made in ``home``."""
    number = next(_made)
    if home == "a module on the path":
        Path(folder, f"user_module_{number}.py").write_text(text)
        return getattr(__import__(f"user_module_{number}"), bound)
    if home == "a file named by path":
        path = Path(folder, f"games_{number}.py")
        path.write_text(text)
        return import_reference(f"{path}:{bound}")
    namespace = {"__name__": "__main__" if home == "the notebook" else f"call_{number}"}
    exec(compile(text, f"<cell {number}>", "exec"), namespace)  # a notebook cell; or code whose module no one holds
    if home == "the notebook":
        patch.setattr(sys.modules["__main__"], bound, namespace[bound], raising=False)
    return namespace[bound]


def recorded_end(kind: str, shape: str, home: str, name: str, other_binding: bool) -> str:
    """Record the thing and read its name back: the very object, or refused naming it."""
    bound = "picked" if other_binding else name
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        helper = f"helpers_{next(_made)}"
        Path(folder, f"{helper}.py").write_text(HELPER)
        patch.syspath_prepend(folder)
        thing = made(home, source(shape, name, bound, helper), bound, Path(folder), patch)
        reference = reward_reference(thing) if kind == "reward" else function_reference(thing)
        try:
            back = resolve_rewards(reference)[0][0] if kind == "reward" else import_reference(reference, what=kind)
        except UserError as error:
            assert home == "made in a call", f"{reference!r} of a thing that lives in {home} does not read back: {error}"
            return refused_naming(error, reference)
    assert back is thing, f"{reference!r} reads back as {back!r}, not as the {shape} it names"
    return "accepted"


@st.composite
def user_things(draw):
    kind = draw(st.sampled_from(sorted(SHAPES)))
    name = draw(st.sampled_from(["numeric_correctness_reward", "exact_match_reward", "my_reward"] if kind == "reward"
                                else ["FrozenLake", "guess", "numeric_correctness_reward"]))
    return kind, draw(st.sampled_from(SHAPES[kind])), draw(st.sampled_from(HOMES)), name, draw(st.booleans())


@bounded()
@given(thing=user_things())
def test_a_user_function_is_recorded_by_a_name_that_reads_back_as_itself_or_as_nothing(thing, generated_inputs):
    judge(generated_inputs, "recorded functions", functools.partial(recorded_end, *thing))


# --- samples.jsonl: a tool's result as the model was shown it ---------------------------------------------------------

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
IMAGES = st.builds(lambda colour, size: Image.new("RGB", size, colour), st.tuples(*[st.integers(0, 255)] * 3),
                   st.tuples(st.integers(1, 300), st.integers(1, 300)))
UNJSONABLE = st.one_of(st.integers(-3, 3).map(np.int64), st.frozensets(st.integers(0, 3), max_size=2),
                       st.builds(lambda: Fraction(1, 3)), st.dictionaries(st.tuples(st.integers(0, 2)), st.integers(0, 2),
                                                                           min_size=1, max_size=2))
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(), TEXT, UNJSONABLE, IMAGES)
VALUES = st.recursive(LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                                                      st.dictionaries(TEXT, inner, max_size=3)), max_leaves=6)
PARTS = st.one_of(st.builds(lambda text: {"type": "text", "text": text}, TEXT),
                  st.builds(lambda image: {"type": "image", "image": image}, IMAGES))
RETURNS = st.one_of(VALUES, st.lists(st.one_of(PARTS, VALUES), max_size=4))


def shown(result):
    """The tool message's content TRL 1.15 shows the model for a tool's ``result`` (trl/trainer/grpo_trainer.py,
    ``_tool_call_loop``: ``content = result if isinstance(result, list) else str(result)``)."""
    return result if isinstance(result, list) else str(result)


def as_kept(value, folder: Path, kept):
    """Whether samples.jsonl's ``kept`` is ``value`` as shown: JSON's values as they are (NaN is NaN), an image as the
    name of a thumbnail of it in ``folder``, anything else as the text Python shows it by."""
    from grpo_lite.monitor.samples import thumbnail_png

    if isinstance(value, Image.Image):
        return isinstance(kept, str) and Path(folder, kept).read_bytes() == thumbnail_png(value)
    if isinstance(value, (list, tuple)):
        return isinstance(kept, list) and len(kept) == len(value) and all(map(as_kept, value, [folder] * len(kept), kept))
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return isinstance(kept, dict) and kept.keys() == value.keys() and all(as_kept(value[k], folder, kept[k]) for k in value)
    if value is None or isinstance(value, (str, bool, int, float)):
        return same(value, kept)
    return kept == repr(value)


def tool_result_end(returned: list) -> str:
    """Each of ``returned`` shown to the model by one tool call of an episode, logged as GRPOTrainer logs a batch and
    written to samples.jsonl; every result there as the model was shown it."""
    from grpo_lite.monitor.samples import SampleLog, read_samples
    from grpo_lite.monitor.views import episode_lines

    call = {"type": "function", "function": {"name": "look", "arguments": {}}}
    completion = [message for result in returned for message in (
        {"role": "assistant", "content": "", "tool_calls": [call]}, {"role": "tool", "name": "look", "content": shown(result)})]
    trainer = SimpleNamespace(_logs={"prompt": deque([[{"role": "user", "content": "Look."}]]), "completion": deque([completion]),
                                     "rewards": {"seen": deque([1.0])}, "advantages": deque([0.0])})
    with tempfile.TemporaryDirectory() as folder:
        log = SampleLog(folder, trainer=trainer)
        log.on_log(None, SimpleNamespace(is_world_process_zero=True, global_step=1), None, logs={"reward": 1.0})
        turns = [turn for turn in read_samples(folder)[0]["episode"] if turn["turn"] == "tool"]
        assert len(turns) == len(returned), f"{len(turns)} tool turns recorded for {len(returned)} calls"
        for result, turn in zip(returned, turns):
            assert as_kept(shown(result), Path(folder), turn["result"]), f"shown {shown(result)!r}, kept {turn['result']!r}"
        assert len(episode_lines(log.recent[0])) == 2 * len(returned)  # drawn: each call and its result
    return "accepted"


@bounded()
@given(returned=st.lists(RETURNS, min_size=1, max_size=3))
def test_a_tool_result_of_any_kind_is_recorded_as_the_model_was_shown_it(returned, generated_inputs):
    judge(generated_inputs, "tool results", functools.partial(tool_result_end, returned))
