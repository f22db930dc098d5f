"""Options only Unsloth's from_pretrained takes, passed to load_model where another backend loads: left out and said
where they change how Unsloth runs, refused (all at once, before the model loads) where they change what trains."""

import ast
import importlib.util
import inspect
from pathlib import Path

import pytest

from grpo_lite import load_model
from grpo_lite.model.unsloth_options import HOW_UNSLOTH_RUNS, WHAT_TRAINS
from grpo_lite.run.settings import ConfigError

# from_pretrained options transformers takes too: they go to the backend as given
TRANSFORMERS_OPTIONS = {"dtype", "token", "device_map", "trust_remote_code", "revision", "rope_scaling"}


def test_unsloths_gpt_oss_notebook_load_options_load_on_a_cpu_and_are_said(tiny_model_dir, capsys):
    # nb/gpt-oss-(20B)-GRPO.ipynb @ bdda2efc, cell 8: FastLanguageModel.from_pretrained(..., offload_embedding = True)
    model, _ = load_model(str(tiny_model_dir), max_seq_length=768, load_in_4bit=True, offload_embedding=True, lora_rank=4)
    said = capsys.readouterr().err
    assert "offload_embedding=True: Unsloth's from_pretrained option (it keeps the input embedding in CPU memory)" in said
    assert not hasattr(model.config, "offload_embedding")


def test_options_that_change_what_trains_are_refused_together_before_the_model_loads(tmp_path):
    missing_weights = tmp_path / "model"  # a folder with a config and no weights: loading it would fail differently
    missing_weights.mkdir()
    (missing_weights / "config.json").write_text('{"model_type": "qwen2"}')
    with pytest.raises(ConfigError) as refused:
        load_model(str(missing_weights), full_finetuning=True, load_in_8bit=True, offload_embedding=True)
    lines = str(refused.value).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("load_model: full_finetuning=True is an option of Unsloth's from_pretrained") and "lora_rank=None" in lines[0]
    assert lines[1].startswith("load_model: load_in_8bit=True") and "load_in_4bit=True" in lines[1]


def test_an_option_at_unsloths_default_changes_nothing_and_loads(tiny_model_dir, capsys):
    load_model(str(tiny_model_dir), load_in_4bit=False, load_in_16bit=True, full_finetuning=False, lora_rank=4)
    said = capsys.readouterr().err
    assert "full_finetuning=False: Unsloth's from_pretrained option, at its default" in said
    assert "load_in_16bit=True: Unsloth's from_pretrained option, at its default" in said


@pytest.mark.skipif(importlib.util.find_spec("unsloth") is None, reason="Unsloth is not installed")
def test_every_option_of_unsloths_from_pretrained_has_a_meaning_here():
    """Read from the installed Unsloth's source (unsloth/models/loader.py: FastLanguageModel.from_pretrained and
    FastModel.from_pretrained), without importing it: an option a new release adds fails here until it is placed."""
    loader = Path(importlib.util.find_spec("unsloth").submodule_search_locations[0]) / "models" / "loader.py"
    options = set()
    for node in ast.walk(ast.parse(loader.read_text())):
        if isinstance(node, ast.ClassDef) and node.name in ("FastLanguageModel", "FastModel"):
            for method in node.body:
                if isinstance(method, ast.FunctionDef) and method.name == "from_pretrained":
                    options |= {arg.arg for arg in method.args.args}
    assert {"offload_embedding", "full_finetuning", "target_parameters"} <= options
    own = set(inspect.signature(load_model).parameters)
    unplaced = options - own - TRANSFORMERS_OPTIONS - set(HOW_UNSLOTH_RUNS) - set(WHAT_TRAINS)
    assert not unplaced
