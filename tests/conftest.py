import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The tests' models are tiny: threads only wait on each other, and on a busy 2-core machine a step took 16x longer
# with two than with one. torch reads it when first imported (after this file); subprocesses (CLI, notebooks,
# multi-process runs) inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random Qwen2 model + tokenizer on disk, built once per test session."""
    from grpo_lite.model.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture
def tiny_model(tiny_model_dir):
    """A fresh (model, tokenizer) pair with LoRA, loaded through grpo_lite.load_model."""
    from grpo_lite import load_model

    return load_model(str(tiny_model_dir), lora_rank=8)


FAULT_TABLE = pytest.StashKey[list]()
GENERATED = pytest.StashKey[dict]()  # how the inputs tests/test_generated_input.py made from the declared shapes ended
FAULT_TABLE_HEADER = ("| fault | injected as | the run ended with | survived | data lost |", "|---|---|---|---|---|")


@pytest.fixture
def fault_table(pytestconfig):
    """Rows of the table of injected faults (tests/test_faults.py), printed in the summary."""
    return pytestconfig.stash.setdefault(FAULT_TABLE, [])


@pytest.fixture(scope="session")
def generated_inputs(pytestconfig):
    """How the inputs tests/test_generated_input.py made ended, counted for the summary."""
    return pytestconfig.stash.setdefault(GENERATED, dict.fromkeys(("generated", "refused", "accepted", "tracebacks",
                                                                     "silent changes"), 0))


def pytest_terminal_summary(terminalreporter, config):
    """Say which sandbox isolation the code-execution tests ran under on this machine, how the generated inputs ended,
    and print the table of injected faults when their tests ran (shown with -q too; benchmarks/faults_table.py
    publishes it)."""
    from rewards.sandbox import isolation

    terminalreporter.write_line(f"sandbox isolation: {isolation()}")
    generated = config.stash.get(GENERATED, None)
    if generated:
        terminalreporter.write_line("generated input (tests/test_generated_input.py): " + ", ".join(
            f"{count} {outcome}" for outcome, count in generated.items()))
    rows = config.stash.get(FAULT_TABLE, [])
    if rows:
        terminalreporter.write_line("injected faults (tests/test_faults.py):")
        for line in (*FAULT_TABLE_HEADER, *rows):
            terminalreporter.write_line(line)
