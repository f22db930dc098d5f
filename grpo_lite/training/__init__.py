"""One GRPO run, and runs in a row, on TRL's GRPOTrainer.

- ``trainer``: ``train()``: rewards guarded, settings checked and recorded, callbacks assembled, TRL trains
- ``stages``: ``train_stages``, several runs in a row on the same LoRA weights
- ``trl_compat``: the seam with TRL and Unsloth's generated trainer (CPU log-probs, a model Unsloth did not load)
"""
