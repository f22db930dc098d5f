"""Which weights LoRA adapts: what ``target_modules`` means on the model at hand, and where LoRA landed.

LoRA goes on weights of two sorts, found by what they are: linear layers (``torch.nn.Linear``, bitsandbytes' 4-bit
layers included), and experts' parameters: a mixture-of-experts layer that keeps every expert's matrices as one 3-D
``nn.Parameter`` (gpt-oss's ``mlp.experts.gate_up_proj`` and ``down_proj``) has no linear layer to wrap, so PEFT adapts
the parameter itself (``LoraConfig(target_parameters=...)``, peft/tuners/lora/layer.py: ``ParamWrapper``).

The default, ``"all-linear"``, means every such weight of the language model but the output layer and what sits beside
the experts to route tokens to them or gate what they return (a router: a score per expert, held as a linear layer, a
weight, or a linear layer inside a gating module; a gate: one score, Qwen2-MoE's ``shared_expert_gate``): the experts,
as modules or as parameters, the dense MLPs and the shared experts are adapted as any other MLP is, on every
transformers release, however it lays them out. Routers and gates stay as loaded: Unsloth's gpt-oss notebook lists the
attention and MLP projections only, and a router that moves sends tokens to experts trained for others.

A list of names is matched against the model's own weights, as PEFT matches a name (the end of a weight's path; a name
of a module holding weights, ``self_attn``, means them all). A name the model fuses or keeps in its
experts is carried over and said: the list an Unsloth notebook gives for Llama means every attention and MLP
projection, and Phi-3 holds them fused (``qkv_proj``, ``gate_up_proj``), gpt-oss in its experts' parameters. A name
that matches nothing is said too. ``layers_to_transform`` holds for the experts' parameters as for the layers.

What is handed on names each chosen weight by the shortest end of its path that names no other module or parameter,
and that does not begin with an index: a leaf name where the family's are unique (``q_proj``, which Unsloth's fused
kernels look for: unsloth/models/llama.py, ``accepted_modules``), ``altup_projections.0`` where a layer sits in a list
(Gemma 3n), never ``0``, which PEFT would match against whole decoder layers (``layers.0``). Both backends take these
names with every LoRA option: PEFT refuses ``layers_to_transform`` with a regex (peft/tuners/lora/config.py).

A vision-language model's weights are of two towers: the vision tower with its projector, and the language model.
:class:`LayerChoice` picks among them as Unsloth's ``FastVisionModel.get_peft_model`` does (``finetune_vision_layers``,
``finetune_language_layers``, ``finetune_attention_modules``, ``finetune_mlp_modules``), whatever ``target_modules``
names: the language layers only by default, as Unsloth's vision GRPO notebooks ask. A name both towers share
(``q_proj`` in Gemma 3's SigLIP and its language model) is handed on by a longer end that names the chosen tower's
copies only.

On transformers 5, PEFT rewrites a LoRA config's targets for the mixtures of experts transformers 5 re-laid out, as a
transformers 4 adapter would have named them (``peft_expert_targets`` in grpo_lite/machine/stack.py): PEFT 0.21 moves every
``gate_proj``, ``up_proj`` and ``down_proj`` to the experts' parameters, DeepSeek-V3's dense first MLP and its shared
experts included, which then carry no LoRA where transformers 4 gives them some. The targets named here are this model's
own, so PEFT attaches LoRA to them as named (:func:`targets_as_named`), and the log's count of blocks by kind
(:func:`lora_blocks`) is the same on both ends.

A model remembers the run that last trained it (:func:`note_trained`, :func:`trained_in`), so a second ``train()`` on
the same model object says that it goes on from those weights.
"""

from __future__ import annotations

import contextlib
import re
import weakref
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from ..log import logger
from ..machine import stack
from ..run.settings import ConfigError

# A fused projection and the projections it holds, as Phi-3/3.5/4 fuse them (transformers' Phi3Attention, Phi3MLP) and
# gpt-oss's experts hold gate and up (transformers' GptOssExperts)
FUSED_PROJECTIONS = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}

_TRAINED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> the run that last trained it, gone with it

