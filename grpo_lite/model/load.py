"""load_model(): pick the backend that can work here, load the model, attach LoRA.

Backends, best first:
- ``unsloth``: a CUDA GPU and Unsloth installed. 4-bit weights, Unsloth's gradient checkpointing, and vLLM
  generation (``fast_inference``) where :mod:`grpo_lite.machine.engine` decides vLLM can generate (the card, the
  installed vLLM, TRL and transformers).
- ``transformers``: transformers + PEFT LoRA, 4-bit through bitsandbytes when installed. On a CUDA GPU in
  its 16-bit dtype; asked for on a CPU, fp32, and 4-bit through bitsandbytes' CPU kernels.
- ``cpu``: no GPU. fp32, no quantization; for tiny models and tests.

Unsloth patches transformers, TRL and PEFT when it is imported, so it must come first: importing
``grpo_lite`` imports it (see :func:`grpo_lite.machine.device.import_unsloth_first`) before anything imports trl.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass, replace
from typing import Any

from ..errors import UserError
from ..log import logger
from ..machine.device import cuda_available, half_dtype, installed
from ..machine.engine import generation_engine
from ..run.settings import BACKEND_CHOICES, LORA_TARGET_MODULES, ConfigError, LoadSettings, model_problems
from . import fit
from .lora import LANGUAGE_LAYERS, LayerChoice, adapted_layers, describe_lora, lora_targets, targets_as_named
from .unsloth_options import for_backend

DEFAULT_VLLM_SHARE = 0.5  # Unsloth's default gpu_memory_utilization, for models the planner cannot read


class BackendError(UserError, RuntimeError):
    """The requested backend cannot work on this machine; the message names what is missing."""


@dataclass(frozen=True)
class Backend:
    """Which backend loaded the model, and why."""

    name: str
    reason: str
    load_in_4bit: bool
    fast_inference: bool
    gpu_memory_utilization: float | None = None  # vLLM's share of the GPU, with fast_inference

    def __str__(self) -> str:
        return f"{self.name} ({self.reason})"


@dataclass(frozen=True)
class LoadedModel:
    """What :func:`load_model` learned about a model it loaded: the run reads it (:func:`loaded_as`) to record the
    load settings, size vLLM's share and name the backend."""

    name: str
    settings: LoadSettings
    backend: Backend
    # the weights that carry LoRA (linear layers, experts' parameters), each by the name its copies in every layer share
    lora_modules: tuple[str, ...] = ()


_LOADED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> LoadedModel, gone with the model


def loaded_as(model) -> LoadedModel | None:
    """How ``model`` was loaded, or None for a model :func:`load_model` did not load (built by hand, or copied)."""
    try:
        return _LOADED.get(model)
    except TypeError:  # not weak-referenceable: not a model load_model returned
        return None


def _fast_inference(requested: bool | str, backend: str) -> tuple[bool, str]:
    """Whether generation goes through vLLM, and why (the engine and its reason, from
    :func:`grpo_lite.machine.engine.generation_engine`)."""
    if requested not in (True, False, "auto"):
        raise BackendError(f"fast_inference={requested!r}: use True, False or 'auto'")
    if requested is False:
        return False, "fast_inference off: transformers generates"
    if backend != "unsloth":
        if requested is True:
            raise BackendError("fast_inference=True (vLLM generation) works through backend='unsloth' only, on a CUDA GPU")
        return False, "fast_inference off: transformers generates (vLLM generation needs the Unsloth backend)"
    engine = generation_engine()
    if requested is True and not engine.vllm:
        if not engine.untested:
            raise BackendError(f"fast_inference=True needs vLLM: {engine.reason}")
        logger.warning(f"fast_inference=True: vLLM generates as asked, though {engine.reason}")
        return True, f"fast_inference on as asked: vLLM generates ({engine.reason})"
    return engine.vllm, f"fast_inference {'on' if engine.vllm else 'off'}: {engine}"


