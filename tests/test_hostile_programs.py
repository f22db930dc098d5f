"""A corpus of hostile programs, grown from each channel of the sandbox's threat model and run in both modes.

CHANNELS is the threat model's table (docs/security.md): per channel, what each mode promises. "closed": no program
reaches the trainer's side of it. "open (opt-in)": the rlimits fallback cannot close it, so without bubblewrap code
is refused unless the user opts in with GRPO_LITE_SANDBOX=rlimits, and with the opt-in it is open, as documented;
"partly open": some of the channel's programs get through in the fallback (each program says which).

Every program aims at something of the trainer's that holds a secret it is never given (a file, a key, a listener,
a process): it reached its channel when that secret, connection or effect shows. Memory is bounded for a whole
program, all its processes and pipes and the files it writes in RAM, only where a memory cgroup can be made (root, a
writable cgroup file system, as here and in CI); elsewhere each process is bounded on its own, as documented.
"""

import ctypes
import os
import platform
import secrets
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from seekers import PLACES, READERS

import rewards
import rewards.sandbox as sandbox
from rewards.code import code_execution_reward
from rewards.sandbox import SandboxUnavailable, run_python

pytestmark = pytest.mark.stack_free  # nothing here reaches transformers, TRL, PEFT or datasets

CLOSED = "closed"
OPEN = "open (opt-in)"
PARTLY_OPEN = "partly open (opt-in)"
MODES = ("bubblewrap", "rlimits")
MEMORY_CGROUP = sandbox.memory_cgroups() is not None
CHANNELS = {
    "files":                          {"bubblewrap": CLOSED, "rlimits": PARTLY_OPEN},
    "memory":                         {"bubblewrap": CLOSED, "rlimits": PARTLY_OPEN},
    "processes and signals":          {"bubblewrap": CLOSED, "rlimits": CLOSED},
    "network and sockets":            {"bubblewrap": CLOSED, "rlimits": OPEN},
    "IPC and keyrings":               {"bubblewrap": CLOSED, "rlimits": CLOSED},
    "privileges":                     {"bubblewrap": CLOSED, "rlimits": CLOSED},
    "information":                    {"bubblewrap": CLOSED, "rlimits": PARTLY_OPEN},
    "the interpreter and the grader": {"bubblewrap": CLOSED, "rlimits": CLOSED},
    "leftovers between runs":         {"bubblewrap": CLOSED, "rlimits": CLOSED},
}
# This channel's programs are the cheats tests/test_generated_cheats.py generates: what they could reach is a reward.
GRADER_CHANNEL = "the interpreter and the grader"

MEMORY_MB = 96
TIMEOUT = 2.0
# The keyring calls by number (the kernel's syscall tables).
ADD_KEY = {"x86_64": 248, "aarch64": 217}.get(platform.machine())
REQUEST_KEY = {"x86_64": 249, "aarch64": 218}.get(platform.machine())
KEYCTL = sandbox._KEYCTL.get(platform.machine())
KEYCTL_SETPERM, KEYCTL_DESCRIBE, KEYCTL_UNLINK, KEYCTL_READ, KEYCTL_INVALIDATE = 5, 6, 9, 11, 21
SESSION_KEYRING = -3
SETUID_BINARIES = [binary for binary in ("/usr/bin/su", "/usr/bin/passwd", "/usr/bin/mount", "/usr/bin/chsh")
                   if os.path.exists(binary) and os.stat(binary).st_mode & stat.S_ISUID and os.stat(binary).st_uid == 0]


@dataclass(frozen=True)
class Hostile:
    """One hostile program: ``code`` runs with ``TARGET`` defined (public facts: paths, ports, pids, names), and
    ``reached(result, scene)`` says whether it got through. ``fallback`` is what the rlimits mode promises for
    it (bubblewrap closes everything). A leftover program is a pair: ``code`` plants (with ``TOKEN`` defined
    too), then ``look`` runs as the next program."""

    channel: str
    name: str
    code: str
    reached: Callable
    fallback: str = CLOSED
    look: str | None = None


def leaked(secret_name):
    return lambda result, scene: scene.secrets[secret_name] in result.stdout + result.stderr


def said(word):
    return lambda result, scene: word in result.stdout


def connected(kind):
    return lambda result, scene: kind in scene.listeners.wait_for(kind)


def said_number(result, word: str) -> int:
    """The number a program printed after ``word`` at the start of a line (0 when it printed none)."""
    return max([int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith(f"{word} ")], default=0)


def held_more_than_memory_mb(result, scene) -> bool:
    return said_number(result, "stored") > MEMORY_MB


