"""What pip would install, asked without installing anything: ``pip install --dry-run --report``.

A plain dry run downloads every wheel it considers, whole, into the temporary folder when the index serves no separate
metadata files, as this package index does: 5 GB for the T4 stack (torch's CUDA build and its nvidia libraries), which
once filled a CI machine's disk. ``--use-feature=fast-deps`` reads each wheel's metadata with HTTP range requests
instead (6 MB on disk for the same resolution), and pip falls back to a whole download where an index refuses ranges.
"""

import json
import subprocess
from pathlib import Path

from packaging.utils import canonicalize_name


def would_install(python, *pip_install: str, report: Path, cwd: Path, env: dict | None = None) -> dict[str, str]:
    """The packages ``pip install *pip_install`` would install with ``python``, by normalized name, each version
    without its local part (``2.9.0+cu128`` is 2.9.0)."""
    command = [str(python), "-m", "pip", *pip_install, "--dry-run", "--use-feature=fast-deps", "--report", str(report)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1500, cwd=cwd, env=env)
    assert done.returncode == 0, (command, done.stderr[-3000:])
    return {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"].split("+")[0]
            for item in json.loads(report.read_text())["install"]}
