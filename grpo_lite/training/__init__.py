"""One GRPO run, and runs in a row, on TRL's GRPOTrainer.

- ``trainer``: ``train()``: rewards guarded, settings checked and recorded, callbacks assembled, TRL trains
- ``rollouts``: ``tools``, ``environment_factory`` and ``rollout_func`` checked against the stack and TRL's needs, for GRPOTrainer
- ``episode_preview``: ``preview`` with tools or an environment: groups of episodes played by TRL's tool loop, judged
- ``stages``: ``train_stages``, several runs in a row on the same LoRA weights
- ``warmup``: ``warmup_format``, a short SFT on formatted examples before GRPO, on the same LoRA adapter
- ``trl_compat``: the seam with TRL and Unsloth's generated trainer (CPU log-probs, a model Unsloth did not load)
"""