# Stores up to twice memory_mb (enough to show a breach, bounded for the machine) and says how many MiB it held.
STORE = textwrap.dedent("""
    import fcntl, os, time
    MiB = 2**20
    GOAL = 2 * TARGET["memory_mb"]
    held = []

    def allocate(goal):
        stored = 0
        try:
            while stored < goal:
                held.append(bytearray(b"x") * MiB)
                stored += 1
        except MemoryError:
            pass
        return stored

    def fill_files(place, goal):
        stored = 0
        for number in range(goal // 8 + 1):
            try:
                with open(os.path.join(place, f"filler-{os.getpid()}-{number}"), "wb") as file:
                    for _ in range(8):
                        if stored >= goal:
                            return stored
                        file.write(b"x" * MiB)
                        stored += 1
            except OSError:
                return stored
        return stored

    def fill_pipes(goal):
        stored = 0
        while stored < goal * MiB:
            try:
                read_end, write_end = os.pipe()
                fcntl.fcntl(write_end, 1031, MiB)  # F_SETPIPE_SZ: the most one pipe may buffer
            except OSError:
                break
            os.set_blocking(write_end, False)
            try:
                while stored < goal * MiB:
                    stored += os.write(write_end, b"x" * 65536)
            except BlockingIOError:
                pass
        return stored // MiB
""")

# Processes that carry the scene's marker in their command line, so the test finds any that outlived the run.
SPAWN = textwrap.dedent("""
    import os, sys
    def become(loop):
        os.execv(sys.executable, [sys.executable, "-c", loop, TARGET["marker"]])
""")
SLEEP, BURN = "'import time; time.sleep(60)'", "'while True: pass'"

KEYS = textwrap.dedent("""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    def keyctl(*args):
        return libc.syscall(ctypes.c_long(TARGET["keyctl"]), *map(ctypes.c_long, args))
    def read_key(serial):
        payload = ctypes.create_string_buffer(256)
        length = libc.syscall(ctypes.c_long(TARGET["keyctl"]), ctypes.c_long(11), ctypes.c_long(serial), payload, ctypes.c_long(256))
        return payload.raw[:length] if length > 0 else None
    def keys_named(part):
        return [int(line.split()[0], 16) for line in open("/proc/keys") if part in line]
""")

IPC = textwrap.dedent("""
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    rt = ctypes.CDLL("librt.so.1", use_errno=True)
    class Message(ctypes.Structure):
        _fields_ = [("kind", ctypes.c_long), ("text", ctypes.c_char * 64)]
    def read_segment(key):
        segment = libc.shmget(key, 0, 0)
        return ctypes.string_at(libc.shmat(segment, None, 0), 64) if segment >= 0 else ("shmget", ctypes.get_errno())
    def read_queue(name):
        queue, message = rt.mq_open(name.encode(), os.O_RDONLY | os.O_NONBLOCK), ctypes.create_string_buffer(8192)
        return message.value if queue >= 0 and rt.mq_receive(queue, message, 8192, None) > 0 else ("mq_open", ctypes.get_errno())
""")


def leftover_file(place):
    return Hostile(
        "leftovers between runs", f"a file and a folder left in {place}",
        textwrap.dedent(f"""
            import os
            os.umask(0)
            base = os.path.join({place!r}, TARGET["leftover"])
            open(base, "w").write(TOKEN)
            os.mkdir(base + ".d", 0o777)
            open(os.path.join(base + ".d", "inside"), "w").write(TOKEN)
        """),
        leaked("planted"),
        look=textwrap.dedent(f"""
            import os
            for folder, _, names in os.walk({place!r}):
                for name in names:
                    if TARGET["leftover"] in os.path.join(folder, name):
                        print(open(os.path.join(folder, name)).read())
        """),
    )




def held_in_the_fallback(*places: str) -> str:
    """What the fallback promises for files written to ``places``: in RAM (tmpfs) they are charged to the program's
    memory cgroup, where there is one; on disk, or without a cgroup, only each file's size is capped."""
    mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]

    def on_tmpfs(place: str) -> bool:
        path = os.path.realpath(place)
        mount = max((m for m in mounts if path == m[1] or path.startswith(m[1].rstrip("/") + "/")), key=lambda m: len(m[1]))
        return mount[2] == "tmpfs"

    return CLOSED if MEMORY_CGROUP and all(map(on_tmpfs, places)) else OPEN


# A program's processes and pipes are bounded together only by a memory cgroup.
BOUNDED_BY_THE_CGROUP = {"allocate in forked processes that stay alive", "every writable place, pipe buffers and allocation at once"}


def storing(name, body, fallback=CLOSED):
    return Hostile("memory", name, STORE + textwrap.dedent(body), held_more_than_memory_mb, fallback)


