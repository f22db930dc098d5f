"""Rows -> GRPO prompts. Imports only ``machine`` below it.

- ``prompts``: the one renderer of chat prompts (the run's ``chat_template_kwargs``; a system prompt kept, folded or
  refused, never dropped), which every path that asks the model something goes through
- ``prepare``: read the user's rows (list, CSV, JSONL, ``datasets.Dataset``), validate them, build chat prompts,
  drop prompts over ``max_prompt_tokens``; the built-in datasets
- ``arithmetic``: the demo's arithmetic word problems and its held-out set
- ``pictures``: the vision demo's drawn pictures with questions, and its held-out scenes
"""
