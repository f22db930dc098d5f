"""Judging completions: before training (preview), around it (held-out evaluation) and after it (rescore).

- ``scoring``: ``evaluate``/``compare``, accuracy, format rate and pass@k on held-out rows
- ``heldout``: the callback that scores the held-out rows before the first step and after the last
- ``group_preview``, ``preview_browser``: what the rewards would teach on the model's own groups, and its notebook view
- ``played``: held-out episodes played with the run's tools, each call run and its result shown, as TRL plays a rollout
- ``episodes``: what a batch of episodes shows that replies cannot (every one at the turn limit, a tool always failing)
- ``rescore``: what other rewards would have taught, on the completions a run generated
"""
