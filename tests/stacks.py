"""What tests of both ends of the supported range (grpo_lite/machine/stack.py) share: marks for a test of one end, each
skip with its reason, and the prompts TRL's trainer asks the model, read the same way on both."""

import contextlib

import pytest

from grpo_lite.machine import stack


def _release(name: str) -> str:
    package = stack.DIFFERENCES[name].package
    return f"{'TRL' if package == 'trl' else package} {stack.installed(package)}"


def removed_here(*fields: str):
    """For a test of carrying over ``fields`` that transformers or TRL removed: skipped where the installed release still
    has one, which grpo-lite passes on as written (tests/test_stack.py shows that)."""
    kept = [name for name in fields if stack.has_config_field(name)]
    reason = ", ".join(f"{name} ({_release(name)})" for name in kept)
    return pytest.mark.skipif(bool(kept), reason=f"still GRPOConfig fields here, passed on as written (tests/test_stack.py): {reason}")


def newer_only(name: str):
    """For a test of what the newer end does for the difference ``name``: skipped on a release before it."""
    return pytest.mark.skipif(not stack.newer(name), reason=f"{_release(name)}: {stack.DIFFERENCES[name].older}")


@contextlib.contextmanager
def prompts_trl_generates_from(model):
    """Record the prompt token ids TRL's GRPOTrainer hands ``model.generate`` while it trains: TRL renders and tokenizes
    the prompts itself (trl/trainer/grpo_trainer.py: _generate_and_score_completions before TRL 1.0, _tokenize_prompts
    and _generate_single_turn from it), and on both ends it calls generate on the model it was given with the
    left-padded ``input_ids`` and their ``attention_mask``. Yields the list the ids are added to, padding left out."""
    asked: list[list[int]] = []
    real = model.generate

    def recording(*args, **kwargs):
        for ids, mask in zip(kwargs["input_ids"], kwargs["attention_mask"]):
            asked.append(ids[mask.bool()].tolist())
        return real(*args, **kwargs)

    model.generate = recording
    try:
        yield asked
    finally:
        del model.generate
