"""Which engine generates a run's completions on this machine, vLLM or transformers, and why: decided here only.

vLLM generates where Unsloth loads the model with ``fast_inference`` and hangs its engine on the model
(``model.vllm_engine``, unsloth/models/llama.py); Unsloth's GRPOTrainer then trains with ``use_vllm`` and
``vllm_mode="colocate"`` (unsloth/models/rl.py). Whether that can work depends on Unsloth, the card, and the installed
vLLM, TRL and transformers. The rules, each with the upstream source that makes it so:

- **Unsloth** is installed and did not disable vLLM as it was imported (unsloth/import_fixes.py, ``disable_broken_vllm``
  blocks a vLLM whose compiled extension or transformers fails it and keeps ``VLLM_DISABLED_REASON``).
- **The card** has compute capability 7.0 or more (unsloth_zoo/vllm_utils.py, ``load_vllm``: "vLLM needs compute
  capability 7.0 or higher").
- **Below 8.0** (a T4 is 7.5) vLLM is 0.11.x: Unsloth's GRPO notebooks install ``vllm==0.11.2`` on a Tesla T4 and
  ``vllm==0.15.1`` on other GPUs (unslothai/notebooks, nb/Qwen2.5_(3B)-GRPO.ipynb @ bdda2efc, "Colab Extra Install";
  unslothai/notebooks#336 pins 0.11.2 as "the one version the T4 case has left"). vLLM itself does not refuse a later
  release there (0.15.1's ``_C.abi3.so`` still has sm_75 kernels): ``fast_inference=True`` may try one (``untested``).
- **TRL** accepts the vLLM its own ``vllm`` extra declares (its METADATA). TRL 1.15.0: ``vllm<=0.31.0,>=0.21.0``;
  trl/import_utils.py warns outside it, and below 0.28 trl/generation/vllm_client.py imports
  ``vllm.distributed.weight_transfer``, which vLLM 0.11.2 and 0.15.1 do not have, so its GRPOTrainer fails to import.
  TRL 0.22.2: ``vllm>=0.10.0`` and no check in its code; Unsloth rewrites its trainer's vLLM calls (unsloth/models/rl.py)
  and restores the ``GuidedDecodingParams`` it imports for newer vLLM (unsloth/import_fixes.py).
- **vLLM**'s own metadata requires a transformers: vLLM 0.11.2 and 0.15.1 ``transformers<5,>=4.56.0`` (from 0.24 it
  needs transformers 5: unsloth/import_fixes.py, ``_is_vllm_needs_transformers_v5_error``).

So a T4 generates through vLLM on the stack Unsloth's notebooks install there (vLLM 0.11.2, transformers 4.56.2,
TRL 0.22.2), and a card of compute capability 8.0 or more with any vLLM the installed TRL and transformers accept
(Unsloth's notebooks: vLLM 0.15.1 with TRL 0.22.2; with TRL 1.15: 0.21-0.31). Versions are read from installed
metadata (importing vLLM takes seconds and may fail); nothing here imports transformers or TRL.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from .device import compute_capability, installed

LEAST_CAPABILITY = (7, 0)  # unsloth_zoo/vllm_utils.py, load_vllm
BELOW_AMPERE = (8, 0)
T4_VLLM = SpecifierSet("~=0.11.0")  # 0.11.x: what Unsloth's notebooks run on a T4
T4_STACK = "on a T4 vLLM generates with the stack Unsloth's notebooks install there: vLLM 0.11.2, transformers 4.56.2, TRL 0.22.2 (requirements/t4.txt)"
VLLM_STACK = "install a vLLM that TRL {trl} accepts ({accepts}) (requirements/vllm.txt)"


@dataclass(frozen=True)
class Stack:
    """What the decision reads of the installed packages: their versions, and what each declares of the others."""

    vllm: str | None = None
    trl: str | None = None
    transformers: str | None = None
    vllm_needs_transformers: str = ""  # the specifier vLLM's metadata gives transformers ("" for none)
    trl_accepts_vllm: str = ""  # the specifier TRL's ``vllm`` extra gives vLLM ("" for none)
    unsloth: bool = False
    unsloth_disabled_vllm: str | None = None


@dataclass(frozen=True)
class Engine:
    """The engine that generates, and why. ``untested`` when the only thing against vLLM is that Unsloth's notebooks
    do not run this card with this vLLM: ``fast_inference=True`` then goes ahead with vLLM, saying so."""

    name: str  # "vLLM" or "transformers"
    reason: str
    untested: bool = False

    @property
    def vllm(self) -> bool:
        return self.name == "vLLM"

    def __str__(self) -> str:
        return f"{self.name} generates ({self.reason})"


def unsloth_disabled_vllm() -> str | None:
    """Why Unsloth disabled vLLM as it was imported, or None when it did not (or is not imported).

    Unsloth imports vLLM when it is imported itself and, when vLLM's compiled extensions are broken or it refuses
    the installed transformers, blocks it for the process and keeps the reason (unsloth/import_fixes.py,
    ``disable_broken_vllm``, ``VLLM_DISABLED_REASON``); ``from_pretrained(fast_inference=True)`` then raises
    ImportError (unsloth/models/loader.py). vLLM's version metadata still looks fine.
    """
    fixes = sys.modules.get("unsloth.import_fixes")
    reason = getattr(fixes, "VLLM_DISABLED_REASON", None)
    return " ".join(str(reason).split()) if reason else None


def _version(name: str) -> str | None:
    try:
        return distribution(name).version
    except PackageNotFoundError:
        return None


def specifier(requires, name: str, extra: str = "") -> str:
    """The version specifier that the ``Requires-Dist`` lines ``requires`` give ``name`` (in ``extra``), "" when none."""
    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) != canonicalize_name(name):
            continue
        marker = requirement.marker
        if extra:  # in that extra, and not a requirement of the package itself
            wanted = marker is not None and marker.evaluate({"extra": extra}) and not marker.evaluate({"extra": ""})
        else:
            wanted = marker is None or marker.evaluate({"extra": ""})
        if wanted:
            return str(requirement.specifier)
    return ""


def declared(dist: str, name: str, extra: str = "") -> str:
    """The version specifier that the installed ``dist`` declares for ``name`` (in its ``extra``), "" when none."""
    try:
        return specifier(distribution(dist).requires or [], name, extra)
    except PackageNotFoundError:
        return ""


def installed_stack() -> Stack:
    return Stack(vllm=_version("vllm"), trl=_version("trl"), transformers=_version("transformers"),
                 vllm_needs_transformers=declared("vllm", "transformers"), trl_accepts_vllm=declared("trl", "vllm", extra="vllm"),
                 unsloth=installed("unsloth"), unsloth_disabled_vllm=unsloth_disabled_vllm())


def _release(version: str) -> Version:
    """``version`` without its local part ("0.24.0+cu129" is 0.24.0), as TRL compares it (trl/import_utils.py)."""
    return Version(Version(version).base_version)


def decide(capability: tuple[int, int] | None, stack: Stack) -> Engine:
    """The engine that generates on a card of ``capability`` (None: no CUDA GPU) with ``stack`` installed; the rules
    and their sources are in this module's docstring. Every reason against vLLM is given at once, with the fix."""
    if capability is None:
        return Engine("transformers", "no CUDA GPU")
    if not stack.unsloth:
        return Engine("transformers", "Unsloth is not installed, and vLLM generates through Unsloth's fast_inference "
                                      "(pip install 'grpo-lite[unsloth]')")
    if stack.unsloth_disabled_vllm:
        return Engine("transformers", f"Unsloth disabled vLLM when it was imported: {stack.unsloth_disabled_vllm}")
    card = f"compute capability {capability[0]}.{capability[1]}"
    if capability < LEAST_CAPABILITY:
        return Engine("transformers", f"{card}: vLLM needs 7.0 or higher (Unsloth's load_vllm)")
    pre_ampere = capability < BELOW_AMPERE
    fix = T4_STACK if pre_ampere else VLLM_STACK.format(trl=stack.trl, accepts=stack.trl_accepts_vllm or "any")
    if stack.vllm is None:
        return Engine("transformers", f"vLLM is not installed; {fix}")
    vllm = _release(stack.vllm)
    problems = []
    if stack.vllm_needs_transformers and stack.transformers and _release(stack.transformers) not in SpecifierSet(stack.vllm_needs_transformers):
        problems.append(f"vLLM {stack.vllm} requires transformers{stack.vllm_needs_transformers} and {stack.transformers} is installed")
    if stack.trl_accepts_vllm and vllm not in SpecifierSet(stack.trl_accepts_vllm):
        problems.append(f"TRL {stack.trl} accepts vLLM {stack.trl_accepts_vllm} (its vllm extra), not {stack.vllm}")
    untested = pre_ampere and vllm not in T4_VLLM
    if untested:
        problems.append(f"Unsloth's notebooks run vLLM 0.11.x on cards below compute capability 8.0 (this one: "
                        f"{card.split()[-1]}; a T4 is 7.5), not {stack.vllm}")
    if problems:
        return Engine("transformers", f"{'; '.join(problems)}; {fix}", untested=untested and len(problems) == 1)
    as_run = ", as Unsloth's notebooks run a T4" if pre_ampere else ""
    return Engine("vLLM", f"vLLM {stack.vllm} with TRL {stack.trl} on {card}{as_run}")


def generation_engine() -> Engine:
    """The engine that generates on this machine, and why (:func:`decide` on this card and the installed packages)."""
    return decide(compute_capability(), installed_stack())