# PEFT's pieces: a module under one of these is part of a LoRA or saved layer, not one of the model's own
PEFT_PARTS = {"lora_A", "lora_B", "lora_dropout", "lora_embedding_A", "lora_embedding_B", "lora_magnitude_vector",
              "modules_to_save", "lora_variant"}
# Where PEFT keeps the module it wraps: looked through, so a weight has the same path before and after PEFT
PEFT_WRAPPED = {"base_layer", "original_module"}
KINDS = ("attention", "MLP", "experts", "vision", "other")
_VISION = re.compile(r"vision|visual|image|multi_modal|mm_projector")  # a vision tower, its projector (Qwen's visual.merger)
_ATTENTION = re.compile(r"attn|attention")
_MLP = re.compile(r"mlp|feed_forward|ffn")


@dataclass(frozen=True)
class LoraTargets:
    """What PEFT is given: ``modules`` for ``target_modules`` (names, or a regex as the user gave it), ``parameters`` for
    ``target_parameters`` (the experts' parameters chosen, maybe none; None where the model keeps no experts so, or for
    a regex, handed on as it is)."""

    modules: list[str] | str
    parameters: list[str] | None = None

    def check(self, lora_dropout: float) -> None:
        """Refuse LoRA options PEFT cannot give an experts' parameter, before PEFT fails on them mid-way."""
        if self.parameters and lora_dropout:
            raise ConfigError(f"load_model: lora_dropout={lora_dropout} with LoRA on the experts' parameters "
                              f"({', '.join(self.parameters)}), which PEFT adapts without dropout (peft/tuners/lora/layer.py, "
                              "ParamWrapper): pass lora_dropout=0, or target_modules that leave the experts out")


@dataclass(frozen=True)
class LayerChoice:
    """Which layers LoRA may go on, by tower and by role, as Unsloth's ``FastVisionModel.get_peft_model`` takes them
    (unsloth/models/vision.py, ``finetune_*_layers``/``finetune_*_modules``). Unsloth defaults
    ``finetune_vision_layers`` to True; grpo-lite to False (the language layers only), which is what Unsloth's vision
    GRPO notebooks pass, and hands Unsloth every flag. A text model has no vision tower: the flags about roles still
    hold there."""

    vision: bool = False
    language: bool = True
    attention: bool = True
    mlp: bool = True

    def keeps(self, path: str) -> bool:
        parts = path.split(".")
        if any(_VISION.search(part) for part in parts) and not self.vision:
            return False
        if not any(_VISION.search(part) for part in parts) and not self.language:
            return False
        if any(_ATTENTION.search(part) for part in parts):
            return self.attention
        return self.mlp or not any(_MLP.search(part) for part in parts)

    def unsloth_options(self) -> dict[str, bool]:
        return {"finetune_vision_layers": self.vision, "finetune_language_layers": self.language,
                "finetune_attention_modules": self.attention, "finetune_mlp_modules": self.mlp}

    def __str__(self) -> str:
        return ", ".join(f"{name}={value}" for name, value in self.unsloth_options().items())


LANGUAGE_LAYERS = LayerChoice()  # the default: every attention and MLP layer of the language model


@dataclass
class _Survey:
    """A model's weights LoRA can adapt, by path (PEFT's wrapping looked through), and what ``all-linear`` leaves out."""

    modules: dict[str, torch.nn.Module]  # every module of the model's own, by path
    weights: dict[str, str]  # path -> kind, in model order
    parameters: set[str]  # the paths in ``weights`` that are experts' parameters
    embeddings: set[str]  # the paths in ``weights`` that are embeddings: adapted only where named
    routers: dict[str, str]  # path -> kind: what picks each token's experts
    output: set[str]  # the output layer's path


def _picks(module: torch.nn.Module, count: int) -> bool:
    """Whether ``module``, beside ``count`` experts, is what routes tokens to them or gates what they return: a score for
    each expert (a router: DeepSeek's and Qwen's ``gate``, Llama 4's ``router``) or one score (the shared expert's
    gate, Qwen2-MoE's ``shared_expert_gate``)."""
    if isinstance(module, torch.nn.Linear):
        return module.out_features in (count, 1)
    return any(p.dim() == 2 and p.shape[0] == count for p in module.parameters(recurse=False))