CORPUS = [
    Hostile("files", "read a 0600 file of the trainer's user", "print(open(TARGET['private_file']).read())", leaked("private")),
    Hostile("files", "read a world-readable file of the trainer's user", "print(open(TARGET['public_file']).read())",
            leaked("public"), fallback=OPEN),
    Hostile("files", "print its environment (HF_TOKEN)", "import os\nprint(dict(os.environ))\nprint(open('/proc/self/environ').read())",
            leaked("hf_token")),
    Hostile("files", "delete a file of the trainer's user", "import os\nos.remove(TARGET['precious_file'])",
            lambda result, scene: not scene.precious_intact()),
    Hostile("files", "overwrite a file of the trainer's user", "open(TARGET['precious_file'], 'w').write('overwritten')",
            lambda result, scene: not scene.precious_intact()),
    Hostile("files", "create files in the system's and the trainer's folders", textwrap.dedent("""
        import os
        for folder in ("/", "/dev", "/usr", "/usr/lib", "/etc", "/root", "/home", TARGET["folder"]):
            try:
                open(os.path.join(folder, TARGET["leftover"]), "w").write("planted")
                print("created in", folder)
            except OSError as error:
                print(folder, error)
    """), lambda result, scene: "created in" in result.stdout or scene.left_outside()),
    Hostile("files", "fill / and /dev with files", STORE + 'print("stored", fill_files("/", GOAL) + fill_files("/dev", GOAL))',
            lambda result, scene: said_number(result, "stored") > 0),

    storing("allocate in one process", 'print("stored", allocate(GOAL))'),
    storing("allocate in forked processes that stay alive", """
        stored, children = 0, []
        while stored < GOAL:
            report, tell = os.pipe()
            try:
                child = os.fork()
            except OSError:
                break
            if child == 0:
                os.write(tell, bytes([allocate(min(40, GOAL - stored))]))
                time.sleep(60)
            got = os.read(report, 1)
            if not got or not got[0]:
                break
            children.append((child, got[0]))
            stored += got[0]
        time.sleep(0.2)
        print("stored", sum(held for child, held in children if os.waitpid(child, os.WNOHANG) == (0, 0)))
    """),
    storing("fill the work dir", 'print("stored", fill_files(".", GOAL))', fallback=held_in_the_fallback(tempfile.gettempdir())),
    storing("fill /tmp", 'print("stored", fill_files("/tmp", GOAL))', fallback=held_in_the_fallback("/tmp")),
    storing("fill /dev/shm", 'print("stored", fill_files("/dev/shm", GOAL))', fallback=held_in_the_fallback("/dev/shm")),
    storing("every writable place, pipe buffers and allocation at once", """
        stored = 0
        for place in (".", "/tmp", "/dev/shm"):
            stored += fill_files(place, GOAL - stored)
        stored += fill_pipes(GOAL - stored)
        stored += allocate(GOAL - stored)
        print("stored", stored)
    """, fallback=held_in_the_fallback(tempfile.gettempdir(), "/tmp", "/dev/shm")),

    Hostile("processes and signals", "fork bomb", SPAWN + textwrap.dedent(f"""
        count = 1
        while count < 4 * TARGET["max_processes"]:
            try:
                child = os.fork()
            except OSError:
                break
            if child == 0:
                become({SLEEP})
            count += 1
        print("processes", count)
    """), lambda result, scene: said_number(result, "processes") > sandbox.MAX_PROCESSES or bool(scene.survivors())),
    Hostile("processes and signals", "a daemon in its own session", SPAWN + textwrap.dedent(f"""
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                become({SLEEP})
            os._exit(0)
        print("daemon started")
    """), lambda result, scene: bool(scene.survivors())),
    Hostile("processes and signals", "burn the CPU in four processes", SPAWN + textwrap.dedent(f"""
        for _ in range(3):
            if os.fork() == 0:
                become({BURN})
        while True:
            pass
    """), lambda result, scene: result.seconds > TIMEOUT + 3 or bool(scene.survivors())),
    Hostile("processes and signals", "kill the trainer and its parent", textwrap.dedent("""
        import os, signal
        for pid in (TARGET["trainer_pid"], TARGET["trainer_parent_pid"], TARGET["helper_pid"]):
            try:
                os.kill(pid, 0)
                print("may signal", pid)
            except OSError as error:
                print(pid, error)
        for pid in (TARGET["helper_pid"], TARGET["trainer_pid"], os.getppid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError as error:
                print(pid, error)
    """), lambda result, scene: "may signal" in result.stdout or not scene.helper_alive()),
    Hostile("processes and signals", "ptrace the trainer and open its memory", textwrap.dedent("""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        for pid in (TARGET["trainer_pid"], TARGET["helper_pid"]):
            if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
                print("attached", pid)
            try:
                open(f"/proc/{pid}/mem", "rb")
                print("attached to the memory of", pid)
            except OSError as error:
                print(pid, error)
    """), said("attached")),

    Hostile("network and sockets", "connect to the trainer's TCP port on loopback",
            "import socket\nsocket.create_connection(('127.0.0.1', TARGET['tcp_port']), timeout=1).sendall(b'hello')",
            connected("tcp"), fallback=OPEN),
    Hostile("network and sockets", "send a datagram to the trainer's UDP port on loopback",
            "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'hello', ('127.0.0.1', TARGET['udp_port']))",
            connected("udp"), fallback=OPEN),
    Hostile("network and sockets", "connect to the trainer's unix socket",
            "import socket\nclient = socket.socket(socket.AF_UNIX)\nclient.connect(TARGET['unix_socket'])\nclient.sendall(b'hello')",
            connected("unix"), fallback=OPEN),
    Hostile("network and sockets", "connect to the trainer's abstract unix socket",
            "import socket\nclient = socket.socket(socket.AF_UNIX)\nclient.connect('\\0' + TARGET['abstract_socket'])\nclient.sendall(b'hello')",
            connected("abstract"), fallback=OPEN),

    Hostile("IPC and keyrings", "read the key in the trainer's session keyring", KEYS + textwrap.dedent("""
        print(read_key(TARGET["trainer_key"]))
        for serial in keys_named(TARGET["trainer_key_name"]):
            print(read_key(serial))
    """), leaked("trainer_key")),
    Hostile("IPC and keyrings", "plant a key where the trainer's key search finds it", KEYS + textwrap.dedent("""
        persistent = keyctl(22, -1, -3)  # KEYCTL_GET_PERSISTENT: its uid's persistent keyring
        name = ("grpo-lite-" + TARGET["leftover"]).encode()
        key = libc.syscall(ctypes.c_long(TARGET["add_key"]), b"user", name, b"planted", ctypes.c_long(7), ctypes.c_long(persistent))
        keyctl(5, key, 0x3f3f3f3f)  # KEYCTL_SETPERM: anyone may read it
    """), lambda result, scene: scene.trainer.finds_key(f"grpo-lite-{scene.leftover}")),
    Hostile("IPC and keyrings", "attach the trainer's System V shared memory",
            IPC + "print(read_segment(TARGET['trainer_segment']))", leaked("trainer_ipc")),
    Hostile("IPC and keyrings", "open the trainer's POSIX message queue",
            IPC + "print(read_queue(TARGET['trainer_queue']))", leaked("trainer_ipc")),

    Hostile("privileges", "no_new_privs and capabilities", textwrap.dedent("""
        status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
        print("no_new_privs", status["NoNewPrivs"].strip(), "capabilities", status["CapEff"].strip())
    """), lambda result, scene: "no_new_privs 1 capabilities 0000000000000000" not in result.stdout),
    Hostile("privileges", "run setuid-root binaries", textwrap.dedent("""
        import os, select, subprocess
        for binary in TARGET["setuid_binaries"]:
            child = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            select.select([child.stderr], [], [], 2)  # once it writes (or exits, unreaped) it has been exec'd
            status = open(f"/proc/{child.pid}/status").read()
            effective = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[2])
            print(binary, "ran with euid", effective, "elevated" if effective != os.getuid() else "")
            child.kill()
    """), said("elevated")),

    Hostile("information", "read the trainer's command line",
            "print(open(f\"/proc/{TARGET['trainer_pid']}/cmdline\", 'rb').read().hex())",
            lambda result, scene: scene.trainer_cmdline.hex() in result.stdout, fallback=OPEN),
    Hostile("information", "search every process's command line", textwrap.dedent("""
        import os
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                line = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
            except OSError:
                continue
            if "grpo-lite-cmdline-" in line:
                print(pid, line)
    """), leaked("helper_cmdline"), fallback=OPEN),
    Hostile("information", "read the environment of pid 1, its parent and the trainer's processes", textwrap.dedent("""
        import os
        for pid in (1, os.getppid(), TARGET["trainer_pid"], TARGET["helper_pid"]):
            try:
                print(open(f"/proc/{pid}/environ", "rb").read())
            except OSError as error:
                print(pid, error)
    """), leaked("hf_token")),

    *[leftover_file(place) for place in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", ".")],
    Hostile("leftovers between runs", "a key linked into its user, user-session and persistent keyrings",
            KEYS + textwrap.dedent("""
                name = ("grpo-lite-" + TARGET["leftover"]).encode()
                key = libc.syscall(ctypes.c_long(TARGET["add_key"]), b"user", name, TOKEN.encode(), ctypes.c_long(len(TOKEN)), ctypes.c_long(-3))
                keyctl(5, key, 0x3f3f3f3f)  # KEYCTL_SETPERM: anyone may read it
                for ring in (-4, -5, keyctl(22, -1, -3)):  # user, user-session, persistent (KEYCTL_GET_PERSISTENT)
                    keyctl(8, key, ring)  # KEYCTL_LINK
            """), leaked("planted"),
            look=KEYS + "for serial in keys_named(TARGET['leftover']):\n    print(read_key(serial))\n"),
    Hostile("leftovers between runs", "System V shared memory", IPC + textwrap.dedent("""
        segment = libc.shmget(TARGET["ipc_key"], 4096, 0o1000 | 0o666)  # IPC_CREAT
        ctypes.memmove(libc.shmat(segment, None, 0), TOKEN.encode(), len(TOKEN))
    """), leaked("planted"), look=IPC + "print(read_segment(TARGET['ipc_key']))"),
    Hostile("leftovers between runs", "a System V message queue", IPC + textwrap.dedent("""
        queue = libc.msgget(TARGET["ipc_key"], 0o1000 | 0o666)
        libc.msgsnd(queue, ctypes.byref(Message(1, TOKEN.encode())), 64, 0)
    """), leaked("planted"), look=IPC + textwrap.dedent("""
        queue, message = libc.msgget(TARGET["ipc_key"], 0), Message()
        if queue >= 0 and libc.msgrcv(queue, ctypes.byref(message), 64, 0, 0o4000) > 0:  # IPC_NOWAIT
            print(message.text)
    """)),
    Hostile("leftovers between runs", "a POSIX message queue", IPC + textwrap.dedent("""
        os.umask(0)
        queue = rt.mq_open(("/" + TARGET["leftover"]).encode(), os.O_CREAT | os.O_RDWR, 0o666, None)
        rt.mq_send(queue, TOKEN.encode(), len(TOKEN), 0)
    """), leaked("planted"), look=IPC + "print(read_queue('/' + TARGET['leftover']))"),
]

class Listeners:
    """The trainer's sockets: TCP and UDP ports on loopback, a unix socket any user may connect to and an abstract
    unix socket, each recording whether a program reached it."""

    def __init__(self, folder: Path):
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(str(folder / "trainer.sock"))
        os.chmod(folder / "trainer.sock", 0o777)
        self.unix.listen()
        self.abstract_name = f"grpo-lite-trainer-{secrets.token_hex(8)}"
        self.abstract = socket.socket(socket.AF_UNIX)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen()
        self.reached: list[str] = []
        self.arrived = threading.Condition()
        self.selector = selectors.DefaultSelector()
        for kind, server in (("tcp", self.tcp), ("udp", self.udp), ("unix", self.unix), ("abstract", self.abstract)):
            self.selector.register(server, selectors.EVENT_READ, kind)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.listen, daemon=True)
        self.thread.start()

    def listen(self):
        while not self.stop.is_set():
            for key, _ in self.selector.select(timeout=0.1):
                if key.data == "udp":
                    self.udp.recv(64)
                else:
                    key.fileobj.accept()[0].close()
                with self.arrived:
                    self.reached.append(key.data)
                    self.arrived.notify_all()

    def wait_for(self, kind: str, seconds: float = 0.3) -> list[str]:
        """What reached the listeners, once ``kind`` arrived or ``seconds`` passed (a program may exit before the
        listener's thread sees its connection or datagram)."""
        with self.arrived:
            self.arrived.wait_for(lambda: kind in self.reached, timeout=seconds)
            return list(self.reached)

    def close(self):
        self.stop.set()
        self.thread.join()
        for server in (self.tcp, self.udp, self.unix, self.abstract):
            server.close()


