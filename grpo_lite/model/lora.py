"""Which layers LoRA adapts: what ``target_modules`` means on the model at hand, and where LoRA landed.

The default, ``"all-linear"``, means what it means to PEFT: every linear layer but the output layer, under whatever
names the family gives them (Phi-3/3.5/4's fused ``qkv_proj`` and ``gate_up_proj`` included). It is handed on as those
layers' names, which both backends take with every LoRA option: PEFT refuses ``layers_to_transform`` with a string
(peft/tuners/lora/config.py), and Unsloth's ``get_peft_model`` gives names in its list to PEFT as they are, warning only
that names other than Llama's projections run without its fused LoRA kernels (unsloth/models/llama.py: its
``accepted_modules``; vision.py, the path of Gemma 3 and Phi-3, hands an explicit list on too).

A list of names is matched against the model's own layers. A name the model fuses into another (``q_proj`` into
Phi-3's ``qkv_proj``) is carried over to the fused layer and said: the list an Unsloth notebook gives for Llama means
every attention and MLP projection, and Phi-3 holds them fused. A name that matches nothing is said too.

A model remembers the run that last trained it (:func:`note_trained`, :func:`trained_in`), so a second ``train()`` on
the same model object says that it goes on from those weights.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import torch

from ..log import logger
from ..run.settings import ConfigError

# A fused projection and the projections it holds, as Phi-3/3.5/4 fuse them (transformers' Phi3Attention, Phi3MLP)
FUSED_PROJECTIONS = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}

# Where PEFT keeps a wrapped layer's pieces: a module under one of these is part of a LoRA or saved layer, not a layer
_TRAINED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> the run that last trained it, gone with it

PEFT_PARTS = {"base_layer", "lora_A", "lora_B", "lora_dropout", "lora_embedding_A", "lora_embedding_B",
              "lora_magnitude_vector", "original_module", "modules_to_save"}


def _leaf(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def linear_layers(model) -> list[str]:
    """The leaf names of ``model``'s linear layers (bitsandbytes' 4-bit layers are ``torch.nn.Linear`` too), in
    model order, PEFT's own pieces left out."""
    names = [_leaf(name) for name, module in model.named_modules()
             if isinstance(module, torch.nn.Linear) and not PEFT_PARTS & set(name.split("."))]
    return list(dict.fromkeys(names))


def _output_layers(model) -> set[str]:
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return {_leaf(name) for name, module in model.named_modules() if output is not None and module is output}


def lora_targets(model, target_modules: str | Sequence[str]) -> str | list[str]:
    """``target_modules`` as this model names its layers: ``"all-linear"`` as the names of its linear layers but the
    output layer; another string (a regex) as it is; a list with each name fused in this model carried over to its
    fused layer, and the names matching nothing said. Raises :class:`ConfigError` when no name matches."""
    if isinstance(target_modules, str):
        if target_modules.lower() != "all-linear":
            return target_modules
        output = _output_layers(model)
        return [name for name in linear_layers(model) if name not in output]
    present = {_leaf(name) for name, _ in model.named_modules()}
    targets: list[str] = []
    carried: dict[str, list[str]] = {}
    missing = []
    for name in target_modules:
        fused = next((whole for whole, parts in FUSED_PROJECTIONS.items() if name in parts and whole in present), None)
        if name in present:
            targets.append(name)
        elif fused is not None:
            carried.setdefault(fused, []).append(name)
            targets.append(fused)
        else:
            missing.append(name)
    linear = linear_layers(model)
    if not targets:
        raise ConfigError(f"load_model: none of the LoRA target_modules {list(target_modules)} is a layer of this model; its "
                          f"linear layers are {', '.join(linear)}: pass some of them, or target_modules='all-linear'")
    for fused, parts in carried.items():
        logger.info(f"target_modules: this model fuses {', '.join(parts)} into {fused}, so LoRA adapts {fused}")
    if missing:
        logger.warning(f"target_modules: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in this model, "
                       f"whose linear layers are {', '.join(linear)}; LoRA adapts the others")
    return list(dict.fromkeys(targets))


def adapted_layers(model) -> list[str]:
    """The leaf names of the layers that carry LoRA, in model order."""
    from peft.tuners.lora import LoraLayer

    return list(dict.fromkeys(_leaf(name) for name, module in model.named_modules() if isinstance(module, LoraLayer)))


def describe_lora(model) -> str:
    """Which layers carry LoRA and which linear layers do not, each with why, in one line."""
    adapted = adapted_layers(model)
    output_names = _output_layers(model)
    left_out = [name for name in linear_layers(model) if name not in adapted]
    reasons = [f"{name} (the output layer: modules_to_save=['{name}'] trains it whole)" if name in output_names
               else f"{name} (not in target_modules)" for name in left_out]
    return f"LoRA on {', '.join(adapted)}" + (f"; left out: {', '.join(reasons)}" if reasons else "")


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
