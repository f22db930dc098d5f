"""Whether the installed TRL and transformers can train a model, judged by what the model is, and what makes the rest train.

Each rule reads a model's config, and the classes transformers builds from it, against the upstream code path that would
fail on them (its file named in the rule, the releases in grpo_lite/machine/stack.py), so that a family never seen here is
judged as the ones that are. A rule that finds a failure either adapts, where the fix is small and sure, with a grpo-lite
adapter between TRL and the model while it trains or generates, or refuses before the model loads, naming what can train it.

- ``backbone``: TRL's fused LM head (``fused_lm_head``) runs ``model.base_model`` for the hidden states, the attribute
  ``base_model_prefix`` names; a class whose prefix names no module of it (Llama 4's text model: ``language_model``, its
  backbone ``model``) gives the model itself, whose output has no hidden states: the prefix names the backbone while the
  model trains.
- ``load-balancing loss``: the fused head adds an MoE model's load-balancing loss from the backbone's router logits and
  the expert count it reads as ``config.num_experts``. A backbone that returns no router logits (Granite 4's on
  transformers 5: its own forward's loss is 0 too) trains without the loss; a config naming the count otherwise (Llama 4's
  ``num_local_experts``) carries ``num_experts``, read from the experts' weights, while the model trains.
- ``processor outputs``: TRL hands the model's forward only the processor outputs its scoring pass names
  (trl/trainer/grpo_trainer.py, ``_get_per_token_logps_and_entropies``); the others the forward takes (Llama 3.2 Vision's
  ``aspect_ratio_ids``, ``aspect_ratio_mask`` and ``cross_attention_mask``) are carried from the processor to the forward,
  each row's own, a per-token one continued over the completion as the model's generation continues it.
- ``M-RoPE decoding`` (``mrope_decode_positions``): before transformers 5.3 an M-RoPE model (Qwen2-VL, Qwen2.5-VL) decodes
  a left-padded row of a batch from positions shifted by its padding, and its completions are garbled: each row's offset
  is corrected where the model computes it (``get_rope_index``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ..machine import stack
from ..run.settings import ConfigError

TRL_SCORING = "trl/trainer/grpo_trainer.py, _get_per_token_logps_and_entropies"
FUSED_HEAD = "trl/trainer/utils.py, add_fused_lm_head"


@dataclass(frozen=True)
class Finding:
    """What a rule found: ``problem``, the upstream code path that fails (its file named); ``remedy``, what grpo-lite does
    about it, or, where ``refused``, what can train the model instead. ``apply`` is the adapter: a context manager taking
    the trainer (``during="training"``) or a function taking the model (``during="generation"``, applied as it loads)."""

    rule: str
    problem: str
    remedy: str
    refused: bool = False
    during: str = "training"
    apply: Callable[..., Any] | None = None

    def __str__(self) -> str:
        return f"{self.rule}: {self.problem}; {self.remedy}"


@dataclass(frozen=True)
class Model:
    """What the rules read: the config, the model (loaded, or its skeleton on the meta device, whose layout is the
    loaded one's), and what its processor gives for a prompt with one image, each output's shape (None for a text
    model)."""

    config: Any
    model: torch.nn.Module
    processor_outputs: dict[str, tuple[int, ...]] | None = None

    @property
    def text_config(self):
        return self.config.get_text_config()


def _expert_count(model: torch.nn.Module) -> int | None:
    """How many experts the model's mixtures hold, read from their weights: the first dimension of an experts' 3-D
    parameter, or the length of an ``experts`` list of modules. None without any."""
    counts = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.modules.conv._ConvNd):
            continue
        held = [p.shape[0] for p in module.parameters(recurse=False) if p.dim() == 3]
        if held:
            counts.append(held[0])
        elif name.rsplit(".", 1)[-1] == "experts" and isinstance(module, torch.nn.ModuleList):
            counts.append(len(module))
    return max(counts) if counts else None


def _decoder(model: torch.nn.Module) -> tuple[str, torch.nn.Module] | None:
    """The model's backbone, the first of its modules that is a model of its own (``model``), with its attribute name."""
    from transformers import PreTrainedModel

    return next(((name, child) for name, child in model.named_children() if isinstance(child, PreTrainedModel)), None)


def _source(cls: type) -> str:
    return cls.__module__.replace(".", "/") + ".py"


@contextlib.contextmanager
def _attribute(owner, name: str, value) -> Iterator[None]:
    """``owner.name`` is ``value`` inside the block; afterwards as it was (an attribute of its class again, or none)."""
    own = name in vars(owner)
    before = vars(owner).get(name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if own:
            setattr(owner, name, before)
        else:
            delattr(owner, name)


def _load_balancing(facts: Model) -> Finding | None:
    if not stack.newer("fused_lm_head") or not hasattr(facts.text_config, "output_router_logits"):
        return None  # TRL asks for router logits only where the config has output_router_logits (grpo_trainer.py)
    trl = f"TRL {stack.installed('trl')} adds MoE models' load-balancing loss from its fused LM head ({FUSED_HEAD})"
    found = _decoder(facts.model)
    # a text model's backbone that records its outputs says which (transformers/utils/output_capturing.py)
    if found is not None and facts.text_config is facts.config and hasattr(type(found[1]), "_can_record_outputs"):
        backbone = type(found[1])
        records = "router_logits" in (backbone._can_record_outputs or {}) or \
            "output_router_logits" in inspect.signature(backbone.forward).parameters
        if not records:
            return Finding("load-balancing loss", (
                f"{trl}, asking the backbone for its router logits, and {backbone.__name__} returns none "
                f"({_source(backbone)}: no router_logits among its _can_record_outputs), so TRL stacks a 0 where it "
                "expects a loss"), "the run trains without the load-balancing loss, which the model's own forward "
                "computes as 0 on this transformers too", apply=lambda trainer: _attribute(trainer, "aux_loss_enabled", False))
    owner, where = (facts.text_config, "config") if stack.newer("fused_lm_head_reads") else (facts.model, "model")
    missing = [name for name in ("num_experts", "num_experts_per_tok") if not hasattr(owner, name)]
    if not missing:
        return None
    problem = f"{trl} with the {where}'s {' and '.join(missing)}, which {type(facts.config).__name__} does not have"
    count = _expert_count(facts.model)
    if missing != ["num_experts"] or count is None:
        return Finding("load-balancing loss", problem, refused=True, remedy=(
            "pass router_aux_loss_coef=0.0 (GRPOConfig: TRL then asks for no router logits), or train on TRL before "
            f"{stack.DIFFERENCES['fused_lm_head'].since} (the T4 stack's {stack.pinned(stack.FLOOR_STACK)['trl']}), which takes the "
            "loss from the model's own forward"))
    return Finding("load-balancing loss", problem, f"the {where} carries num_experts={count} (read from the experts' "
                   "weights) while it trains", apply=lambda trainer: _attribute(owner, "num_experts", count))


def _backbone(facts: Model) -> Finding | None:
    if not stack.newer("fused_lm_head"):
        return None
    model = facts.model
    if facts.text_config is not facts.config and not stack.newer("fused_lm_head_reads"):
        attribute, found = "model", getattr(model, "model", None)
    else:
        attribute, found = "base_model", model.base_model
    if found is not None and found is not model:
        return None
    problem = (f"TRL {stack.installed('trl')}'s fused LM head takes the hidden states from model.{attribute} ({FUSED_HEAD}), "
               f"which is the model itself: {type(model).__name__}.base_model_prefix is {model.base_model_prefix!r}, "
               "no module of it")
    decoder = _decoder(model)
    if decoder is None or attribute == "model":
        return Finding("backbone", problem, refused=True, remedy=(
            f"train on TRL before {stack.DIFFERENCES['fused_lm_head'].since} (the T4 stack's {stack.pinned(stack.FLOOR_STACK)['trl']}), "
            "which scores with the model's own forward"))

    def with_backbone(trainer):
        base = trainer.accelerator.unwrap_model(trainer.model)
        base = base.get_base_model() if hasattr(base, "get_base_model") else base
        return _attribute(base, "base_model_prefix", decoder[0])  # the instance's: the class keeps its own

    return Finding("backbone", problem, f"base_model_prefix names its backbone, {decoder[0]!r}, while it trains",
                   apply=with_backbone)


def _trl_scoring_inputs() -> set[str]:
    """The inputs the installed TRL's scoring pass hands a model's forward, as its parameters name them."""
    from trl import GRPOTrainer

    return set(inspect.signature(GRPOTrainer._get_per_token_logps_and_entropies).parameters)


def _processor_outputs(facts: Model) -> Finding | None:
    if not facts.processor_outputs:
        return None
    forward = set(inspect.signature(type(facts.model).forward).parameters)
    carried = sorted((set(facts.processor_outputs) & forward) - _trl_scoring_inputs() - {"input_ids", "attention_mask"})
    if not carried:
        return None
    problem = (f"TRL {stack.installed('trl')} hands the model's forward only the processor outputs its scoring pass names "
               f"({TRL_SCORING}), and {type(facts.model).__name__}'s forward takes {', '.join(carried)} too")
    unaligned = [name for name in carried if facts.processor_outputs[name][:1] != (1,)]
    if unaligned:
        return Finding("processor outputs", problem, refused=True, remedy=(
            f"{', '.join(unaligned)} {'is' if len(unaligned) == 1 else 'are'} not one row per prompt, which grpo-lite cannot "
            "carry: train on a TRL whose scoring pass takes them"))
    return Finding("processor outputs", problem, f"grpo-lite carries {', '.join(carried)} from the processor to the forward "
                   "while the model trains", apply=functools.partial(_carried, names=tuple(carried)))


def processor_outputs(processor) -> dict[str, tuple[int, ...]] | None:
    """What ``processor`` gives for one prompt with one image, rendered by its chat template (else its image token and
    the text): each output's shape. None for a tokenizer, or a processor with neither."""
    if not hasattr(processor, "image_processor"):
        return None
    from PIL import Image

    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is this?"}]}]
    if getattr(processor, "chat_template", None):
        text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    elif getattr(processor, "image_token", None):
        text = f"{processor.image_token}What is this?"
    else:
        return None
    output = processor(text=[text], images=[Image.new("RGB", (224, 224), "white")], return_tensors="pt")
    return {name: tuple(value.shape) for name, value in output.items() if isinstance(value, torch.Tensor)}


def _mrope_decoding(facts: Model) -> Finding | None:
    if stack.newer("mrope_decode_positions"):
        return None
    rope = getattr(facts.text_config, "rope_scaling", None) or getattr(facts.text_config, "rope_parameters", None) or {}
    computes = [module for module in facts.model.modules() if hasattr(type(module), "get_rope_index")]
    if "mrope_section" not in rope or not computes:
        return None
    problem = (f"transformers {stack.installed('transformers')} decodes a left-padded row of a batch from positions its "
               "padding shifts, an M-RoPE model's offsets being over padded lengths (transformers/models/qwen2_5_vl/"
               "modeling_qwen2_5_vl.py, get_rope_index), so its completions are garbled")
    return Finding("M-RoPE decoding", problem, "each row's offset is corrected as the model generates", during="generation",
                   apply=_corrected_rope_offsets)


RULES = (_backbone, _load_balancing, _processor_outputs, _mrope_decoding)


def judge(facts: Model) -> list[Finding]:
    """What every rule finds in ``facts``."""
    return [finding for rule in RULES if (finding := rule(facts)) is not None]


def judge_loaded(model, processing_class=None) -> list[Finding]:
    """The findings for a loaded ``model`` (PEFT's wrapper looked through) with its tokenizer or processor."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return judge(Model(base.config, base, processor_outputs(processing_class)))


def judge_unloaded(model_name: str, *, vision: bool) -> list[Finding]:
    """The findings for ``model_name`` before its weights load: its config, the model transformers builds from it on the
    meta device (its layout, no weights), and, for a vision-language model, its processor's outputs. None where the
    config cannot be read here (offline, a name only Unsloth resolves) or transformers has no class for it: the backend's
    own loader then says why."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText, AutoProcessor

    try:
        config = AutoConfig.from_pretrained(model_name)
        model_class = (AutoModelForImageTextToText if vision else AutoModelForCausalLM)._model_mapping[type(config)]
    except (OSError, ValueError, KeyError):
        return []
    with torch.device("meta"):
        skeleton = model_class(config)
    return judge(Model(config, skeleton, processor_outputs(AutoProcessor.from_pretrained(model_name)) if vision else None))


def refuse(findings: list[Finding], where: str) -> None:
    """Raise a :class:`ConfigError` naming every refusal among ``findings`` and what can train the model instead."""
    refusals = [finding for finding in findings if finding.refused]
    if refusals:
        raise ConfigError("\n".join(f"{where}: this model cannot train here: {finding.problem}: {finding.remedy}"
                                    for finding in refusals))


def fit_for_generation(model, findings: list[Finding]) -> None:
    """Apply the adapters ``findings`` hold for generating, to ``model`` (idempotent)."""
    for finding in findings:
        if finding.during == "generation" and finding.apply is not None:
            finding.apply(model)


@contextlib.contextmanager
def fitted(trainer, findings: list[Finding]) -> Iterator[None]:
    """Apply the adapters ``findings`` hold for training, around the ``trainer``'s run."""
    with contextlib.ExitStack() as stack_:
        for finding in findings:
            if finding.during == "training" and finding.apply is not None:
                stack_.enter_context(finding.apply(trainer))
        yield


def _corrected_rope_offsets(model) -> None:
    """Correct each left-padded row's decoding offset where ``model`` computes its M-RoPE positions: the offset
    ``get_rope_index`` gives is over the padded row; over the row's own tokens it is larger by the row's padding, as
    transformers 5.3 computes it (``mrope_decode_positions``). Only the innermost module that computes them is changed: an
    outer one may ask it."""
    computing = [module for module in model.modules() if hasattr(module, "get_rope_index")]
    for module in computing:
        compute = module.get_rope_index
        if getattr(compute, "corrected", False) or any(other is not module and any(m is other for m in module.modules())
                                                       for other in computing):
            continue
        signature = inspect.signature(compute)

        def get_rope_index(*args, compute=compute, signature=signature, **kwargs):
            positions, offsets = compute(*args, **kwargs)
            mask = signature.bind(*args, **kwargs).arguments.get("attention_mask")
            if isinstance(mask, torch.Tensor) and mask.dim() == 2 and offsets is not None:
                offsets = offsets + (mask == 0).sum(-1, keepdim=True).to(offsets.device, offsets.dtype)
            return positions, offsets

        get_rope_index.corrected = True
        module.get_rope_index = get_rope_index


class _CarriedInputs:
    """The processor outputs TRL leaves out of its scoring pass, carried to the model's forward.

    Each batch's outputs are taken where TRL calls the processor with the batch's images (both TRLs render and process the
    batch again for scoring: trl/trainer/grpo_trainer.py, ``_generate_and_score_completions``), left-aligned as TRL pads its
    prompts, and added to the batch TRL builds, which it shuffles and splits by row with the rest. While TRL scores, a hook
    on the model's forward hands each call the rows it scores: those of the batch being trained on, or of the batch just
    processed, in the order TRL calls the model for them. A per-token output is taken over the prompt's tokens as TRL scores
    them (the completion's length is the scoring call's ``logits_to_keep``) and continued over the completion by the
    prompt's last position, as the model's generation continues it (Mllama's ``_update_model_kwargs_for_generation``; a
    text token's type, 0, where the prompt ends in text)."""

    def __init__(self, trainer, names: tuple[str, ...]):
        self.trainer, self.names = trainer, names
        self.processed: dict[str, torch.Tensor] | None = None  # the outputs of the last processor call with images
        self.batch: dict[str, torch.Tensor] | None = None  # the rows being trained on
        self.scoring: dict[str, torch.Tensor] | None = None
        self.cursor = 0
        self.per_token: set[str] = set()  # the outputs with a value for each prompt token
        self.completion = 0  # the completion's length in the sequences TRL scores

    def take(self, output) -> None:
        found = {name: output[name] for name in self.names if isinstance(output.get(name), torch.Tensor)}
        mask = output.get("attention_mask")
        if found and isinstance(mask, torch.Tensor):
            self.per_token = {name for name, value in found.items() if value.dim() > 1 and value.shape[1] == mask.shape[1]}
            self.processed = _left_aligned(found, mask, self.per_token)

    def hook(self, module, args, kwargs):
        if self.scoring is None or not isinstance(kwargs.get("input_ids"), torch.Tensor):
            return None
        ids = kwargs["input_ids"]
        rows = slice(self.cursor, self.cursor + ids.shape[0])
        self.cursor += ids.shape[0]
        for name, value in self.scoring.items():
            value = value[rows].to(ids.device)
            if value.shape[0] != ids.shape[0]:
                raise ConfigError(f"{name}: the processor gave {value.shape[0]} rows of it where TRL scores {ids.shape[0]}: "
                                  "grpo-lite carries only outputs with one row per prompt")
            if name in self.per_token:
                value = _over_prompt_and_completion(value, ids.shape[1] - self.completion, self.completion)
            kwargs[name] = value
        return args, kwargs


def _over_prompt_and_completion(value: torch.Tensor, prompt: int, completion: int) -> torch.Tensor:
    """A per-token output over a scored sequence: the prompt's last ``prompt`` positions (the processor's rendering may
    hold a token more or less at the start than TRL's prompt ids: a BOS the tokenizer adds again), then the prompt's last
    position once for each completion token."""
    if value.shape[1] >= prompt:
        value = value[:, value.shape[1] - prompt:]
    else:
        value = torch.cat([value.new_zeros((value.shape[0], prompt - value.shape[1], *value.shape[2:])), value], 1)
    return torch.cat([value, value[:, -1:].expand(-1, completion, *value.shape[2:])], 1)


def _left_aligned(outputs: dict[str, torch.Tensor], mask: torch.Tensor, per_token: set[str]) -> dict[str, torch.Tensor]:
    """``outputs`` with their per-token rows moved to the right end, as TRL left-pads the prompts they go with (a processor
    pads on its tokenizer's side, TRL 1.x leaves it as it is)."""
    shifts = [int((row == 0).sum()) if row[-1] == 0 else 0 for row in mask]
    if not any(shifts):
        return outputs
    return {name: torch.stack([value[i].roll(shift, 0) for i, shift in enumerate(shifts)]) if name in per_token else value
            for name, value in outputs.items()}


@contextlib.contextmanager
def _carried(trainer, names: tuple[str, ...]) -> Iterator[None]:
    carried = _CarriedInputs(trainer, names)
    processor = trainer.processing_class
    plain = type(processor)

    def __call__(self, *args, **kwargs):
        output = plain.__call__(self, *args, **kwargs)
        if kwargs.get("images") is not None:
            carried.take(output)
        return output

    # the trainer's processor, in a subclass of its own class of the same name (so it saves as it is), notes its outputs
    processor.__class__ = type(plain.__name__, (plain,), {"__call__": __call__, "__module__": plain.__module__})
    score, generate, loss = trainer._get_per_token_logps_and_entropies, trainer._generate_and_score_completions, \
        trainer._compute_loss
    signature = inspect.signature(score)

    def scored(*args, **kwargs):
        for name in names:  # TRL 1.x passes on those of its processor call, as the processor aligned them: taken above
            kwargs.pop(name, None)
        carried.scoring, carried.cursor = carried.batch or carried.processed, 0
        carried.completion = signature.bind(*args, **kwargs).arguments["logits_to_keep"]
        try:
            return score(*args, **kwargs)
        finally:
            carried.scoring = None

    def generated(*args, **kwargs):
        carried.processed = None
        output = generate(*args, **kwargs)
        return {**output, **(carried.processed or {})}

    def trained(model, inputs, *args, **kwargs):
        carried.batch = {name: inputs[name] for name in names if name in inputs} or None
        try:
            return loss(model, inputs, *args, **kwargs)
        finally:
            carried.batch = None

    wrappers = {"_get_per_token_logps_and_entropies": scored, "_generate_and_score_completions": generated,
                "_compute_loss": trained}
    earlier = {name: vars(trainer)[name] for name in wrappers if name in vars(trainer)}  # another adapter's, kept
    vars(trainer).update(wrappers)
    handle = trainer.accelerator.unwrap_model(trainer.model).register_forward_pre_hook(carried.hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()
        for name in wrappers:
            del vars(trainer)[name]
        vars(trainer).update(earlier)
        processor.__class__ = plain
