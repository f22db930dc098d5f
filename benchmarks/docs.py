"""Writing measured results into docs/benchmarks.md, one section per benchmark, replaced on each run."""

from __future__ import annotations

import os
import platform
from datetime import date
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
TITLE = "# Benchmarks\n\nMeasured by the scripts in `benchmarks/`; each section names its command, machine and date.\n"


def machine() -> str:
    """One line naming the machine, the date and the versions that matter."""
    import torch
    import transformers
    import trl

    cpu = platform.processor() or platform.machine()
    return (
        f"{os.cpu_count()} CPU cores ({cpu}), {date.today()}, Python {platform.python_version()}, "
        f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}"
    )


def replace_section(heading: str, text: str, doc: Path = DOC) -> None:
    """Put ``text`` (starting with ``heading``) in place of the section under ``heading``, or append it."""
    current = doc.read_text() if doc.exists() else TITLE
    lines = current.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    body = text.rstrip() + "\n\n"
    if start is None:
        updated = current.rstrip() + "\n\n" + body
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        updated = "".join(lines[:start]) + body + "".join(lines[end:])
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(updated.rstrip() + "\n")


def publish(lines: list[str], write_docs: bool) -> None:
    """Print a benchmark's section (``lines[0]`` is its heading) and, with ``write_docs``, put it in the doc."""
    text = "\n".join(lines)
    print(text)
    if write_docs:
        replace_section(lines[0], text)
