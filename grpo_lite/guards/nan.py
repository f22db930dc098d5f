"""A run whose loss or gradients stop being numbers is stopped before its weights are saved.

One NaN gradient, applied by the optimizer, turns every LoRA weight into NaN; TRL would keep stepping, the
next checkpoint would hold NaN weights (and, with ``save_total_limit``, the Trainer would delete the good
ones to make room), and ``train`` would save them over the adapter. :class:`NaNStop` checks

  - the gradient norm before each optimizer step: a NaN or infinite one is dropped, so the weights stay
    as the last step left them;
  - each logged step's ``loss`` and ``grad_norm``;

and asks the :class:`~grpo_lite.run.stopping.StopSwitch` to stop without saving: the last checkpoint stays
the run's result and ``train`` raises :class:`NaNDetected` with the fix. Under fp16 the loss scaler skips
steps whose gradients overflow and lowers its scale (that is how fp16 training works), so there only a
non-finite loss stops the run. Reward scores are checked where they are made (``reward_guard``): an
infinite score is a reward failure; NaN, like None, means "not scored" to TRL.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from rewards.diagnoses import DIAGNOSIS

from ..errors import RunFault
from ..run.callbacks import RunCallback
from ..run.resume import latest_checkpoint
from ..run.stopping import StopSwitch


class NaNDetected(RunFault, RuntimeError):
    """The loss or the gradients became NaN or infinite; training stopped and kept the last good checkpoint."""


class NaNStop(RunCallback):
    """Stops the run, without saving, at the first NaN or infinite loss or gradient norm (list it before
    the switch). ``train`` calls :meth:`attach` once the trainer exists."""

    def __init__(self, switch: StopSwitch):
        self.switch = switch
        self.scaled = False  # fp16: the loss scaler owns overflowing gradients

    def attach(self, trainer) -> NaNStop:
        self.scaled = getattr(trainer.accelerator, "scaler", None) is not None
        return self

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if self.scaled or model is None:
            return control
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        if not grads:
            return control
        norm = torch.nn.utils.get_total_norm(grads)
        if not torch.isfinite(norm):
            for parameter in model.parameters():
                parameter.grad = None  # the optimizer skips weights without a gradient: this update is dropped
            self._stop(args, state.global_step + 1, f"the gradient norm is {norm.item()} (this update was dropped)")
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        keys = ("loss",) if self.scaled else ("loss", "grad_norm")
        bad = [f"{key} is {logs[key]}" for key in keys if isinstance((logs or {}).get(key), float) and not math.isfinite(logs[key])]
        if bad:
            self._stop(args, state.global_step, " and ".join(bad))
        return control

    def _stop(self, args, step: int, what: str) -> None:
        checkpoint = latest_checkpoint(Path(args.output_dir))
        kept = (f"The last good checkpoint, {checkpoint.name}, is kept: train(..., resume=True) continues from it with "
                "the same settings (a one-off NaN may not come back); a lower learning_rate is a new run (another "
                "output_dir), since resuming refuses changed settings."
                if checkpoint else "No checkpoint was saved before it: start again with the fix.")
        error = NaNDetected(f"training stopped at step {step}: {what}. Nothing from this step on was saved. "
                            f"Fix: {DIAGNOSIS['nan'].fix}. {kept}")
        self.switch.request(f"NaN at step {step}: {what}", save=False, error=error)