def _own_path(name: str) -> str:
    return ".".join(part for part in name.split(".") if part not in PEFT_WRAPPED)


def _kind(path: str, experts: bool) -> str:
    parts = path.split(".")
    if any(_VISION.search(part) for part in parts):
        return "vision"
    if experts:
        return "experts"
    if any(_ATTENTION.search(part) for part in parts):
        return "attention"
    return "MLP" if any(_MLP.search(part) for part in parts) else "other"


def _survey(model) -> _Survey:
    modules: dict[str, torch.nn.Module] = {}
    for name, module in model.named_modules():
        if not PEFT_PARTS & set(name.split(".")):
            modules[_own_path(name)] = module  # a wrapped module comes after its wrapper: the model's own one is kept
    weights: dict[str, str] = {}
    parameters: set[str] = set()
    embeddings: set[str] = set()
    experts: dict[str, int] = {}  # experts module -> how many experts
    for path, module in modules.items():
        if isinstance(module, torch.nn.Linear):
            weights[path] = _kind(path, any(part == "experts" for part in path.split(".")))
        elif isinstance(module, torch.nn.Embedding):  # as an Unsloth notebook for continued pretraining names embed_tokens
            weights[path] = _kind(path, False)
            embeddings.add(path)
        elif not isinstance(module, torch.nn.modules.conv._ConvNd):  # a convolution's weight is 3-D too
            for name, parameter in module.named_parameters(recurse=False):
                if parameter.dim() == 3:  # (experts, in, out): every expert's matrix of one projection
                    weights[f"{path}.{name}"] = _kind(path, True)
                    parameters.add(f"{path}.{name}")
                    experts[path] = parameter.shape[0]
            if path.rsplit(".", 1)[-1] == "experts" and isinstance(module, torch.nn.ModuleList):
                experts[path] = len(module)
    children = defaultdict(list)
    for path in modules:
        children[path.rpartition(".")[0]].append(path)
    routers = {}
    for path, count in experts.items():
        for sibling in children[path.rpartition(".")[0]]:
            if sibling in experts:
                continue
            # the sibling and what it holds: Granite 4's router is a linear layer inside a gating module on transformers 4
            # (GraniteMoeHybridTopKGating.layer), a weight of its own on 5 (GraniteMoeHybridTopKRouter)
            for held in [sibling, *(p for p in modules if p.startswith(f"{sibling}."))]:
                if _picks(modules[held], count):
                    routers[held] = _kind(held, False)
    output_layer = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    output = {_own_path(name) for name, module in model.named_modules() if output_layer is not None and module is output_layer}
    return _Survey(modules, weights, parameters, embeddings, routers, output)


def _ends(path: str) -> list[str]:
    """``path``'s ends, shortest first: ``a.b.c`` -> ``c``, ``b.c``, ``a.b.c``."""
    parts = path.split(".")
    return [".".join(parts[i:]) for i in range(len(parts) - 1, -1, -1)]


def _names(chosen: Iterable[str], every: Iterable[str], *, least: int = 1) -> dict[str, str]:
    """A name for each path of ``chosen``: the shortest end of it (``least`` parts at the least) that ends no path of
    ``every`` outside ``chosen``, as PEFT matches a name, and that does not begin with an index."""
    chosen = list(dict.fromkeys(chosen))
    among = Counter(end for path in every for end in _ends(path))
    picked = Counter(end for path in chosen for end in _ends(path))
    names = {}
    for path in chosen:
        ends = _ends(path)
        names[path] = next((end for end in ends[least - 1:] if among[end] == picked[end] and not end.split(".")[0].isdigit()),
                           ends[-1])
    return names


def _parameter_paths(survey: _Survey) -> list[str]:
    return [f"{path}.{name}" for path, module in survey.modules.items() for name, _ in module.named_parameters(recurse=False)]


