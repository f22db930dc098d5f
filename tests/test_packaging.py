"""The install files agree: environment.yml with pyproject, each stack under requirements/ with pyproject's ranges,
and each stack resolves on its own from the package index."""

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from resolution import would_install

ROOT = Path(__file__).resolve().parents[1]


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _by_name(specs):
    return {canonicalize_name(r.name): r for r in map(Requirement, specs)}


def test_environment_yml_installs_the_package_on_the_lock_and_bounds_nothing_itself():
    """A version bound is written once, in pyproject.toml: the conda environment installs the package with its Unsloth
    and notebook extras, pinned by the lock's constraints file."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip_section == ["-c requirements/lock.txt", '-e ".[unsloth,notebook]"']
    assert "python=3.11" in env["dependencies"] and Requirement(f"x{_pyproject()['requires-python']}").specifier.contains("3.11")


# Each stack (docs/stacks.md): its file, the torch it is installed over, the extras it pins (the lock: dev and vision; the
# others resolve with it, test_every_extra_resolves_with_the_lock).
STACKS = {"lock.txt": ("torch==2.13.0", "dev,vision"), "t4.txt": ("torch==2.9.0", "dev,notebook,unsloth,vllm,vision"),
          "vllm.txt": ("torch==2.13.0", "dev,notebook,unsloth,vllm")}


def _pins(stack: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements" / stack).read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if match:
            pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_pins_satisfy_pyproject_ranges_and_cover_every_dependency(stack):
    pins = _pins(stack)
    project = _pyproject()
    extras = STACKS[stack][1].split(",")
    for spec in project["dependencies"] + [s for extra in extras for s in project["optional-dependencies"][extra]]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not pinned in requirements/{stack}"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} outside {requirement.specifier}"
    assert f"torch=={pins['torch']}" == STACKS[stack][0]


def test_the_stacks_are_the_floor_and_the_lock_pyproject_and_unsloth_declare():
    """One place for each version fact. The floor of transformers and TRL is pyproject's lower bound, pinned by the T4
    stack (grpo_lite/machine/stack.py reads it from the stack file). The lock is the newest transformers and TRL that
    Unsloth's pinned release declares it allows, and the vLLM stack is the lock with vLLM."""
    from importlib.metadata import PackageNotFoundError, requires

    from grpo_lite.machine import stack

    lock, t4, vllm = _pins("lock.txt"), _pins("t4.txt"), _pins("vllm.txt")
    bounds = _by_name(_pyproject()["dependencies"])
    for package in ("transformers", "trl"):
        assert str(bounds[package].specifier) == f">={t4[package]}", package  # the base install: no upper bound
        assert stack.pinned(stack.FLOOR_STACK)[package] == t4[package] and vllm[package] == lock[package], package
    assert (t4["torch"], t4["vllm"], vllm["vllm"]) == ("2.9.0", "0.11.2", "0.31.0")
    assert vllm["torch"] == lock["torch"] == "2.13.0"
    # vLLM 0.11.2 is the last release for compute capability 7.5; 0.31.0 the newest TRL supports (trl/import_utils.py)
    specifier = Requirement(_pyproject()["optional-dependencies"]["vllm"][0]).specifier
    assert specifier.contains("0.11.2") and specifier.contains("0.31.0")
    assert not specifier.contains("0.11.1") and not specifier.contains("0.32.0")
    extra = _by_name(_pyproject()["optional-dependencies"]["unsloth"])
    assert {str(extra[name].specifier) for name in ("unsloth", "unsloth-zoo")} == {f"=={lock['unsloth']}"} == {f"=={lock['unsloth-zoo']}"}
    try:
        declared = [Requirement(line) for name in ("unsloth", "unsloth_zoo") for line in requires(name) or ()]
    except PackageNotFoundError:
        pytest.skip("Unsloth's wheels are not installed (.ci/run installs them): its declared requirements cannot be read")
    declared = [r for r in declared if r.marker is None or r.marker.evaluate({"extra": ""})]
    for requirement in declared:
        name = canonicalize_name(requirement.name)
        if name in ("torch", "transformers", "trl", "datasets", "peft", "accelerate"):
            assert requirement.specifier.contains(lock[name]), (name, lock[name], str(requirement))
            top = [spec.version for spec in requirement.specifier if spec.operator == "<="]
            assert top in ([], [lock[name]]), (name, lock[name], str(requirement))  # the newest it allows


def test_ruff_finds_nothing():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]


@pytest.mark.slow
def test_every_extra_resolves_with_the_lock(tmp_path):
    # Only the package index is asked, once for all the extras: what resolves together resolves apart. vLLM is the
    # exception, pinning its own numpy and lark: its stack is requirements/vllm.txt, resolved below.
    extras = sorted(set(_pyproject()["optional-dependencies"]) - {"vllm"})
    _resolve(tmp_path, "lock.txt", "torch==2.13.0", ",".join(extras))


@pytest.mark.slow
@pytest.mark.parametrize("stack", ["t4.txt", "vllm.txt"])
def test_each_vllm_stack_resolves_on_its_own_and_its_file_is_the_whole_resolution(stack, tmp_path):
    torch, extras = STACKS[stack]
    resolved = _resolve(tmp_path, stack, torch, extras)
    resolved.pop("grpo-lite")
    assert resolved == _pins(stack)


def _resolve(tmp_path, stack: str, torch: str, extras: str) -> dict[str, str]:
    import sys

    return would_install(sys.executable, "install", "--quiet", "--ignore-installed", "-c", str(ROOT / "requirements" / stack),
                         torch, f"{ROOT}[{extras}]", report=tmp_path / "report.json", cwd=tmp_path)


# What a runtime with the newest releases has (Colab's and Kaggle's follow them), which installing grpo-lite must keep
NEWEST_KEPT = ("torch", "transformers", "trl", "datasets", "peft", "accelerate")


@pytest.mark.slow
def test_the_base_install_keeps_the_newest_releases_a_runtime_already_has(tmp_path):
    """pip, asked for grpo-lite beside the newest release of each of NEWEST_KEPT on the package index today, replaces none
    of them: every one is inside pyproject's bounds, or the bound that keeps it out says why on its own line. The pip
    configuration is left out: this machine's caps torch at the releases on its disk."""
    import os
    import subprocess
    import sys

    def newest(name: str) -> str:
        listed = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name], capture_output=True, text=True,
                                timeout=300, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
        assert listed.returncode == 0, listed.stderr[-2000:]
        return re.match(rf"^{re.escape(name)} \(([^)]+)\)", listed.stdout, re.IGNORECASE).group(1)

    bounds = _by_name(_pyproject()["dependencies"])
    block = (ROOT / "pyproject.toml").read_text().split("\ndependencies = [\n", 1)[1].split("\n]", 1)[0]
    lines = {canonicalize_name(Requirement(line.split("#")[0].strip().strip('",')).name): line
             for line in block.splitlines() if re.match(r'^\s+"', line)}
    kept = {}
    for name in NEWEST_KEPT:
        release = newest(name)
        if bounds[name].specifier.contains(release):
            kept[name] = release
        else:
            assert "#" in lines[name], f"{name} {release}, the newest, is outside {bounds[name].specifier} with no reason beside it"
    resolved = would_install(sys.executable, "install", "--quiet", "--ignore-installed", *(f"{n}=={v}" for n, v in kept.items()),
                             str(ROOT), report=tmp_path / "report.json", cwd=tmp_path,
                             env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    assert {name: resolved[name] for name in kept} == kept
