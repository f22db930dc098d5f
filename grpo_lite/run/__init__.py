"""What a run is: its settings, the one place they are checked, and the files it leaves behind.

- ``settings``: ``RunSettings``/``LoadSettings`` (a recipe YAML, ``--set``, ``train()``'s keywords and ``run.yaml``
  are all one of these) and their one validator
- ``porting``: what a user's GRPO code meant, carried over (renamed fields, vLLM's sampling parameters, Unsloth's
  batch rule), and which values a preset changed from TRL's defaults
- ``presets``: the training presets, the one ``auto`` picks for this machine, TRL's own defaults
- ``config``: settings -> a ``trl.GRPOConfig``, and back from ``run.yaml``
- ``record``: ``run.yaml``, what was asked for, what the run chose, the GRPOConfig it trained with
- ``files``: the name of every file in a run folder, JSON-lines and whole-file writes
- ``callbacks``, ``stopping``, ``resume``: the callback protocol, the one way a run ends early, and which
  checkpoint a resumed run continues from
"""
