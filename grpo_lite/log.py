"""The ``grpo_lite`` logger: what the toolkit says while it works, from the main process only.

In a multi-process launch (``accelerate launch``, ``torchrun``) every rank runs the same code; only rank 0
speaks, so a message appears once. Messages go to the current ``sys.stderr`` (a notebook's, a test's) as
``grpo-lite: ...``. Silence them with ``logging.getLogger("grpo_lite").setLevel(logging.WARNING)``.
"""

from __future__ import annotations

import logging
import os
import sys

logger = logging.getLogger("grpo_lite")


def is_main_process() -> bool:
    """True outside multi-process launches and on rank 0 inside them (accelerate and torchrun set RANK)."""
    return int(os.environ.get("RANK", "0")) == 0


class _MainProcessOnly(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return is_main_process()


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (Jupyter and pytest replace it after import)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):
        pass


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        level = "" if record.levelno < logging.WARNING else f" {record.levelname.lower()}"
        return f"grpo-lite{level}: {record.getMessage()}"


if not logger.handlers:
    _handler = _CurrentStderr()
    _handler.setFormatter(_Formatter())
    _handler.addFilter(_MainProcessOnly())
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # one copy of each message, even when the application configures the root logger
