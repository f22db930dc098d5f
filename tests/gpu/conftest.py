"""The GPU tests: grpo-lite's Unsloth and bitsandbytes paths run for real on a CUDA GPU.

Every test under tests/gpu is marked ``gpu`` and, where torch sees no CUDA GPU (CI, the dev machines), skipped
with the reason shown. On a GPU machine, from the checkout's root (tests/gpu/run.sh does it with the offline kit):

    python -m pytest -m gpu -rs tests/gpu
    OUT=/some/folder bash tests/gpu/run.sh all     # every part under its time limit, within 8 minutes

The model is random, with Qwen2.5-0.5B's shape and vocabulary (no model hub is needed): speed, memory and
every code path are the real model's; only the text is gibberish, which the reward below still tells apart.
"""

import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)  # before ``-m gpu`` selects by marker
def pytest_collection_modifyitems(config, items):
    import torch

    skip = None if torch.cuda.is_available() else pytest.mark.skip(
        reason="needs a CUDA GPU (torch.cuda.is_available() is False here): run tests/gpu/run.sh on a GPU machine")
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.gpu)
            if skip:
                item.add_marker(skip)


def pytest_runtest_logreport(report):
    """Each failure's traceback is appended to $GRPO_LITE_GPU_FAILURES as it happens (tests/gpu/run.sh sets it): a part
    stopped at its time limit can end before pytest's summary, which is where the tracebacks would be."""
    failures = os.environ.get("GRPO_LITE_GPU_FAILURES")
    if failures and report.failed:
        with open(failures, "a") as out:
            out.write(f"== {report.nodeid} ({report.when}, {report.duration:.1f} s)\n{report.longreprtext}\n\n")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    """A random-weight model with Qwen2.5-0.5B's shape and 151,936-token vocabulary, in bf16 as real checkpoints are;
    the one in $GRPO_LITE_GPU_MODEL where that is set (tests/gpu/run.sh builds it once for all its parts)."""
    from grpo_lite import build_tiny_model

    if os.environ.get("GRPO_LITE_GPU_MODEL"):
        return Path(os.environ["GRPO_LITE_GPU_MODEL"])
    return build_tiny_model(tmp_path_factory.mktemp("models") / "qwen2.5-0.5b", like="qwen2.5-0.5b", dtype="bfloat16")


@pytest.fixture(scope="session")
def dataset():
    from grpo_lite import load_builtin, prepare_dataset

    return prepare_dataset(load_builtin("arithmetic")[:64])