def keyctl(*args) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(ctypes.c_long(KEYCTL), *[arg if isinstance(arg, ctypes.Array) else ctypes.c_long(arg) for arg in args])


def session_links() -> list[int]:
    """The serials this process's session keyring links."""
    links = ctypes.create_string_buffer(65536)
    size = keyctl(KEYCTL_READ, SESSION_KEYRING, links, len(links))
    return [int.from_bytes(links.raw[at:at + 4], sys.byteorder) for at in range(0, max(size, 0), 4)]


def owner(serial: int) -> int | None:
    """The uid owning a key (KEYCTL_DESCRIBE: "type;uid;gid;perm;description")."""
    description = ctypes.create_string_buffer(512)
    return int(description.value.split(b";")[1]) if keyctl(KEYCTL_DESCRIBE, serial, description, len(description)) > 0 else None


def add_trainer_key(name: str, payload: str) -> int:
    """A key in this process's session keyring (a new one is joined if it had none), as a trainer holding a token."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    serial = libc.syscall(ctypes.c_long(ADD_KEY), b"user", name.encode(), payload.encode(), ctypes.c_long(len(payload)),
                          ctypes.c_long(SESSION_KEYRING))
    assert serial > 0, f"add_key failed: errno {ctypes.get_errno()}"
    assert keyctl(KEYCTL_SETPERM, serial, 0x3F3F0000) == 0  # its possessor and its owner may do anything, others nothing
    return serial


class TrainerIPC:
    """A System V shared memory segment and a POSIX message queue of the trainer's, private to its user."""

    def __init__(self, payload: str):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.shmat.restype = ctypes.c_void_p
        self.rt = ctypes.CDLL("librt.so.1", use_errno=True)
        self.segment_key = secrets.randbits(30)
        self.segment = self.libc.shmget(self.segment_key, 4096, 0o1000 | 0o600)
        address = self.libc.shmat(self.segment, None, 0)
        ctypes.memmove(address, payload.encode(), len(payload))
        self.libc.shmdt(ctypes.c_void_p(address))
        self.queue_name = f"/grpo-lite-trainer-{secrets.token_hex(8)}"
        queue = self.rt.mq_open(self.queue_name.encode(), os.O_CREAT | os.O_RDWR, 0o600, None)
        assert self.segment >= 0 and queue >= 0 and self.rt.mq_send(queue, payload.encode(), len(payload), 0) == 0
        self.rt.mq_close(queue)

    def close(self):
        self.libc.shmctl(self.segment, 0, None)  # IPC_RMID
        self.rt.mq_unlink(self.queue_name.encode())