def _named(survey: _Survey, paths: Sequence[str]) -> dict[str, str]:
    """Each path's name, as :func:`_names` gives it: a layer's among the modules, an experts' parameter's among the
    parameters (with its module's name, ``experts.down_proj``, as PEFT's documentation names one)."""
    layers = [p for p in paths if p not in survey.parameters]
    experts = [p for p in paths if p in survey.parameters]
    return {**_names(layers, survey.modules), **_names(experts, _parameter_paths(survey), least=2)}


def _readable(survey: _Survey, paths: Sequence[str]) -> list[str]:
    named = _named(survey, paths)
    return list(dict.fromkeys(named[path] for path in paths))


def _targets(survey: _Survey, paths: Sequence[str], layers_to_transform: Sequence[int] | None,
             layers_pattern: str | Sequence[str] | None) -> LoraTargets:
    if layers_to_transform is not None:  # PEFT applies it to target_modules only: the experts' names carry it
        paths = [p for p in paths if p not in survey.parameters or _layer(p, layers_pattern) in layers_to_transform]
    named = _named(survey, paths)
    experts = list(dict.fromkeys(named[p] for p in paths if p in survey.parameters))
    return LoraTargets(list(dict.fromkeys(named[p] for p in paths if p not in survey.parameters)),
                       experts if survey.parameters else None)


def _layer(path: str, layers_pattern: str | Sequence[str] | None) -> int | None:
    """The decoder layer ``path`` sits in, read as PEFT reads it for ``layers_to_transform`` (peft/tuners/tuners_utils.py,
    check_target_module_exists: the first index after ``layers_pattern``, else after any module's name)."""
    patterns = [layers_pattern] if isinstance(layers_pattern, str) else list(layers_pattern or [])
    found = ([re.match(rf"(?:^|.*?\.){pattern}\.(?P<idx>\d+)\.", f"{path}.") for pattern in patterns] if patterns
             else [re.match(r".*?\.[^.]*\.(?P<idx>\d+)\.", f"{path}.")])
    return next((int(match["idx"]) for match in found if match), None)


def _matches(path: str, name: str) -> bool:
    """Whether ``name`` names the weight at ``path``: its end, or a module holding it."""
    return f".{name}." in f".{path}."


def weight_names(model) -> list[str]:
    """The names of ``model``'s weights LoRA can adapt, linear layers and experts' parameters, in model order."""
    survey = _survey(model)
    return _readable(survey, [path for path in survey.weights if path not in survey.embeddings])


def lora_targets(model, target_modules: str | Sequence[str], layers_to_transform: Sequence[int] | None = None,
                 layers_pattern: str | Sequence[str] | None = None, choice: LayerChoice = LANGUAGE_LAYERS) -> LoraTargets:
    """``target_modules`` as this model's weights: ``"all-linear"`` as every weight LoRA can adapt but the output layer
    and the experts' router; another string (a regex) as it is; a list as the weights it names, a name the model fuses
    or keeps in its experts carried over, said in one line, and the names matching nothing said. Experts' parameters
    are named within ``layers_to_transform``: PEFT applies it to ``target_modules`` only. ``choice`` keeps the towers and
    roles it names (a regex is handed on as it is). Raises :class:`ConfigError` when no name matches, or ``choice``
    leaves none of the weights named."""
    if isinstance(target_modules, str) and target_modules.lower() != "all-linear":
        return LoraTargets(target_modules)
    survey = _survey(model)
    layers = (layers_to_transform, layers_pattern)
    if isinstance(target_modules, str):
        left_out = survey.output | survey.embeddings | set(survey.routers)
        return _targets(survey, _chosen(survey, [path for path in survey.weights if path not in left_out], choice,
                                        target_modules), *layers)
    chosen: list[str] = []
    carried: dict[str, list[str]] = {}  # a name given -> the weights it was carried over to
    missing = []
    for name in target_modules:
        named = [path for path in survey.weights if _matches(path, name)]
        whole = next((whole for whole, parts in FUSED_PROJECTIONS.items() if name in parts), None)
        if not named and whole is not None:
            named = [path for path in survey.weights if _matches(path, whole)]
            carried.update({name: named} if named else {})
        elif named and set(named) <= survey.parameters and "experts" not in name.split("."):  # an MLP's name: experts hold it
            carried[name] = named
        chosen += named
        if not named:
            missing.append(name)
    if not chosen:
        raise ConfigError(f"load_model: none of the LoRA target_modules {list(target_modules)} is a layer of this model; its "
                          f"layers are {', '.join(weight_names(model))}: pass some of them, or target_modules='all-linear'")
    if carried:
        by_target: dict[tuple[str, ...], list[str]] = {}
        for name, paths in carried.items():
            by_target.setdefault(tuple(paths), []).append(name)
        said = []
        for paths, names in by_target.items():
            held = "the experts' parameters" if set(paths) <= survey.parameters else "fused"
            said.append(f"{', '.join(names)} to {', '.join(_readable(survey, paths))} ({held})")
        logger.info(f"target_modules: carried over to this model's own weights: {'; '.join(said)}")
    if missing:
        logger.warning(f"target_modules: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in this model, "
                       f"whose layers are {', '.join(weight_names(model))}; LoRA adapts the others")
    chosen = _chosen(survey, list(dict.fromkeys(path for path in survey.weights if path in chosen)), choice, target_modules)
    return _targets(survey, chosen, *layers)


