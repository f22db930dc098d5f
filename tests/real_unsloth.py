"""Run code in a subprocess where Unsloth 2026.10.9 has replaced TRL's GRPOTrainer and GRPOConfig, as on a GPU.

Unsloth generates ``UnslothGRPOTrainer`` / ``UnslothGRPOConfig`` from TRL's source when it is imported on a GPU
machine (unsloth/models/rl.py, ``PatchFastRL``). On a CPU machine it picks its CPU backend and leaves TRL alone;
with ``UNSLOTH_ALLOW_CPU=1`` it imports its GPU code paths, and ``PatchFastRL`` returns early on CPU, so
:data:`PATCH` calls the patching it would have run. The patching is process-wide and writes
``unsloth_compiled_cache/`` into the working directory: hence a process of its own with its own working directory,
forked from one that ran the patching once (:data:`FORK_SERVER`).

``gpu=(major, minor, memory_gb)`` makes torch report such a card after Unsloth is imported, so configs with
fp16/bf16 can be built. Only configs: nothing can run on a GPU that is not there (Unsloth's
``FastLanguageModel.from_pretrained`` cannot run here at all).
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

# The same steps as PatchFastRL's on a GPU (unsloth/models/rl.py): the trainers, then vLLM generation.
# Unsloth's torch.compile is off (UNSLOTH_COMPILE_DISABLE, read when unsloth_zoo is imported): it "only drops
# torch.compile; rewritten forwards still run eagerly" (unsloth_zoo/compiler.py), and the generated trainer is the
# same. On a GPU those regions compile to Triton; here they would compile to CPU C++ kernels no user trains with,
# and one of them (the causal mask, unsloth_zoo/temporary_patches/misc.py) failed once in CI in its memory pool.
PATCH = """
import os
os.environ["UNSLOTH_ALLOW_CPU"] = "1"
os.environ["UNSLOTH_COMPILE_DISABLE"] = "1"
import unsloth
from unsloth.models import rl as _unsloth_rl
_unsloth_rl.patch_trl_disable_gradient_checkpointing()
_unsloth_rl._patch_trl_rl_trainers("grpo_trainer")
_unsloth_rl.patch_trl_vllm_generation()
"""

# A card of compute capability major.minor with memory_gb, as torch and transformers ask about it.
FAKE_GPU = """
import types, torch, transformers.training_args
_major, _minor, _memory_gb = {gpu!r}
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
torch.cuda.get_device_capability = lambda device=None: (_major, _minor)
torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(
    name="fake", major=_major, minor=_minor, multi_processor_count=40,
    total_memory=int(_memory_gb * 2**30))
