"""Rows -> GRPO prompts. Imports only ``machine`` below it.

- ``prepare``: read the user's rows (list, CSV, JSONL, ``datasets.Dataset``), validate them, build chat prompts,
  drop prompts over ``max_prompt_tokens``; the built-in datasets
- ``arithmetic``: the demo's arithmetic word problems and its held-out set
"""
