"""The install files agree: environment.yml with pyproject, each stack under requirements/ with pyproject's ranges,
and each stack resolves on its own from the package index."""

import re
from pathlib import Path

import pytest
import tomllib
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from resolution import would_install

ROOT = Path(__file__).resolve().parents[1]


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _by_name(specs):
    return {canonicalize_name(r.name): r for r in map(Requirement, specs)}


def test_environment_yml_lists_exactly_the_core_unsloth_and_notebook_dependencies():
    project = _pyproject()
    expected = _by_name(
        project["dependencies"] + project["optional-dependencies"]["unsloth"] + project["optional-dependencies"]["notebook"]
    )
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = _by_name(s for s in pip_section if not s.startswith("-e"))
    assert set(listed) == set(expected)
    for name, requirement in expected.items():
        assert listed[name].specifier == requirement.specifier, name
    assert any(s.startswith("-e") and "unsloth" in s for s in pip_section), "installs the package with the unsloth extra"


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


def test_the_stacks_are_the_ends_of_the_range_and_the_vllm_releases_they_name():
    from grpo_lite.machine import stack

    lock, t4, vllm = _pins("lock.txt"), _pins("t4.txt"), _pins("vllm.txt")
    for package, (low, high) in stack.SUPPORTED.items():
        assert (t4[package], lock[package], vllm[package]) == (low, high, high), package
    assert (t4["torch"], t4["vllm"], vllm["vllm"]) == ("2.9.0", "0.11.2", "0.31.0")
    assert vllm["torch"] == lock["torch"] == "2.13.0"
    # vLLM 0.11.2 is the last release for compute capability 7.5; 0.31.0 the newest TRL 1.15 supports (trl/import_utils.py)
    specifier = Requirement(_pyproject()["optional-dependencies"]["vllm"][0]).specifier
    assert specifier.contains("0.11.2") and specifier.contains("0.31.0")
    assert not specifier.contains("0.11.1") and not specifier.contains("0.32.0")


def test_lock_is_the_unsloth_compatible_stack():
    lock = (ROOT / "requirements" / "lock.txt").read_text()
    for pin in ("trl==1.15.0", "transformers==5.17.0", "torch==2.13.0"):
        assert re.search(rf"^{re.escape(pin)}$", lock, re.MULTILINE), pin


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