class Trainer:
    """The trainer's side: files, sockets, a key, IPC objects and a helper process, each holding a secret no program
    is given."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="grpo-lite-hostile-"))
        self.folder.chmod(0o755)  # any user may enter, only root may write: each file's own mode protects it
        self.secrets = {name: f"{name}-{secrets.token_hex(12)}"
                        for name in ("private", "public", "hf_token", "trainer_key", "trainer_ipc", "helper_cmdline")}
        for name, mode in (("private", 0o600), ("public", 0o644)):
            (self.folder / f"{name}.txt").write_text(self.secrets[name])
            (self.folder / f"{name}.txt").chmod(mode)
        self.precious = self.folder / "precious.txt"
        self.listeners = Listeners(self.folder)
        self.helper = subprocess.Popen(
            [sandbox.sandbox_python(), "-c", "import time; time.sleep(3600)", f"grpo-lite-cmdline-{self.secrets['helper_cmdline']}"],
            env={"HF_TOKEN": self.secrets["hf_token"]})
        key_name = f"grpo-lite-trainer-key-{secrets.token_hex(6)}"
        self.key = add_trainer_key(key_name, self.secrets["trainer_key"]) if ADD_KEY and REQUEST_KEY and KEYCTL else None
        self.ipc = TrainerIPC(self.secrets["trainer_ipc"])
        self.trainer_cmdline = Path("/proc/self/cmdline").read_bytes()
        self.public = {
            "private_file": str(self.folder / "private.txt"), "public_file": str(self.folder / "public.txt"),
            "precious_file": str(self.precious), "folder": str(self.folder), "memory_mb": MEMORY_MB,
            "trainer_pid": os.getpid(), "trainer_parent_pid": os.getppid(), "helper_pid": self.helper.pid,
            "tcp_port": self.listeners.tcp.getsockname()[1], "udp_port": self.listeners.udp.getsockname()[1],
            "unix_socket": str(self.folder / "trainer.sock"), "abstract_socket": self.listeners.abstract_name,
            "trainer_key": self.key or 0, "trainer_key_name": key_name, "keyctl": KEYCTL or 0, "add_key": ADD_KEY or 0,
            "trainer_segment": self.ipc.segment_key, "trainer_queue": self.ipc.queue_name,
            "max_processes": sandbox.MAX_PROCESSES, "setuid_binaries": SETUID_BINARIES,
        }

    def finds_key(self, description: str) -> bool:
        """Whether a search of this process's keyrings, as request_key(2) makes for the trainer, finds the key."""
        libc = ctypes.CDLL(None)
        libc.syscall.restype = ctypes.c_long
        return libc.syscall(ctypes.c_long(REQUEST_KEY), b"user", description.encode(), None, ctypes.c_long(0)) > 0

    def close(self):
        self.helper.kill()
        self.helper.wait()
        self.listeners.close()
        self.ipc.close()
        if self.key:
            keyctl(KEYCTL_UNLINK, self.key, SESSION_KEYRING)
            keyctl(KEYCTL_INVALIDATE, self.key)
            for serial in session_links():  # what the programs linked into this process's session keyring
                if owner(serial) in sandbox.SANDBOX_UIDS:
                    keyctl(KEYCTL_UNLINK, serial, SESSION_KEYRING)
        shutil.rmtree(self.folder)


