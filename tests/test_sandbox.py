"""Hostile programs are contained: each call returns, nothing outside the work dir changes, no secret
leaks, no process outlives the run, and the next program runs normally."""

import fcntl
import os
import socket
import textwrap
import threading
from pathlib import Path

import pytest

import rewards.sandbox as sandbox
from rewards.sandbox import SANDBOX_UIDS, isolation, processes_of, run_batch, run_python

pytestmark = pytest.mark.stack_free  # nothing here reaches transformers, TRL, PEFT or datasets


def sandbox_processes() -> list[int]:
    """Processes of the sandbox uids no program holds now: what outlived a run. (A uid whose slot is held runs a
    program of another test process or trainer on this machine.)"""
    leaked = []
    for uid in SANDBOX_UIDS:
        with open(sandbox.SLOTS_FOLDER / f"{uid}.lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            leaked += processes_of(uid)
    return leaked


@pytest.fixture
def decoy(tmp_path):
    folder = tmp_path / "decoy"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me")
    return folder


def hostile_programs(decoy: Path, port: int) -> dict[str, str]:
    return {
        "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        "memory_bomb": "blocks = []\nwhile True:\n    blocks.append(bytearray(50 * 2**20))",
        "infinite_loop": "while True:\n    pass",
        "sleep_past_timeout": "import time\ntime.sleep(60)",
        "huge_file": "with open('big.bin', 'wb') as f:\n    while True:\n        f.write(b'x' * 2**20)",
        "many_files": "for i in range(40):\n    with open(f'part{i}', 'wb') as f:\n        f.write(b'x' * 2**23)",
        "delete_decoy": f"import shutil\nshutil.rmtree({str(decoy)!r})\nprint('deleted')",
        "read_secret": "import os\nprint(dict(os.environ))\nprint(open('/proc/1/environ', 'rb').read())",
        "network": f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'leak')\nprint('connected')",
        "kill_parent": f"import os, signal\nfor pid in (os.getppid(), {os.getpid()}):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
                       "    except OSError as e:\n        print('denied', pid, e)",
        "daemon": textwrap.dedent("""
            import os, time
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                os._exit(0)
            print('spawned')
        """),
        "stdout_flood": "while True:\n    print('x' * 1000)",
    }


@pytest.fixture
def listener():
    """A loopback server that records whether anything connected."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    connected = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                connection, _ = server.accept()
                connected.append(connection.recv(10))
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], connected
    stop.set()
    thread.join()
    server.close()


def test_isolation_level_is_reported():
    level = isolation()
    print(f"sandbox isolation: {level}")
    assert level.name in ("bubblewrap", "rlimits") and level.reason


@pytest.fixture(params=["bubblewrap", "rlimits"])
def level(request, monkeypatch):
    """Each isolation mode, chosen by name as a user would (GRPO_LITE_SANDBOX), so each is tested wherever it can
    run (the fallback isolates by dropping to another uid, which needs root)."""
    if request.param == "rlimits" and os.geteuid() != 0:
        pytest.skip("the rlimits fallback isolates by dropping to another uid, which needs root")
    monkeypatch.setenv(sandbox.MODE_VARIABLE, request.param)
    sandbox.isolation.cache_clear()
    yield sandbox.isolation()
    sandbox.isolation.cache_clear()


@pytest.mark.parametrize("name", list(hostile_programs(Path("/x"), 1)))
def test_hostile_program_is_contained(name, level, decoy, listener, monkeypatch):
    port, connected = listener
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value_123")
    if name == "network" and level.name != "bubblewrap":
        pytest.skip(f"no network isolation without bubblewrap ({level.reason})")
    result = run_python(hostile_programs(decoy, port)[name], timeout=2, memory_mb=256)

    assert (decoy / "precious.txt").read_text() == "keep me"
    assert "hf_secret_value_123" not in result.stdout + result.stderr
    assert not connected, "the program reached the network"
    assert len(result.stdout) <= 65_536
    assert sandbox_processes() == [], "a process outlived the run"
    expected = {
        "memory_bomb": lambda r: r.killed_reason == "memory limit",
        "infinite_loop": lambda r: r.timed_out or r.killed_reason == "cpu time limit",
        "sleep_past_timeout": lambda r: r.timed_out,
        "huge_file": lambda r: r.killed_reason == "file size limit",
        "many_files": lambda r: "No space left on device" in r.stderr or level.name == "rlimits",
        "delete_decoy": lambda r: "deleted" not in r.stdout,
        "network": lambda r: "connected" not in r.stdout,
        "stdout_flood": lambda r: r.killed_reason in ("file size limit", "timeout"),
    }
    assert expected.get(name, lambda r: True)(result), result
    assert run_python("print('still fine')").stdout == "still fine\n"


def test_programs_get_stdin_and_a_clean_working_directory():
    first = run_python("import os\nopen('left.txt', 'w').write('x')\nprint(input()[::-1], sorted(os.listdir('.')))", stdin="abc\n")
    second = run_python("import os\nprint(sorted(os.listdir('.')))")
    assert first.stdout == "cba ['left.txt', 'main.py']\n" and second.stdout == "['main.py']\n"
    crashed = run_python("raise ValueError('boom')")
    assert crashed.returncode == 1 and "ValueError: boom" in crashed.stderr and crashed.killed_reason is None


def test_batches_run_in_parallel_and_keep_order():
    results = run_batch([f"print({i} * 2)" for i in range(8)] + [("print(input())", "from stdin")])
    assert [r.stdout.strip() for r in results] == [str(i * 2) for i in range(8)] + ["from stdin"]
