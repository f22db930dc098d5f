"""What a run is: its settings, the one place they are checked, and the files it leaves behind.

- ``settings``: ``RunSettings``/``LoadSettings`` (a recipe YAML, ``--set``, ``train()``'s keywords and ``run.yaml``
  are all one of these) and their one validator
- ``presets``: the training presets and the one ``auto`` picks for this machine
- ``config``: settings -> a ``trl.GRPOConfig``, and back from ``run.yaml``
- ``record``: ``run.yaml``, what was asked for, what the run chose, the GRPOConfig it trained with
- ``files``: the name of every file in a run folder, JSON-lines and whole-file writes
- ``callbacks``, ``stopping``, ``resume``: the callback protocol, the one way a run ends early, and which
  checkpoint a resumed run continues from
"""