def _chosen(survey: _Survey, paths: list[str], choice: LayerChoice, target_modules) -> list[str]:
    """``paths`` that ``choice`` keeps; a :class:`ConfigError` naming the flags where it keeps none."""
    kept = [path for path in paths if choice.keeps(path)]
    if paths and not kept:
        towers = sorted({"vision" if survey.weights[path] == "vision" else "language" for path in paths})
        raise ConfigError(f"load_model: target_modules={target_modules!r} with {choice} leaves no layer for LoRA (the weights "
                          f"named are in the {' and '.join(towers)} layers): set finetune_vision_layers, "
                          "finetune_language_layers, finetune_attention_modules or finetune_mlp_modules to True for some of them")
    return kept


def _adapted_paths(model, survey: _Survey) -> list[str]:
    from peft.tuners.lora import LoraLayer

    adapted = set()
    for name, module in model.named_modules():
        if isinstance(module, LoraLayer) and not PEFT_PARTS & set(name.split(".")):
            parameter = getattr(module, "parameter_name", None)  # PEFT's ParamWrapper: LoRA on one parameter
            adapted.add(f"{_own_path(name)}.{parameter}" if parameter else _own_path(name))
    return [path for path in survey.weights if path in adapted]


def _shared_names(survey: _Survey) -> dict[str, str]:
    """Each weight's and router's name as the copies of it in every layer share it: ``q_proj``, ``experts.down_proj``,
    ``altup_projections.0``."""
    return _named(survey, [*survey.weights, *survey.routers])


def adapted_layers(model) -> list[str]:
    """The names of the weights that carry LoRA, linear layers and experts' parameters, in model order, each as the
    copies of it in every layer share it (which layers: ``layers_to_transform``)."""
    survey = _survey(model)
    shared = _shared_names(survey)
    return list(dict.fromkeys(shared[path] for path in _adapted_paths(model, survey)))


def _with_kind(kind: str, name: str) -> str:
    return name if name.startswith(f"{kind}.") else f"{kind} {name}"  # "experts.down_proj", not "experts experts.down_proj"


def _block(path: str, survey: _Survey) -> str:
    """The block a weight belongs to: the module holding it (``layers.0.self_attn``, ``layers.1.mlp.shared_experts``), or,
    for an expert's weight, the mixture of experts around them (``layers.1.mlp``), whether the experts are modules
    (``experts.0.gate_proj``), parameters of one module (``experts.gate_up_proj``) or parameters of one module each
    (Granite 4's ``input_linear.weight`` on transformers 4)."""
    parts = path.split(".")
    if survey.weights[path] == "experts":
        if "experts" in parts:
            return ".".join(parts[:parts.index("experts")])
        return path.rpartition(".")[0].rpartition(".")[0]
    return path.rpartition(".")[0]