def choose_backend(backend: str = "auto", *, load_in_4bit: bool = True, fast_inference: bool | str = "auto") -> Backend:
    """Decide the backend without loading anything; raises :class:`BackendError` for one that cannot work."""
    if backend not in BACKEND_CHOICES:
        raise BackendError(f"backend={backend!r} is not one of {BACKEND_CHOICES}")
    cuda = cuda_available()
    has_unsloth, has_bnb = installed("unsloth"), installed("bitsandbytes")

    if backend == "unsloth":
        if not cuda:
            raise BackendError(
                "backend='unsloth' needs a CUDA GPU, and torch.cuda.is_available() is False here. "
                "Use backend='auto' (CPU on this machine) or run on a GPU runtime."
            )
        if not has_unsloth:
            raise BackendError("backend='unsloth' needs Unsloth: pip install 'grpo-lite[unsloth]'")
    if backend == "cpu" or (backend == "auto" and not cuda):
        _fast_inference(fast_inference, "cpu")
        why = "requested" if backend == "cpu" else "no CUDA GPU found (torch.cuda.is_available() is False)"
        return Backend("cpu", f"{why}; fp32 weights, no 4-bit quantization", False, False)
    if backend == "unsloth" or (backend == "auto" and has_unsloth):
        vllm, vllm_why = _fast_inference(fast_inference, "unsloth")
        why = "requested" if backend == "unsloth" else "CUDA GPU and Unsloth installed"
        return Backend("unsloth", f"{why}; {vllm_why}", load_in_4bit, vllm)
    _fast_inference(fast_inference, "transformers")
    if load_in_4bit and not has_bnb:
        where = "CUDA GPU" if cuda else "CPU"
        return Backend("transformers", f"{where}; bitsandbytes not installed, so {'16-bit' if cuda else 'fp32'} weights "
                       "(pip install bitsandbytes for 4-bit)", False, False)
    if not cuda:
        quantization = "4-bit through bitsandbytes' CPU kernels" if load_in_4bit else "no quantization"
        return Backend("transformers", f"requested; no CUDA GPU, so fp32 compute on CPU, {quantization}", load_in_4bit, False)
    why = "requested" if backend == "transformers" else "CUDA GPU, Unsloth not installed"
    return Backend("transformers", why + ("; 4-bit through bitsandbytes" if load_in_4bit else ""), load_in_4bit, False)


def unsloth_vllm_tier(card_gb: float) -> float:
    """The largest share Unsloth itself gives a colocated vLLM on a card of ``card_gb`` (unsloth_zoo/vllm_utils.py,
    ``standby_target_gpu_util`` for vLLM >= 0.11, by a tenth of the card): it lowered the tiers of cards of 24 GB or
    less after 0.875 left too little for training and the engine failed at wake-up."""
    tenth = card_gb * 0.1
    for at_least, share in ((4.0, 0.925), (2.5, 0.9), (2.0, 0.825), (1.4, 0.8), (1.0, 0.775)):
        if tenth >= at_least:
            return share
    return 0.75


def vllm_share(model_name: str, memory_gb: float | None = None, *, num_generations: int | None = None,
               max_completion_length: int | None = None) -> tuple[float, str]:
    """``gpu_memory_utilization`` for a colocated vLLM engine: the share of the card (default: this GPU) that
    training leaves free by the memory planner (vLLM's pool holds the weights too), for a run of this GPU's
    preset unless the run's ``num_generations`` and ``max_completion_length`` are given. Capped at Unsloth's own
    tier for the card (:func:`unsloth_vllm_tier`) until a GPU measures the real peak (docs/benchmarks.md)."""
    from ..machine.planner import PlanError, training_memory_gb
    from ..run.presets import auto_preset
    from ..run.settings import resolve_options

    preset = resolve_options(auto_preset())
    try:
        training_gb, card_gb = training_memory_gb(
            model_name, memory_gb, num_generations=num_generations or preset["num_generations"],
            max_completion_length=max_completion_length or preset["max_completion_length"])
    except PlanError:
        return DEFAULT_VLLM_SHARE, f"gpu_memory_utilization {DEFAULT_VLLM_SHARE} (the planner does not know {model_name})"
    share = max(0.1, min(0.9, int(20 * (card_gb - training_gb - 1.0) / card_gb) / 20))  # 1 GB of slack, in 5% steps
    why = f"training needs ~{training_gb:.1f} of {card_gb:.1f} GB by the planner"
    tier = unsloth_vllm_tier(card_gb)
    if share > tier:
        share, why = tier, f"{why}; capped at Unsloth's own share for a {card_gb:.0f} GB card"
    return share, f"gpu_memory_utilization {share} ({why})"


