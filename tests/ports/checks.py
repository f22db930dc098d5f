"""What every port checks: the original's GRPOConfig fields reach the run (at their value, or at a translation the run
announced), and every value the preset sets that differs from TRL's default is in the table train() prints first."""

import dataclasses
import re

from grpo_lite.machine import stack
from grpo_lite.run.record import read_run


def changes_table(err: str) -> dict[str, list[str]]:
    """The preset-changes table train() prints first: field -> [TRL default, used, why]."""
    lines = err.split("grpo-lite: preset ", 1)[1].splitlines()[1:]
    assert lines[0].split() == ["field", "TRL", "default", "used", "why"]
    rows = {}
    for line in lines[1:]:
        if not line.startswith("  "):
            break
        key, default, used, why = re.split(r"\s{2,}", line.strip(), maxsplit=3)
        rows[key] = [default, used, why]
    return rows


def _as_trl_reads(key, value, output_dir):
    """``value`` as GRPOConfig stores it (report_to="none" becomes [], an enum its value)."""
    from trl import GRPOConfig

    stored = getattr(GRPOConfig(output_dir=str(output_dir), use_cpu=True, bf16=False, **{key: value}), key)
    return getattr(stored, "value", stored)


def check_port(output_dir, err: str, original: dict, trained_args, batch_raised: bool = False) -> dict:
    """``original``: the GRPOConfig keywords as the port passed them. Returns the run record's grpo_config."""
    from trl import GRPOConfig

    run = read_run(output_dir)
    assert run.settings.overrides == original  # what the user wrote, unchanged
    config, translated = run.grpo_config, run.chosen.get("translated", {})
    said = [line for line in err.splitlines() if line.startswith("grpo-lite: ")]
    for key, value in original.items():
        if key in translated:  # carried over under its new name(s) (or dropped), said once; kept where the release has it
            assert key not in config, key
            assert len([line for line in said if line.startswith((f"grpo-lite: {key}=", f"grpo-lite: {key} -> "))]) == 1, key
            for new, mapped in (translated[key] or {}).items():
                assert new == "cut_prompts_to" or config[new] == mapped, key
        elif key == "per_device_train_batch_size" and batch_raised:  # Unsloth's batch rule, said once
            assert config[key] == original["num_generations"]
            assert len([line for line in said if line.startswith(f"grpo-lite: {key}={value} -> ")]) == 1
        else:
            assert config[key] == value or config[key] == _as_trl_reads(key, value, output_dir), (key, config.get(key), value)
    # every value differing from TRL's default that the user did not set is stated in the table
    plain = GRPOConfig(output_dir=str(output_dir), use_cpu=True, bf16=False)
    # a renamed field's deprecated alias mirrors the name the installed release reads: one setting (stack.RENAMED_FIELDS)
    differs = {f.name for f in dataclasses.fields(GRPOConfig)
               if f.init and stack.field_name(f.name) == f.name and getattr(trained_args, f.name) != getattr(plain, f.name)}
    user = {key for key, source in run.chosen["sources"].items() if source in ("user", "batch rule")}
    table = changes_table(err)
    # transformers 4 stamps logging_dir's default with the time it was made; TRL 1.16's trainer sets
    # ddp_find_unused_parameters itself for a vision-language model (trl/trainer/grpo_trainer.py)
    derived = {"generation_batch_size", "steps_per_generation", "logging_dir", "ddp_find_unused_parameters"}
    assert differs - derived - user <= set(table) | {"output_dir"} - user, (differs - derived - user - set(table), table)
    return config


def run_config_cell(cell: str, changes: dict[str, str], ns: dict) -> tuple[dict, str]:
    """Run a notebook's ``GRPOConfig(...)`` cell in ``ns`` with ``changes`` (each old text there, replaced by the new),
    and return its keywords as train() takes them, with the tests' one addition (``max_steps=2``, the run's length), and
    its ``output_dir``."""
    for old, new in changes.items():
        assert old in cell
        cell = cell.replace(old, new)
    exec(cell, ns)
    args = dict(ns["training_args"])
    args["max_steps"] = 2  # ADDED: the run's length
    return args, args.pop("output_dir")
