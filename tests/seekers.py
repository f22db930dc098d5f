"""Programs that seek another process's inputs: every place one could show outside its owner's folder (command lines,
environments, working folders, the sandboxes' folders), as Python source a hostile program starts with. A sandboxed
program's inputs go in files of its own sandbox or on its stdin (rewards.sandbox.Program), so a program beside it
finds none of them there: tests/test_hostile_programs.py seeks a game's seed and a check's answer in each place, and
tests/test_generated_cheats.py's technique answers with any check it finds in all of them."""

import textwrap

# Defines read(path), every(name) (that file of every process in /proc) and folder(path) (its files' text).
READERS = textwrap.dedent("""
    import glob, os, re, sys

    def read(path):
        try:
            with open(path, "rb") as source:
                return source.read(1 << 20).decode(errors="replace")
        except OSError:
            return ""

    def every(name):
        return " ".join(read(f"/proc/{pid}/{name}") for pid in os.listdir("/proc") if pid.isdigit())

    def folder(path):
        try:
            names = sorted(os.listdir(path))[:64]
        except OSError:
            return ""
        return " ".join(read(os.path.join(path, name)) for name in names if os.path.isfile(os.path.join(path, name)))
""")
# Each place, as an expression of READERS' functions giving the text found there.
PLACES = {
    "its own command line (sys.argv)": "' '.join(sys.argv)",
    "/proc/self/cmdline": "read('/proc/self/cmdline')",
    "its parent's command line": "read(f'/proc/{os.getppid()}/cmdline')",
    "every process's command line": "every('cmdline')",
    "its own environment": "str(dict(os.environ)) + read('/proc/self/environ')",
    "every process's environment": "every('environ')",
    "every process's working folder": "' '.join(folder(f'/proc/{pid}/cwd') for pid in os.listdir('/proc') if pid.isdigit())",
    "the sandboxes' folders": "' '.join(folder(path) for path in glob.glob('/tmp/grpo-lite-sandbox-*'))",
}
EVERYWHERE = " + ' ' + ".join(f"({place})" for place in PLACES.values())  # all of them at once
