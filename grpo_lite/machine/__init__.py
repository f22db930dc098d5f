"""What the machine offers a run, and whether a run fits it. The bottom layer: it imports no other.

- ``device``: the GPU's properties (read here and nowhere else), bf16 in hardware, Unsloth imported first
- ``engine``: which engine generates, vLLM or transformers, and why (the card, vLLM, TRL, transformers, Unsloth)
- ``notebook``: the notebook platform (Colab, Kaggle, local): ``check_runtime``, one GPU of Kaggle's two, ``run_dir``
- ``planner``: peak GPU memory of a run, and the nearest config that fits (``plan``)
- ``stack``: the installed transformers and TRL, and each way the two ends of the supported range differ (the one
  place that compares their versions)
"""