@pytest.fixture(scope="module")
def trainer():
    trainer = Trainer()
    yield trainer
    trainer.close()


OUTSIDE = ("/", "/dev", "/usr", "/usr/lib", "/etc", "/root", "/home")
SHARED = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


class Scene:
    """One program's run against the trainer: a fresh marker for its processes, a fresh name and token for what it
    leaves, and the trainer's state to check after."""

    def __init__(self, trainer: Trainer):
        self.trainer = trainer
        self.listeners = trainer.listeners
        self.trainer_cmdline = trainer.trainer_cmdline
        self.marker = f"grpo-lite-marker-{secrets.token_hex(8)}"
        self.leftover = f"grpo-lite-leftover-{secrets.token_hex(8)}"
        self.secrets = {**trainer.secrets, "planted": f"planted-{secrets.token_hex(12)}"}
        self.public = {**trainer.public, "marker": self.marker, "leftover": self.leftover,
                       "ipc_key": zlib.crc32(self.leftover.encode()) & 0x7FFFFFFF}
        trainer.precious.write_text("keep me")
        trainer.precious.chmod(0o644)
        self.listeners.reached.clear()

    def precious_intact(self) -> bool:
        return self.trainer.precious.exists() and self.trainer.precious.read_text() == "keep me"

    def helper_alive(self) -> bool:
        return self.trainer.helper.poll() is None

    def survivors(self) -> list[int]:
        """Live processes carrying this scene's marker."""
        found = []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                if self.marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
        return found

    def left_outside(self) -> bool:
        return any(os.path.lexists(os.path.join(folder, self.leftover)) for folder in OUTSIDE)

    def clear(self):
        """Remove whatever a breach left on the machine."""
        for pid in self.survivors():
            os.kill(pid, signal.SIGKILL)
        for place in (*OUTSIDE, *SHARED):
            for path in (Path(place) / self.leftover, Path(place) / f"{self.leftover}.d"):
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.exists():
                    path.unlink()
        libc = ctypes.CDLL(None)
        ctypes.CDLL("librt.so.1").mq_unlink(f"/{self.leftover}".encode())
        for get, control in ((libc.shmget, libc.shmctl), (libc.msgget, libc.msgctl)):
            if (identifier := get(self.public["ipc_key"], 0, 0)) >= 0:
                control(identifier, 0, None)  # IPC_RMID
        if KEYCTL:
            for line in Path("/proc/keys").read_text().splitlines():
                if self.leftover in line:
                    keyctl(KEYCTL_INVALIDATE, int(line.split()[0], 16))


