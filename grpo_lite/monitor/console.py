"""One line per step in a terminal: reward, reward_std, KL, completion length."""

from __future__ import annotations

from transformers import TrainerCallback


def _fmt(value) -> str:
    return "  n/a " if value is None else f"{value:7.4f}"


class StepPrinter(TrainerCallback):
    """Print each logged step; used where no live dashboard is drawn."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "reward" not in logs:
            return
        total = state.max_steps if state.max_steps and state.max_steps > 0 else "?"
        print(
            f"step {state.global_step:>4}/{total}  reward {_fmt(logs.get('reward'))}  "
            f"reward_std {_fmt(logs.get('reward_std'))}  kl {_fmt(logs.get('kl'))}  "
            f"len {logs.get('completions/mean_length', 0):5.1f}",
            flush=True,
        )