def load_model(
    model_name: str | os.PathLike,
    *,
    max_seq_length: int = 2048,
    load_in_4bit: bool = True,
    fast_inference: bool | str = "auto",
    lora_rank: int | None = 16,
    lora_alpha: int | None = None,
    target_modules: str | tuple[str, ...] | list[str] = LORA_TARGET_MODULES,
    gpu_memory_utilization: float | str = "auto",
    backend: str = "auto",
    seed: int = 3407,
    lora_dropout: float = 0.0,
    bias: str = "none",
    use_rslora: bool = False,
    init_lora_weights: bool | str = True,
    modules_to_save: list[str] | None = None,
    layers_to_transform: list[int] | int | None = None,
    layers_pattern: str | None = None,
    ensure_weight_tying: bool | None = None,
    chat_template: str | None = None,
    finetune_vision_layers: bool = False,
    finetune_language_layers: bool = True,
    finetune_attention_modules: bool = True,
    finetune_mlp_modules: bool = True,
    **model_kwargs: Any,
):
    """Load ``model_name`` (hub id or local folder) with LoRA adapters ready for GRPO.

    Returns ``(model, tokenizer)`` and logs which backend was used and why; :func:`loaded_as` gives the model's
    :class:`LoadedModel` (the name, as text where a path was given, the arguments as given, the backend), which
    :func:`grpo_lite.train` records in ``run.yaml``. ``lora_rank=None`` trains all weights (no LoRA).
    ``lora_alpha`` defaults to ``2 * lora_rank``; ``seed`` seeds the adapters' initial weights. ``target_modules``:
    ``"all-linear"`` (every linear layer but the output layer, whatever the family calls them: Phi's fused
    ``qkv_proj`` and ``gate_up_proj`` too, and the experts' parameters of a mixture of experts that keeps them as
    parameters, gpt-oss's, its router left as loaded), or layer names, a name the model fuses or keeps in its experts
    carried over (grpo_lite.model.lora); the log says, by kind (attention, MLP, experts, vision, other), which weights
    carry LoRA and which do not, and why.
    ``max_seq_length`` bounds prompt + completion: ``train`` refuses a longer run before it starts (Unsloth
    also sizes its RoPE cache and vLLM by it). ``fast_inference="auto"`` generates through vLLM when the
    Unsloth backend is chosen and :func:`grpo_lite.machine.engine.generation_engine` says vLLM can generate here
    (a T4 with the stack Unsloth's notebooks install there, vLLM 0.11.2; a newer card with a vLLM the installed TRL
    accepts); the log line ``backend=...`` says which engine generates and why; ``gpu_memory_utilization="auto"``
    then gives vLLM what training leaves free, by the memory planner. Extra keyword arguments go to the
    backend's ``from_pretrained``; those only Unsloth's takes (``offload_embedding``, ...) are left out, said, where
    another backend loads, or refused where they would change what trains (:mod:`grpo_lite.model.unsloth_options`).

    The LoRA options of Unsloth's ``FastLanguageModel.get_peft_model`` that PEFT's ``LoraConfig`` also has
    (``lora_dropout``, ``bias``, ``use_rslora``, ``init_lora_weights``, ``modules_to_save``, ``layers_to_transform``,
    ``layers_pattern``, ``ensure_weight_tying``) mean the same through either backend, with both libraries'
    defaults. ``chat_template`` replaces the tokenizer's chat template: a Jinja string, or, where Unsloth is
    imported, the name of one of its templates (``unsloth.chat_templates.get_chat_template``).

    A vision-language model (its config has a ``vision_config``: Qwen2.5-VL, Gemma 3 4B and up, ...) loads as an
    image-text-to-text model (Unsloth's ``FastVisionModel``; elsewhere ``AutoModelForImageTextToText``) and comes back
    with its processor in the tokenizer's place: TRL's GRPOTrainer takes it as ``processing_class``. Its processor needs
    torchvision (docs/stacks.md). LoRA goes on the language layers; ``finetune_vision_layers=True`` adds the vision
    tower, and ``finetune_language_layers``, ``finetune_attention_modules``, ``finetune_mlp_modules`` narrow the rest, as
    Unsloth's ``FastVisionModel.get_peft_model`` takes them (:class:`grpo_lite.model.lora.LayerChoice`).
    """
    if isinstance(model_name, os.PathLike):  # a folder as a pathlib.Path: the name run.yaml records is its text
        model_name = os.fspath(model_name)
    if isinstance(layers_to_transform, int) and not isinstance(layers_to_transform, bool):
        layers_to_transform = [layers_to_transform]  # PEFT and Unsloth take one index as a one-item list
    lora_options = dict(lora_dropout=lora_dropout, bias=bias, use_rslora=use_rslora, init_lora_weights=init_lora_weights,
                        modules_to_save=list(modules_to_save) if isinstance(modules_to_save, tuple) else modules_to_save,
                        layers_to_transform=list(layers_to_transform) if isinstance(layers_to_transform, tuple) else layers_to_transform,
                        layers_pattern=layers_pattern, ensure_weight_tying=ensure_weight_tying)
    settings = LoadSettings(backend=backend, max_seq_length=max_seq_length, load_in_4bit=load_in_4bit,
                            fast_inference=fast_inference, lora_rank=lora_rank, lora_alpha=lora_alpha,
                            target_modules=list(target_modules) if isinstance(target_modules, tuple) else target_modules,
                            gpu_memory_utilization=gpu_memory_utilization, seed=seed, **lora_options,
                            chat_template=chat_template, finetune_vision_layers=finetune_vision_layers,
                            finetune_language_layers=finetune_language_layers,
                            finetune_attention_modules=finetune_attention_modules,
                            finetune_mlp_modules=finetune_mlp_modules, from_pretrained=dict(model_kwargs))
    choice_of_layers = LayerChoice(finetune_vision_layers, finetune_language_layers, finetune_attention_modules,
                                   finetune_mlp_modules)
    problems = model_problems(model_name) + settings.problems()
    if problems:
        raise ConfigError("\n".join(f"load_model: {problem}" for problem in problems))
    _check_chat_template(chat_template)
    choice = choose_backend(backend, load_in_4bit=load_in_4bit, fast_inference=fast_inference)
    model_kwargs = for_backend(model_kwargs, choice.name, load_in_4bit=choice.load_in_4bit)
    if choice.load_in_4bit and not lora_rank:
        raise BackendError(
            "load_in_4bit=True with lora_rank=None: 4-bit weights cannot be trained themselves, only LoRA adapters on "
            "top of them; pass lora_rank=16 (or another rank), or load_in_4bit=False to train every weight"
        )
    if choice.fast_inference:
        if gpu_memory_utilization == "auto":
            gpu_memory_utilization, why = vllm_share(model_name)
        else:
            why = f"gpu_memory_utilization {gpu_memory_utilization}"
        choice = replace(choice, reason=f"{choice.reason}, {why}", gpu_memory_utilization=gpu_memory_utilization)
    elif gpu_memory_utilization != "auto":
        logger.warning(f"gpu_memory_utilization={gpu_memory_utilization} is ignored: it is vLLM's share of the GPU, and "
                       f"this model generates without vLLM ({choice})")
    vision = is_vision_language(model_name)
    if vision:
        _check_torchvision(model_name)
    findings = fit.judge_unloaded(model_name, vision=vision)  # what the installed TRL and transformers cannot train
    fit.refuse(findings, "load_model")
    logger.info(f"backend={choice}" + ("; a vision-language model: it loads with its processor" if vision else ""))
    for finding in findings:
        logger.info(f"fitted to this stack: {finding}")
    alpha = lora_alpha if lora_alpha is not None else 2 * (lora_rank or 0)
    if choice.name == "unsloth":
        model, tokenizer = _load_unsloth(
            model_name, choice, max_seq_length, lora_rank, alpha, target_modules, gpu_memory_utilization, seed, model_kwargs,
            lora_options, vision=vision, layers=choice_of_layers
        )
    else:
        model, tokenizer = _load_transformers(model_name, choice, lora_rank, alpha, target_modules, seed, model_kwargs,
                                              lora_options, vision=vision, layers=choice_of_layers)
        model.max_seq_length = max_seq_length  # train() checks prompt + completion against it, as Unsloth's loader sets it
    fit.fit_for_generation(model, findings)
    if chat_template is not None:
        tokenizer = _with_chat_template(tokenizer, chat_template)
    text = getattr(tokenizer, "tokenizer", tokenizer)  # a processor holds its tokenizer
    if text.pad_token is None:
        text.pad_token = text.eos_token
    if lora_rank:
        logger.info(describe_lora(model))
    _LOADED[model] = LoadedModel(model_name, settings, choice, tuple(adapted_layers(model)) if lora_rank else ())
    return model, tokenizer


