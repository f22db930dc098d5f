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


class _NoHubKernelNotice(logging.Filter):
    """bitsandbytes 0.50, imported on a CPU with AVX512-BF16 (PEFT imports it with itself), fetches a faster 4-bit
    kernel from the Hub and logs a warning where it cannot: offline, or without the ``kernels`` package, which
    transformers 5.25 requires (bitsandbytes/backends/cpu/ops.py). Its own kernel runs instead, so the warning, printed
    in every offline run, asks nothing of the user."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(HUB_KERNEL_NOTICE)


HUB_KERNEL_NOTICE = "Failed to load CPU gemm_4bit_forward from kernels-community"
logging.getLogger("bitsandbytes.backends.cpu.ops").addFilter(_NoHubKernelNotice())

if not logger.handlers:
    _handler = _CurrentStderr()
    _handler.setFormatter(_Formatter())
    _handler.addFilter(_MainProcessOnly())
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # one copy of each message, even when the application configures the root logger
