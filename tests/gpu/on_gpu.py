"""What the GPU tests share: a reward that varies on a random model's text, a short run, and a T4's device facts."""

from __future__ import annotations

from pathlib import Path

from real_unsloth import run_script

HERE = Path(__file__).parent

# Ten steps of the auto preset, made short: 8 completions of 128 tokens a step. The learning rate is raised so that
# ten steps move LoRA weights by more than 16-bit rounding (the preset's 5e-6 would leave kl at 0.0 in bf16).
SHORT_RUN = dict(max_steps=10, num_generations=8, per_device_train_batch_size=8, max_completion_length=128,
                 learning_rate=5e-4, save_steps=5)


def characters_reward(completions, **kwargs):
    """Characters per completion / 1000: a random model's completions differ in it (its vocabulary's words have
    2 to 4 letters), so each group's rewards vary and the advantages are not all zero."""
    return [len(completion[0]["content"]) / 1000 for completion in completions]


# A Colab T4 as the libraries that choose a dtype see it: compute capability 7.5. Unsloth decides bf16 once, as it is
# imported (unsloth/models/_utils.py: SUPPORTS_BFLOAT16 = capability[0] >= 8, read through
# unsloth/device_type.py cuda_current_capability, so the T4's fp16 model), and grpo_lite at train time
# (grpo_lite/machine/device.py supports_bf16: the t4-16gb preset, fp16). torch.compile's code generator asks the same
# function which GPU to build its Triton kernels for (torch/_dynamo/device_interface.py, get_compute_capability):
# it is told the real card's, since kernels built for sm_75 do not load on the card this runs on. Unsloth replaces
# the function with a cache of the first answer (_cache_device_capability), so the answer by caller is put back
# after Unsloth is imported.
T4_PRELUDE = """
import sys, torch
_real_capability = torch.cuda.get_device_capability
torch.cuda.get_device_capability = lambda device=None: (7, 5)
import grpo_lite  # imports Unsloth: it decides bf16 now
def _capability_as_a_t4_shows_it(device=None):
    caller = sys._getframe(1).f_globals.get("__name__", "")
    if caller.startswith(("torch._", "triton")):
        return _real_capability(device)
    return (7, 5)
torch.cuda.get_device_capability = _capability_as_a_t4_shows_it
"""


def run_in_fresh_interpreter(code: str, model_dir: Path, cwd: Path, *, prelude: str = "") -> object:
    """``code`` in a fresh interpreter (its own CUDA memory, its own Unsloth import) with this folder and tests/
    importable and ``model_dir`` set; returns what it passes to ``result``."""
    setup = f"import sys\nsys.path[:0] = [{str(HERE)!r}, {str(HERE.parent)!r}]\nmodel_dir = {str(model_dir)!r}\n"
    return run_script(setup + code, cwd, prelude=prelude, timeout=900)