def is_vision_language(model_name: str) -> bool:
    """Whether ``model_name``'s config describes a vision-language model (it has a ``vision_config``). False where the
    config cannot be read here (offline, a name only Unsloth resolves): the backend's own loader then says why."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model_name)
    except (OSError, ValueError):
        return False
    return getattr(config, "vision_config", None) is not None


def _check_torchvision(model_name: str) -> None:
    """Refuse, before the model loads, a vision-language model whose processor cannot load here: transformers 5 builds
    every image processor through torchvision, and Qwen-VL's processors a video processor that needs it on 4.x too."""
    try:
        import torchvision  # noqa: F401
    except Exception as error:  # not installed, or a build for another torch that fails to load its operators
        raise BackendError(
            f"load_model: {model_name} is a vision-language model, and its processor needs torchvision, which "
            f"{'is not installed' if isinstance(error, ModuleNotFoundError) else f'fails to import here ({error})'}: install "
            "the torchvision release built with your torch (torch 2.9.0: torchvision 0.24.0; torch 2.13.0: 0.28.0, whose "
            "wheel needs torch's CUDA build, not its CPU-only one; docs/stacks.md)"
        ) from error


def _is_jinja(chat_template: str) -> bool:
    return "{%" in chat_template or "{{" in chat_template


def _check_chat_template(chat_template: str | None) -> None:
    """Refuse, before the model loads, a template name where Unsloth's ``get_chat_template`` cannot resolve it."""
    import sys

    if chat_template is None or _is_jinja(chat_template):
        return
    if sys.modules.get("unsloth") is None:  # grpo_lite imports it first on a GPU machine; on a CPU, never
        raise ConfigError(
            f"load_model: chat_template={chat_template!r} is not a Jinja template (no {{% or {{{{ in it), and template names "
            "are Unsloth's (unsloth.chat_templates.get_chat_template), which is not loaded here: pass the Jinja text itself"
        )
    from unsloth.chat_templates import CHAT_TEMPLATES

    if chat_template not in CHAT_TEMPLATES:  # get_chat_template looks the name up in it (unsloth/chat_templates.py)
        raise ConfigError(f"load_model: chat_template={chat_template!r} is not one of Unsloth's templates "
                          f"({', '.join(sorted(CHAT_TEMPLATES))}), nor a Jinja template")