@pytest.fixture
def scene(trainer):
    scene = Scene(trainer)
    yield scene
    scene.clear()


def run_against(hostile: Hostile, scene: Scene):
    """The program's result; for a leftover pair, the next program's, run as another uid than the planter's (the
    fallback draws uids at random, and one of the same uid would find its keyrings emptied first)."""
    program = f"TARGET = {scene.public!r}\n{hostile.code}"
    if hostile.look is None:
        return run_python(program, timeout=TIMEOUT, memory_mb=MEMORY_MB)
    uid = "import os\nprint('uid', os.getuid())\n"
    for _ in range(3):
        planted = run_python(f"{uid}TOKEN = {scene.secrets['planted']!r}\n{program}", timeout=TIMEOUT, memory_mb=MEMORY_MB)
        assert planted.returncode == 0 or "[Errno" in planted.stderr, f"the plant itself broke: {planted}"
        looked = run_python(f"{uid}TARGET = {scene.public!r}\n{hostile.look}", timeout=TIMEOUT, memory_mb=MEMORY_MB)
        if said_number(planted, "uid") != said_number(looked, "uid"):
            break
    return looked


@pytest.mark.parametrize("mode", MODES, indirect=True, scope="module")
@pytest.mark.parametrize("hostile", CORPUS, ids=[hostile.name for hostile in CORPUS])
def test_hostile_program(hostile, mode, scene, monkeypatch):
    if hostile.name in BOUNDED_BY_THE_CGROUP and not MEMORY_CGROUP:
        pytest.skip(f"no memory cgroup here: {sandbox._memory_reason()} (docs/security.md)")
    if "key" in hostile.name and not scene.trainer.key:
        pytest.skip(f"no keyring call numbers for {platform.machine()}")
    if "setuid" in hostile.name and not SETUID_BINARIES:
        pytest.skip("no setuid-root binary here")
    monkeypatch.setenv("HF_TOKEN", scene.secrets["hf_token"])
    result = run_against(hostile, scene)

    reached = hostile.reached(result, scene)
    assert scene.helper_alive() and scene.survivors() == [], "a process outlived the run, or the trainer's helper died"
    if mode == "bubblewrap" or hostile.fallback == CLOSED:
        assert not reached, f"{hostile.name!r} got through in {mode}: {result}"
    else:
        assert reached, f"{hostile.name!r} is documented open in the fallback, but did not get through: {result}"


def test_the_table_matches_the_corpus():
    """Each channel has programs, and its fallback promise is what they show: closed when none gets through,
    open when all do, partly open when some do."""
    by_channel = {channel: {hostile.fallback for hostile in CORPUS if hostile.channel == channel} for channel in CHANNELS}
    summary = {CLOSED: {CLOSED}, OPEN: {OPEN}, PARTLY_OPEN: {CLOSED, OPEN}}
    for channel, promises in CHANNELS.items():
        assert promises["bubblewrap"] == CLOSED
        assert by_channel[channel] == (set() if channel == GRADER_CHANNEL else summary[promises["rlimits"]]), channel