def _blocks(survey: _Survey, adapted: Sequence[str]) -> dict[str, int]:
    blocks = defaultdict(set)
    for path in adapted:
        blocks[survey.weights[path]].add(_block(path, survey))
    return {kind: len(blocks[kind]) for kind in KINDS if blocks[kind]}


def lora_blocks(model) -> dict[str, int]:
    """How many blocks of each kind (attention, MLP, experts, vision, other) carry LoRA: the same for a model on every
    transformers release, however each release lays out its experts."""
    survey = _survey(model)
    return _blocks(survey, _adapted_paths(model, survey))


def describe_lora(model) -> str:
    """Which weights carry LoRA and which do not, by kind (attention, MLP, experts, vision, other) with the blocks of
    each kind they sit in (:func:`lora_blocks`), each left out with why, in one line."""
    survey = _survey(model)
    shared = _shared_names(survey)
    adapted = _adapted_paths(model, survey)
    by_kind = defaultdict(list)
    for path in adapted:
        by_kind[survey.weights[path]].append(shared[path])
    blocks = _blocks(survey, adapted)
    on = [f"{kind} ({', '.join(dict.fromkeys(by_kind[kind]))}) in {blocks[kind]} block{'s' if blocks[kind] > 1 else ''}"
          for kind in KINDS if by_kind[kind]]
    copies = Counter(shared.values())
    left_out = Counter(shared[path] for path in shared if path not in adapted)
    vision_adapted = any(survey.weights[path] == "vision" for path in adapted)
    reasons = {}
    for path, name in shared.items():
        if path in adapted or path in survey.embeddings:
            continue
        if survey.weights.get(path) == "vision" and not vision_adapted:
            reasons["\0vision"] = "the vision tower (finetune_vision_layers=True adapts it)"
            continue
        if name in reasons:
            continue
        if path in survey.output:
            reasons[name] = f"{name} (the output layer: modules_to_save=['{name}'] trains it whole)"
        elif path in survey.routers:
            reasons[name] = (f"{survey.routers[path]} {name} (the experts' router: it stays as loaded, so each token goes "
                             "to the experts trained for it)")
        elif left_out[name] < copies[name]:
            reasons[name] = (f"{_with_kind(survey.weights[path], name)} in {left_out[name]} of its {copies[name]} places "
                             "(not in target_modules or layers_to_transform)")
        else:
            reasons[name] = f"{_with_kind(survey.weights[path], name)} (not in target_modules)"
    return f"LoRA on {', '.join(on)}" + (f"; left out: {', '.join(reasons.values())}" if reasons else "")


@contextlib.contextmanager
def targets_as_named() -> Iterator[None]:
    """While PEFT attaches or loads LoRA inside the block, it takes a config's targets as they are named, where transformers
    5 would have PEFT rewrite them for the mixtures of experts it re-laid out (``peft_expert_targets``;
    peft/tuners/tuners_utils.py, BaseTuner.inject_adapter, calls peft/utils/transformers_weight_conversion.py,
    convert_peft_config_for_transformers): grpo-lite names this model's own weights, and saves an adapter so."""
    if not stack.newer("peft_expert_targets"):
        yield
        return
    from peft.utils import transformers_weight_conversion as conversion

    convert = conversion.convert_peft_config_for_transformers
    conversion.convert_peft_config_for_transformers = lambda peft_config, model, conversions: None
    try:
        yield
    finally:
        conversion.convert_peft_config_for_transformers = convert


def note_trained(*models, run: str) -> None:
    """Remember that ``run`` (its folder and steps) trained ``models``: the model given to ``train`` and the trainer's,
    where they are two objects."""
    for model in models:
        try:
            _TRAINED[model] = run
        except TypeError:  # not weak-referenceable: nothing to remember it by
            pass


def trained_in(model) -> str | None:
    """The weights ``model`` carries from a run in this process, ``"the LoRA weights trained in <folder> (N steps)"``;
    None for a model no run has trained."""
    try:
        run = _TRAINED.get(model)
    except TypeError:
        return None
    return None if run is None else f"the {'LoRA ' if hasattr(model, 'peft_config') else ''}weights trained in {run}"
