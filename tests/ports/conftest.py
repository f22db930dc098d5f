"""Each port runs on both stacks: what a notebook or recipe meant must hold on the stack it was written for (the T4
notebook stack, for Unsloth's notebooks) and on the latest one. .ci/run's T4 run selects them by this marker."""

from pathlib import Path

import pytest

PORTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    for item in items:
        if PORTS in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.both_stacks)