def _with_chat_template(tokenizer, chat_template: str):
    """``tokenizer`` with ``chat_template``: a Jinja string as it is, else the Unsloth template of that name."""
    if _is_jinja(chat_template):
        tokenizer.chat_template = chat_template
        return tokenizer
    from unsloth.chat_templates import get_chat_template

    return get_chat_template(tokenizer, chat_template=chat_template)


def _load_unsloth(model_name, choice, max_seq_length, lora_rank, alpha, target_modules, gpu_memory_utilization, seed, kwargs,
                  lora_options=None, *, vision=False, layers=LANGUAGE_LAYERS):
    import unsloth  # noqa: F401  (must be imported before trl / transformers / peft are used)

    if vision:  # FastVisionModel (unsloth/models/loader.py, a FastModel) loads an image-text-to-text model and its
        # processor; its get_peft_model (unsloth/models/vision.py) takes the finetune_* flags
        from unsloth import FastVisionModel as loader
    else:
        from unsloth import FastLanguageModel as loader
    vllm = {"max_lora_rank": lora_rank or 16, "gpu_memory_utilization": gpu_memory_utilization} if choice.fast_inference else {}
    model, tokenizer = loader.from_pretrained(
        model_name,
        max_seq_length=max_seq_length,
        load_in_4bit=choice.load_in_4bit,
        fast_inference=choice.fast_inference,
        **vllm,  # vLLM's engine options (unsloth/models/llama.py reads them only with fast_inference)
        **kwargs,
    )
    if lora_rank:
        options = lora_options or {}
        targets = lora_targets(model, target_modules, options.get("layers_to_transform"), options.get("layers_pattern"),
                               layers)
        targets.check(options.get("lora_dropout", 0.0))
        with targets_as_named():
            model = loader.get_peft_model(
                model,
                r=lora_rank,
                lora_alpha=alpha,
                target_modules=_unsloth_vision_targets(target_modules, targets.modules) if vision else targets.modules,
                # Given None, both get_peft_model guess the experts from the names in target_modules (unsloth/models/_utils.py,
                # get_moe_target_parameters; called from llama.py and vision.py, the path of gpt-oss); given a list, even an
                # empty one, they take it (vision.py scopes it to the text model, _scope_parameter_targets_to_core): the
                # same weights as PEFT's. None where the model keeps no experts as parameters: nothing to guess there
                target_parameters=targets.parameters,
                use_gradient_checkpointing="unsloth",
                random_state=seed,
                **options,  # each a named parameter of get_peft_model (unsloth/models/llama.py), with its default there
                # Unsloth's own default for finetune_vision_layers is True: every flag is handed over, so both backends agree
                **(layers.unsloth_options() if vision else {}),
            )
    return model, tokenizer


