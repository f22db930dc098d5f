"""Watching a run: metrics, health rules, samples, and the dashboard's views and charts.

- ``metrics``, ``samples``: ``metrics.jsonl`` and ``samples.jsonl``, written as the run goes
- ``health``, ``invariants``: warnings with their fix, and GRPO invariants beside TRL's metrics
- ``dashboard``, ``views``, ``figure``, ``stop_button``: the live view (notebook, terminal, log) and its Stop button
- ``show``: the dashboard of a finished run, from its files
"""
