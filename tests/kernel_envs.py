"""Kernel environments for the Stop button tests: this venv's Python with other kernel packages on top.

Each environment is a ``pip install --target`` folder of pinned kernel-side packages (ipykernel, IPython,
jupyter_client, ipywidgets), put first on the kernel's ``PYTHONPATH``; torch, TRL and grpo_lite come from this
venv. They are cached under ``.kernel-envs/`` (gitignored), so only the first run installs.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / ".kernel-envs"

KERNELS = {
    # what Colab ships (design notes); ipywidgets without its dependencies: the notebook extension it pulls
    # in is a frontend part, not the kernel's
    "colab": (["ipykernel==6.17.1", "ipython==7.34.0", "jupyter_client==6.1.12"], ["ipywidgets==7.7.1", "ipython_genutils==0.2.0"]),
    "ipykernel-5.5.6": (["ipykernel==5.5.6", "ipython==7.34.0", "jupyter_client==6.1.12"],
                        ["ipywidgets==7.7.1", "ipython_genutils==0.2.0"]),
    "ipykernel-6.29.5": (["ipykernel==6.29.5"], []),
    "ipykernel-7.0": (["ipykernel==7.0.0"], []),
    "ipykernel-7.3": (["ipykernel==7.3.0"], []),
}


def kernel_pythonpath(name: str) -> str | None:
    """The ``PYTHONPATH`` that gives a kernel the environment ``name`` (None: this venv as it is)."""
    if name == "default":
        return None
    with_deps, without_deps = KERNELS[name]
    key = hashlib.sha256(repr((with_deps, without_deps, sys.version_info[:2])).encode()).hexdigest()[:12]
    target = ROOT / f"{name}-{key}"
    if not (target / ".complete").exists():
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target", str(target)]
        subprocess.run([*pip, *with_deps], check=True)
        if without_deps:
            subprocess.run([*pip, "--no-deps", *without_deps], check=True)
        (target / ".complete").write_text("")
    return str(target)