torch.cuda.set_device = lambda device: None
transformers.training_args.is_torch_bf16_gpu_available = lambda: _major >= 8
"""

# TRL's own classes, as on a machine without Unsloth: grpo_lite imports Unsloth first on a (faked) GPU machine.
NO_UNSLOTH = """
import sys
sys.modules["unsloth"] = None
"""

RESULT_MARK = "@@result@@ "

requires_unsloth = pytest.mark.skipif(
    __import__("importlib").util.find_spec("unsloth") is None, reason="Unsloth is not installed (.ci/run installs it)")


def run_script(code: str, cwd: Path, *, unsloth: bool = True, gpu: tuple[int, int, float] | None = None,
               prelude: str | None = None, timeout: int = 600):
    """Run ``code`` in a fresh process in ``cwd``, under Unsloth's patching or (``unsloth=False``) with TRL's own classes.

    ``code`` calls ``result(value)`` to hand back JSON; returns that value. A failure raises with the output.
    ``prelude``, when given, runs first instead of those (on a real GPU, Unsloth patches TRL itself).
    """
    helper = f"def result(value):\n    import json\n    print({RESULT_MARK!r} + json.dumps(value), flush=True)\n"
    source = (FAKE_GPU.format(gpu=gpu) if gpu else "") + helper + textwrap.dedent(code)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    done = _forks(prelude if prelude is not None else PATCH if unsloth else NO_UNSLOTH, env).run(source, cwd, env, timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if done.returncode or not lines:
        # the exception's own line first: a long traceback's tail is what a CI log keeps least of
        raised = [line for line in done.stderr.splitlines() if line.strip() and not line[0].isspace()][-3:]
        raise AssertionError(f"exit {done.returncode}: {' | '.join(raised)}\n--- stdout\n{done.stdout[-6000:]}\n"
                             f"--- stderr\n{done.stderr[-8000:]}")
    return json.loads(lines[-1][len(RESULT_MARK):])


# A process that runs a prelude once (importing torch, transformers, TRL and Unsloth, and patching: about 20 s), then
# forks a child for each script: each script runs in a process of its own, as under `python -c prelude + script`, in
# its working directory and environment (with what the prelude set in it), the prelude's names its globals, without
# paying for the imports again. Nothing has run a parallel region of torch's thread pool before the fork.
FORK_SERVER = r"""
import atexit, json, os, sys, traceback
_channel = os.dup(1)  # the replies; what the prelude and the scripts print goes elsewhere
os.dup2(2, 1)
_given = dict(os.environ)
_globals = {"__name__": "__main__"}
exec(compile(sys.argv[1], "<prelude>", "exec"), _globals)
_set_by_prelude = {key: value for key, value in os.environ.items() if _given.get(key) != value}


def _say(message):
    os.write(_channel, (json.dumps(message) + "\n").encode())


for line in sys.stdin:
    request = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(_channel)
            for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update({**request["env"], **_set_by_prelude})
            sys.argv = ["-c"]
            try:
                exec(compile(request["code"], "<string>", "exec"), _globals)
                code = 0
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
            except BaseException:
                traceback.print_exc()
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    _say({"pid": pid})
    _say({"returncode": os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])})
"""


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str


class ForkServer:
    """One prelude's process; :meth:`run` forks a child of it for a script and waits for it, killing it past ``timeout``."""

    def __init__(self, prelude: str, env: dict[str, str]):
        self.log = tempfile.NamedTemporaryFile(prefix="fork-server-", suffix=".log", delete=False)
        self.process = subprocess.Popen([sys.executable, "-c", FORK_SERVER, prelude], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, env=env, text=True, bufsize=1)
        self.replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        atexit.register(self.process.kill)

    def _read(self):
        for line in self.process.stdout:
            self.replies.put(json.loads(line))
        self.replies.put(None)  # the server is gone

    def _reply(self, timeout: float) -> dict:
        reply = self.replies.get(timeout=timeout)
        if reply is None:
            raise AssertionError(f"the fork server died: {Path(self.log.name).read_text()[-8000:]}")
        return reply

    def run(self, code: str, cwd: Path, env: dict[str, str], timeout: float) -> Finished:
        with tempfile.TemporaryDirectory() as folder:
            out, err = Path(folder) / "stdout", Path(folder) / "stderr"
            self.process.stdin.write(json.dumps({"code": code, "cwd": str(cwd), "env": env, "stdout": str(out),
                                                 "stderr": str(err)}) + "\n")
            pid = self._reply(60)["pid"]
            try:
                returncode = self._reply(timeout)["returncode"]
            except queue.Empty:
                os.kill(pid, signal.SIGKILL)
                self._reply(60)
                raise subprocess.TimeoutExpired(["fork of", code[:80]], timeout) from None
            return Finished(returncode, out.read_text(errors="replace"), err.read_text(errors="replace"))


_SERVERS: dict[tuple[str, str], ForkServer] = {}


def _forks(prelude: str, env: dict[str, str]) -> ForkServer:
    key = (prelude, env["PYTHONPATH"])
    if key not in _SERVERS or _SERVERS[key].process.poll() is not None:
        _SERVERS[key] = ForkServer(prelude, env)
    return _SERVERS[key]
