"""The TRL and transformers internals grpo-lite reads (grpo_lite/machine/stack.py, UPSTREAM_NAMES), looked up in the
source of every tested release and of the newest on the package index, without installing them: each wheel is
downloaded alone and its files parsed, so a rename upstream is named here the day it ships, before a user meets it
inside a run. The table itself is held against grpo-lite's code: every private name it reads and every name it imports
from inside TRL or transformers has its row.
"""

import ast
import functools
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grpo_lite.machine import stack

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("trl", "transformers")
# the objects grpo-lite reads private names of, by the name it gives them, and the classes those names live on
PRIVATE_OWNERS = {"trainer": ("GRPOTrainer", "Trainer"), "GRPOTrainer": ("GRPOTrainer",), "trl_utils": ("",)}


def _index(*pip: str) -> subprocess.CompletedProcess:
    """pip against the package index without this machine's pip configuration, which caps torch at the releases on disk."""
    done = subprocess.run([sys.executable, "-m", "pip", *pip], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    assert done.returncode == 0, (pip, done.stderr[-2000:])
    return done


@functools.cache
def _newest(package: str) -> str:
    listed = _index("index", "versions", package).stdout
    return re.match(rf"^{re.escape(package)} \(([^)]+)\)", listed, re.IGNORECASE).group(1)


def _releases() -> dict[str, dict[str, str]]:
    """Each tested stack's transformers and TRL, and the newest of each."""
    floor, lock = stack.pinned(stack.FLOOR_STACK), stack.pinned(stack.LOCK_STACK)
    releases = {"the T4 stack": {p: floor[p] for p in PACKAGES}, "the lock": {p: lock[p] for p in PACKAGES}}
    releases["the newest"] = {p: _newest(p) for p in PACKAGES}
    return releases


class Source:
    """The parsed files of one wheel, read as they are asked for."""

    def __init__(self, wheel: Path):
        self.wheel = zipfile.ZipFile(wheel)
        self.trees: dict[str, ast.Module] = {}

    def tree(self, file: str) -> ast.Module | None:
        if file not in self.trees:
            try:
                self.trees[file] = ast.parse(self.wheel.read(file))
            except KeyError:
                self.trees[file] = None
        return self.trees[file]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """Source of every release of _releases(), one wheel each, downloaded without its dependencies."""
    folder = tmp_path_factory.mktemp("wheels")
    wanted = {(package, release) for releases in _releases().values() for package, release in releases.items()}
    found = {}
    for package, release in sorted(wanted):
        _index("download", "--quiet", "--no-deps", "--dest", str(folder / f"{package}-{release}"), f"{package}=={release}")
        found[package, release] = Source(next((folder / f"{package}-{release}").glob("*.whl")))
    return found


def _defined(tree: ast.Module, name: str) -> ast.AST | None | bool:
    """The function ``name`` names in ``tree`` (``Class.method``, ``function``), True for another kind of name it defines
    (a module-level name, an import, a class, an attribute a method sets on ``self`` or the class body declares), else None."""
    owner, _, member = name.rpartition(".")
    scope = tree.body
    if owner:
        cls = next((node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == owner), None)
        if cls is None:
            return None
        scope = cls.body
        for node in ast.walk(cls):  # self.<member> = ... in any method
            if isinstance(node, ast.Attribute) and node.attr == member and isinstance(node.ctx, ast.Store):
                return True
    for node in scope:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == member:
            return node
        if isinstance(node, ast.ClassDef) and node.name == member:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == member for t in targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == member for a in node.names):
            return True
        if isinstance(node, (ast.If, ast.Try)):  # a name defined under a condition (Triton available, ...)
            branches = [*node.body, *node.orelse, *(line for handler in getattr(node, "handlers", ()) for line in handler.body)]
            inner = _defined(ast.Module(body=branches, type_ignores=[]), member)
            if inner:
                return inner
    return None


def _parameters(function: ast.AST) -> set[str]:
    arguments = function.args
    return {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}


def _needed(entry: stack.Upstream, releases: dict[str, str]) -> bool:
    for condition in entry.on:
        name = condition.removeprefix("not ")
        if stack.newer(name, releases[stack.DIFFERENCES[name].package]) == condition.startswith("not "):
            return False
    return True


@pytest.mark.slow
def test_every_upstream_name_grpo_lite_reads_is_in_the_source_of_each_tested_release_and_the_newest(sources):
    missing = []
    for stack_name, releases in _releases().items():
        for entry in stack.UPSTREAM_NAMES:
            if not _needed(entry, releases):
                continue
            release = releases[entry.package]
            tree = sources[entry.package, release].tree(entry.file)
            where = f"{entry.package} {release} ({stack_name}): {entry.file}"
            found = None if tree is None else _defined(tree, entry.name)
            if found is None:
                missing.append(f"{where} has no {entry.name}" if tree is not None else f"{where} does not exist")
            elif entry.parameters and not set(entry.parameters) <= _parameters(found):
                missing.append(f"{where}: {entry.name} takes {sorted(_parameters(found))}, not {list(entry.parameters)}")
    assert not missing, "\n".join(missing)


def _reads_of_grpo_lite() -> set[tuple[str, str]]:
    """(module, name) for every name grpo-lite imports from inside TRL or transformers (a submodule's), and
    (owner, private name) for every private name it reads of a trainer or TRL module."""
    reads = set()
    for path in (ROOT / "grpo_lite").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES and "." in node.module:
                reads |= {(node.module, alias.name) for alias in node.names}
            elif (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                  and isinstance(node.value, ast.Name) and node.value.id in PRIVATE_OWNERS):
                reads.add((node.value.id, node.attr))
    return reads


def test_the_table_holds_every_name_grpo_lite_reads_inside_trl_and_transformers():
    def listed(owner: str, name: str) -> bool:
        if owner in PRIVATE_OWNERS:
            return any(entry.name in [f"{cls}.{name}".lstrip(".") for cls in PRIVATE_OWNERS[owner]] for entry in stack.UPSTREAM_NAMES)
        module = owner.replace(".", "/")
        return any(entry.name == name and entry.file.removesuffix(".py").removesuffix("/__init__") in (module, f"{module}/{name}")
                   or entry.name == name and entry.file.startswith(f"{module}/") for entry in stack.UPSTREAM_NAMES)

    unlisted = sorted(f"{owner}: {name}" for owner, name in _reads_of_grpo_lite() if not listed(owner, name))
    assert not unlisted, f"add each to UPSTREAM_NAMES in grpo_lite/machine/stack.py: {unlisted}"


def test_the_lookup_finds_what_a_file_defines_and_names_what_it_lacks():
    tree = ast.parse("import x as y\nNAME = 1\nclass A:\n    z: int = 0\n    def f(self, a, *, b): self.w = a\n"
                     "if True:\n    def g(c): pass\ntry:\n    from k import K\nexcept ImportError:\n    K = None\n")
    assert _parameters(_defined(tree, "A.f")) == {"self", "a", "b"} and _parameters(_defined(tree, "g")) == {"c"}
    assert all(_defined(tree, name) is True for name in ("y", "NAME", "A.z", "A.w", "A", "K"))
    assert all(_defined(tree, name) is None for name in ("x", "A.v", "B.f", "h"))
