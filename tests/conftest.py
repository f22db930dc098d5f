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


@pytest.fixture(scope="session")
def tool_caller(tmp_path_factory):
    """A tiny model taught to call the number game's tool (tests/games.py), built once per test session: about a minute."""
    from games import build_tool_calling_model

    return build_tool_calling_model(tmp_path_factory.mktemp("tool-caller"))


FAULT_TABLE = pytest.StashKey[list]()
GENERATED = pytest.StashKey["GeneratedInputs"]()  # how the inputs the tests/test_generated_*.py modules made ended
FAULT_TABLE_HEADER = ("| fault | injected as | the run ended with | survived | data lost |", "|---|---|---|---|---|")


@pytest.fixture
def fault_table(pytestconfig):
    """Rows of the table of injected faults (tests/test_faults.py), printed in the summary."""
    return pytestconfig.stash.setdefault(FAULT_TABLE, [])


class GeneratedInputs:
    """How the generated inputs ended, counted by kind of input (settings, dataset values, reward returns, ...), and the
    known defects they met: the classes of input each module lists as failing until the fix that owns them is in."""

    OUTCOMES = ("generated", "refused", "accepted", "tracebacks", "silent changes", "failed checks", "known defects")

    def __init__(self):
        self.kinds: dict[str, dict[str, int]] = {}
        self.defects: dict[str, int] = {}  # a known defect's class -> how many inputs of it failed

    def count(self, kind: str, outcome: str) -> None:
        counts = self.kinds.setdefault(kind, dict.fromkeys(self.OUTCOMES, 0))
        counts[outcome] += 1

    def met(self, defects) -> None:
        for defect in defects:
            self.defects[defect] = self.defects.get(defect, 0) + 1

    def lines(self) -> list[str]:
        lines = [f"  {kind}: " + ", ".join(f"{n} {outcome}" for outcome, n in counts.items() if n or outcome in self.OUTCOMES[:5])
                 for kind, counts in self.kinds.items()]
        return lines + [f"  known defect met {n} times: {defect}" for defect, n in sorted(self.defects.items())]


@pytest.fixture(scope="session")
def generated_inputs(pytestconfig) -> GeneratedInputs:
    """How the inputs the generated-input tests made ended, counted for the summary."""
    return pytestconfig.stash.setdefault(GENERATED, GeneratedInputs())


def pytest_terminal_summary(terminalreporter, config):
    """Say which sandbox isolation the code-execution tests ran under on this machine, how the generated inputs ended,
    and print the table of injected faults when their tests ran (shown with -q too; benchmarks/faults_table.py
    publishes it)."""
    from rewards.sandbox import SandboxUnavailable, isolation

    try:
        terminalreporter.write_line(f"sandbox isolation: {isolation()}")
    except SandboxUnavailable as unavailable:  # a machine without bubblewrap (the GPU machine) still reports its tests
        terminalreporter.write_line(f"sandbox isolation: none here ({unavailable})")
    generated = config.stash.get(GENERATED, None)
    if generated is not None and generated.kinds:
        terminalreporter.write_line("generated input (tests/test_generated_*.py), by kind:")
        for line in generated.lines():
            terminalreporter.write_line(line)
    rows = config.stash.get(FAULT_TABLE, [])
    if rows:
        terminalreporter.write_line("injected faults (tests/test_faults.py):")
        for line in (*FAULT_TABLE_HEADER, *rows):
            terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def mode(request):
    """A code-sandbox mode chosen by name as a user would (GRPO_LITE_SANDBOX), once per module, for tests parametrized
    with ``indirect=True`` over "bubblewrap" and "rlimits": detecting it runs a program."""
    import rewards.sandbox as sandbox

    if request.param == "rlimits" and os.geteuid() != 0:
        pytest.skip("the rlimits fallback isolates by dropping to another uid, which needs root")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(sandbox.MODE_VARIABLE, request.param)
        sandbox.isolation.cache_clear()
        yield sandbox.isolation().name
    sandbox.isolation.cache_clear()
