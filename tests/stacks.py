"""Marks for tests of one end of the supported range (grpo_lite/machine/stack.py), each skip with its reason."""

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