@pytest.fixture
def without_bubblewrap(monkeypatch):
    """A machine without a working bubblewrap, whose user did not opt in to the fallback."""
    monkeypatch.delenv(sandbox.MODE_VARIABLE, raising=False)
    monkeypatch.setattr(sandbox, "_bwrap_binaries", lambda: [])
    sandbox.isolation.cache_clear()
    yield
    sandbox.isolation.cache_clear()


OPEN_IN_THE_FALLBACK = [hostile for hostile in CORPUS if hostile.fallback == OPEN]


@pytest.mark.parametrize("hostile", OPEN_IN_THE_FALLBACK, ids=[hostile.name for hostile in OPEN_IN_THE_FALLBACK])
def test_what_the_fallback_leaves_open_is_refused_without_the_opt_in(hostile, without_bubblewrap, scene):
    with pytest.raises(SandboxUnavailable, match=sandbox.MODE_VARIABLE):
        run_python(f"TARGET = {scene.public!r}\n{hostile.code}", timeout=TIMEOUT, memory_mb=MEMORY_MB)
    assert scene.listeners.wait_for("udp", seconds=0.1) == [] and scene.survivors() == []


def test_code_rewards_are_refused_without_the_opt_in(without_bubblewrap):
    square = "```python\ndef solution(x):\n    return x * x\n```"
    with pytest.raises(SandboxUnavailable):
        code_execution_reward(completions=[square], test_cases=[[{"assert": "solution(3) == 9"}]])
    with pytest.raises(SandboxUnavailable):
        rewards.resolve_rewards(["code"])


def test_the_threat_model_page_lists_these_channels_and_promises():
    """docs/security.md's channel table is CHANNELS: the same channels, and for each mode the promise its cell
    opens with (closed, open, partly open)."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text()
    section = page.split("## Channels", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in section.splitlines() if line.startswith("| ")]
    promised = {row[0]: (row[2], row[3]) for row in rows[1:]}
    words = {CLOSED: "closed", OPEN: "**open**", PARTLY_OPEN: "partly open"}
    assert list(promised) == list(CHANNELS)
    for channel, (bubblewrap, rlimits) in promised.items():
        assert bubblewrap.startswith(words[CHANNELS[channel]["bubblewrap"]]), channel
        assert rlimits.startswith(words[CHANNELS[channel]["rlimits"]]), channel


# A program's inputs, sought by the program beside it: a game's seed (rewards.games.GameReward, the strategy beside the
# game) and a task's checks (an assert test, the program beside its grader). Each seeker looks in one place another
# process's inputs could show outside its own folder, while its peer runs, and answers with every 12-digit number it
# finds there: a secret number found earns the reward. A program's inputs go in files of its own sandbox or on its stdin
# (rewards.sandbox.Program), so none may.
SEEK = READERS + textwrap.dedent("""
    def seen():
        found = PLACE
        return sorted({int(number) for number in re.findall(r"(?<!\\d)\\d{12}(?!\\d)", found)})

    strategy = solution = seen
""")


def seeker(place: str) -> str:
    return SEEK.replace("PLACE", PLACES[place])


@pytest.mark.parametrize("mode", MODES, indirect=True, scope="module")
@pytest.mark.parametrize("place", PLACES)
def test_no_program_finds_its_peers_inputs_on_a_command_line_in_an_environment_or_a_folder(place, mode):
    from rewards.games import GameReward

    secret = secrets.randbelow(9 * 10**11) + 10**11
    completion = f"```python\n{seeker(place)}\n```"
    guessing = GameReward("def play(strategy, seed):\n    return float(seed in strategy())\n", seeds=[secret], timeout=TIMEOUT)
    assert guessing.outcomes([completion])[0][0].score == 0.0, f"the strategy found the game's seed in {place} ({mode})"
    assert code_execution_reward(completions=[completion], test_cases=[[{"assert": f"{secret} in solution()"}]]) == [0.0], \
        f"the program found its check's answer in {place} ({mode})"


def test_each_seeker_finds_a_secret_where_it_looks(tmp_path):
    """The seekers work: run outside any sandbox, each finds a secret put where it looks (its own and its parent's
    command line, its environment, its parent's working folder, a folder named as the sandbox names its own)."""
    secret = secrets.randbelow(9 * 10**11) + 10**11
    (tmp_path / "inputs.json").write_text(f'{{"seed": {secret}}}')
    planted = Path(tempfile.mkdtemp(prefix="grpo-lite-sandbox-"))
    (planted / "inputs.json").write_text(f'{{"seed": {secret}}}')
    try:
        for place in PLACES:
            child = f"{seeker(place)}\nprint(seen())"
            parent = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {child!r}, '{secret}'])"
            shown = subprocess.run([sys.executable, "-c", parent, str(secret)], cwd=tmp_path, capture_output=True, text=True,
                                   env={"SEED": str(secret)}, timeout=60)
            assert str(secret) in shown.stdout, f"{place}: {shown.stdout[-300:]} {shown.stderr[-300:]}"
    finally:
        shutil.rmtree(planted)
