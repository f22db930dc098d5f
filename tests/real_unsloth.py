"""Run code in a subprocess where Unsloth 2026.10.9 has replaced TRL's GRPOTrainer and GRPOConfig, as on a GPU.

Unsloth generates ``UnslothGRPOTrainer`` / ``UnslothGRPOConfig`` from TRL's source when it is imported on a GPU
machine (unsloth/models/rl.py, ``PatchFastRL``). On a CPU machine it picks its CPU backend and leaves TRL alone;
with ``UNSLOTH_ALLOW_CPU=1`` it imports its GPU code paths, and ``PatchFastRL`` returns early on CPU, so
:data:`PATCH` calls the patching it would have run. The patching is process-wide and writes
``unsloth_compiled_cache/`` into the working directory: hence a subprocess with its own working directory.

``gpu=(major, minor, memory_gb)`` makes torch report such a card after Unsloth is imported, so configs with
fp16/bf16 can be built. Only configs: nothing can run on a GPU that is not there (Unsloth's
``FastLanguageModel.from_pretrained`` cannot run here at all).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# The same steps as PatchFastRL's on a GPU (unsloth/models/rl.py): the trainers, then vLLM generation.
# Unsloth's torch.compile is off (UNSLOTH_COMPILE_DISABLE, read when unsloth_zoo is imported): it "only drops
# torch.compile; rewritten forwards still run eagerly" (unsloth_zoo/compiler.py), and the generated trainer is the
# same. On a GPU those regions compile to Triton; here they would compile to CPU C++ kernels no user trains with,
# and one of them (the causal mask, unsloth_zoo/temporary_patches/misc.py) failed once in CI in its memory pool.
PATCH = """
import os
os.environ["UNSLOTH_ALLOW_CPU"] = "1"
os.environ["UNSLOTH_COMPILE_DISABLE"] = "1"
import unsloth
from unsloth.models import rl as _unsloth_rl
_unsloth_rl.patch_trl_disable_gradient_checkpointing()
_unsloth_rl._patch_trl_rl_trainers("grpo_trainer")
_unsloth_rl.patch_trl_vllm_generation()
"""

# A card of compute capability major.minor with memory_gb, as torch and transformers ask about it.
FAKE_GPU = """
import types, torch, transformers.training_args
_major, _minor, _memory_gb = {gpu!r}
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
torch.cuda.get_device_capability = lambda device=None: (_major, _minor)
torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(
    name="fake", major=_major, minor=_minor, multi_processor_count=40,
    total_memory=int(_memory_gb * 2**30))
torch.cuda.set_device = lambda device: None
transformers.training_args.is_torch_bf16_gpu_available = lambda: _major >= 8
"""

# TRL's own classes, as on a machine without Unsloth: grpo_lite imports Unsloth first on a (faked) GPU machine.
NO_UNSLOTH = """
import sys
sys.modules["unsloth"] = None
"""

RESULT_MARK = "@@result@@ "

requires_unsloth = pytest.mark.skipif(
    __import__("importlib").util.find_spec("unsloth") is None, reason="Unsloth is not installed (.ci/run installs it)")


def run_script(code: str, cwd: Path, *, unsloth: bool = True, gpu: tuple[int, int, float] | None = None,
               prelude: str | None = None, timeout: int = 600):
    """Run ``code`` in a fresh interpreter in ``cwd``, under Unsloth's patching or (``unsloth=False``) with TRL's own classes.

    ``code`` calls ``result(value)`` to hand back JSON; returns that value. A failure raises with the output.
    ``prelude``, when given, runs first instead of those (on a real GPU, Unsloth patches TRL itself).
    """
    if prelude is None:
        prelude = (PATCH if unsloth else NO_UNSLOTH) + (FAKE_GPU.format(gpu=gpu) if gpu else "")
    helper = f"def result(value):\n    import json\n    print({RESULT_MARK!r} + json.dumps(value), flush=True)\n"
    source = prelude + helper + textwrap.dedent(code)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", source], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if done.returncode or not lines:
        # the exception's own line first: a long traceback's tail is what a CI log keeps least of
        raised = [line for line in done.stderr.splitlines() if line.strip() and not line[0].isspace()][-3:]
        raise AssertionError(f"exit {done.returncode}: {' | '.join(raised)}\n--- stdout\n{done.stdout[-6000:]}\n"
                             f"--- stderr\n{done.stderr[-8000:]}")
    return json.loads(lines[-1][len(RESULT_MARK):])
