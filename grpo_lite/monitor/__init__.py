"""Watching a run: the metrics record, health rules, sample capture and the renderers."""