def _unsloth_vision_targets(given, modules):
    """``target_modules`` for FastVisionModel.get_peft_model (unsloth/models/vision.py), which picks the towers and roles
    itself from the finetune_* flags, by its own name tags (unsloth_zoo/peft_utils.py, get_peft_regex): None for
    "all-linear", as its "all-linear" turns every flag on; else the chosen weights' leaf names, as it routes a list of
    leaf names through the same filter (a qualified name it would not scope)."""
    if isinstance(given, str) and given.lower() == "all-linear":
        return None
    if isinstance(modules, str):  # a regex: handed on as it is
        return modules
    return list(dict.fromkeys(name.rsplit(".", 1)[-1] for name in modules))


def _load_transformers(model_name, choice, lora_rank, alpha, target_modules, seed, kwargs, lora_options=None, *,
                       vision=False, layers=LANGUAGE_LAYERS):
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

    tokenizer = (AutoProcessor if vision else AutoTokenizer).from_pretrained(model_name)
    options: dict[str, Any] = {}
    gpu = choice.name != "cpu" and cuda_available()
    options["dtype"] = half_dtype() if gpu else torch.float32
    if gpu and os.environ.get("ACCELERATE_USE_DEEPSPEED", "false") != "true":  # DeepSpeed places weights itself
        # each rank of a multi-GPU launch holds its own copy on its own GPU
        options["device_map"] = {"": int(os.environ.get("LOCAL_RANK", "0"))}
    if choice.load_in_4bit:
        from transformers import BitsAndBytesConfig

        if not gpu:  # bitsandbytes' CPU library runs the nf4 layers where the weights are
            options["device_map"] = {"": "cpu"}
        options["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=options["dtype"],
        )
    options.update(kwargs)
    model = (AutoModelForImageTextToText if vision else AutoModelForCausalLM).from_pretrained(model_name, **options)
    if choice.load_in_4bit and not gpu:
        _keep_cpu_4bit_layout(model)
    if not lora_rank:
        return model, tokenizer
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if choice.load_in_4bit:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)
    options = {key: value for key, value in (lora_options or {}).items() if not (key == "ensure_weight_tying" and value is None)}
    targets = lora_targets(model, target_modules, options.get("layers_to_transform"), options.get("layers_pattern"), layers)
    targets.check(options.get("lora_dropout", 0.0))
    lora = LoraConfig(r=lora_rank, lora_alpha=alpha, target_modules=targets.modules, target_parameters=targets.parameters or None,
                      task_type="CAUSAL_LM", **options)
    with torch.random.fork_rng(devices=[]):  # the seed decides the adapters' initial weights, as Unsloth's random_state does
        torch.manual_seed(seed)
        with targets_as_named():
            return get_peft_model(model, lora), tokenizer


def _keep_cpu_4bit_layout(model) -> None:
    """Keep bitsandbytes' 4-bit CPU layers in the one weight layout training can use.

    On a CPU with AVX512-BF16, bitsandbytes 0.50 repacks a 4-bit weight for inference on its first forward in eval
    mode (bitsandbytes/nn/modules.py, Linear4bit.forward) and keeps it so; its matmul then takes the inference kernel
    in training mode too, and the first training step fails ("a view of a leaf Variable that requires grad is being
    used in an in-place operation"). Generating in eval mode before training (preview, held-out evaluation) did that.
    """
    import bitsandbytes as bnb

    for module in model.modules():
        if isinstance(module, bnb.nn.Linear4bit):
            module.support_avx512bf16_for_cpu = False
