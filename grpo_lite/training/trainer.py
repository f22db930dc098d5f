"""train(): one GRPO run, from a model, a dataset and reward functions to a trained adapter in a run folder.

The run, in order: resolve and guard the rewards; build and check the GRPOConfig; record the run
(``run.yaml``, grpo_lite.run.record); assemble the callbacks, each with one job; build TRL's GRPOTrainer; train (from a
checkpoint when resuming); save. The callbacks run in this order (the list in ``train`` is the one place
that sets it; the user's ``callbacks`` come after grpo-lite's, before the StopSwitch); what each does, and
the files it writes, is in its module:

    InvariantChecks     grpo_lite.monitor.invariants   GRPO invariants into each step's logs
    MetricsLog          grpo_lite.monitor.metrics      each step -> metrics.jsonl
    SampleLog           grpo_lite.monitor.samples      each completion, scored -> samples.jsonl
    FailureStop         grpo_lite.guards.user_code     stop when a reward, tool or environment keeps failing
    NaNStop             grpo_lite.guards.nan           stop, without saving, at a NaN loss or gradient
    InterruptStops      grpo_lite.run.stopping         Ctrl-C stops after the step
    LiveDashboard       grpo_lite.monitor.dashboard    charts, samples, health warnings, Stop button
    HeldoutEvaluation   grpo_lite.evaluation.heldout   held-out scores before and after -> eval.json
    (the user's callbacks)
    StopSwitch          grpo_lite.run.stopping         the one way a run ends early, with a checkpoint

Each callback that is a :class:`~grpo_lite.run.callbacks.RunCallback` (grpo-lite's and the user's alike) is
attached to the trainer once it exists and closed when training ends, however it ends.

Out of GPU memory and a full disk end training from inside the Trainer: ``grpo_lite.guards.faults`` saves what
can be saved and raises an error that says what to change (docs/faults.md).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from rewards.calling import check_columns
from rewards.combine import distinct_names, name_clashes
from rewards.extract import is_data_frame, several_splits

from ..data.prepare import DatasetError, as_dataset, check_prompts, image_column, prompt_lengths, with_seen_images
from ..data.prompts import check_processor_for_images, describe_row_settings, fit_dataset, remember_template_kwargs
from ..guards.faults import faults_reported
from ..guards.nan import NaNStop
from ..guards.user_code import FailureStop, GuardedReward, guard, guard_environment_rewards, guard_rollouts, time_limits, unlimited
from ..log import is_main_process, logger
from ..model import fit
from ..model.load import loaded_as
from ..model.lora import note_trained, targets_as_named, trained_in
from ..monitor.dashboard import LiveDashboard
from ..monitor.invariants import InvariantChecks
from ..monitor.metrics import MetricsLog, read_metrics
from ..monitor.samples import SampleLog
from ..run.callbacks import attach_all
from ..run.config import config_to_dict, make_config
from ..run.files import RUN_FILE, clear_run, fresh_run_dir, run_name, say_fresh_run_dir
from ..run.porting import changes_table, option_sources, port_overrides, preset_changes, sampling_values
from ..run.presets import preset_name
from ..run.record import RunRecord, function_reference, reward_reference, rows_fingerprint
from ..run.resume import RecordInCheckpoints, finished_at, resume_checkpoint
from ..run.settings import (
    REWARD_TIMEOUT,
    ROLLOUT_TIMEOUT,
    TOOL_TIMEOUT,
    ConfigError,
    Heldout,
    RunSettings,
    map_rollout_options,
    resolve_options,
)
from ..run.stopping import InterruptStops, StopSwitch
from .rollouts import rendered_tools, reward_arguments, rollout_options
from .trl_compat import (
    cut_prompts_on_the_left,
    generate_with_tokenizer,
    image_rewards_as_text,
    render_with_template_kwargs,
    template_kwargs_field,
)


@dataclass
class TrainResult:
    """What :func:`train` returns: the trainer, where its files are, and its step records."""

    trainer: Any
    output_dir: Path
    rewards: list[GuardedReward] = field(default_factory=list)
    evaluation: Any = None  # held-out reports before and after (grpo_lite.evaluation.scoring.Comparison) when asked
    stopped: str | None = None  # why training ended before max_steps (Stop, Ctrl-C, a failing reward), if it did

    @property
    def metrics(self) -> list[dict[str, Any]]:
        return read_metrics(self.output_dir)

    @property
    def model(self):
        return self.trainer.model


def _training_rows(dataset, tokenizer):
    """The training rows as a ``datasets.Dataset`` (a pandas DataFrame becomes one) whose missing values are None
    (:func:`as_dataset`), checked: a ``prompt`` column whose every prompt a chat template can render, or the installed
    TRL takes with the row's images as text (:func:`check_prompts`, ``tokenizer`` the processor), and at least one row.
    Images a vision processor would not show as they are (16-bit grayscale, transparency) are converted, as said."""
    if is_data_frame(dataset):
        dataset = as_dataset(dataset)
    _check_dataset(dataset)
    seen = check_prompts(dataset, tokenizer=tokenizer)
    dataset = as_dataset(dataset)
    return dataset if seen is None else with_seen_images(dataset, seen)


def _check_dataset(dataset) -> None:
    from datasets import IterableDataset

    if (refusal := several_splits(dataset, "dataset")) is not None:
        raise DatasetError(refusal)
    if isinstance(dataset, IterableDataset):
        # TRL 0.22 refuses one (NotImplementedError in GRPOTrainer.__init__); TRL 1.x streams it, but GRPO's groups and
        # a resumable run need rows that can be counted and indexed
        raise DatasetError("dataset is an IterableDataset (a stream), and a run trains on rows it can count and index: "
                           "turn the rows to train on into a Dataset, datasets.Dataset.from_list(list(dataset.take(n))) "
                           "or datasets.Dataset.from_generator(...)")
    if not hasattr(dataset, "column_names"):
        raise DatasetError(f"dataset is a {type(dataset).__name__}, not a datasets.Dataset; build it with "
                           "grpo_lite.prepare_dataset(rows, question=..., answer=...)")
    if "prompt" not in dataset.column_names:
        raise DatasetError(
            f"the dataset has no 'prompt' column (columns: {dataset.column_names}); build it with "
            "grpo_lite.prepare_dataset(rows, question=..., answer=...)"
        )
    if len(dataset) == 0:
        raise DatasetError("the dataset has no rows, so there is nothing to train on (were they all filtered out?)")


def _check_one_batch(dataset, config) -> None:
    """Refuse rows too few for one generation batch: TRL's RepeatSampler (trl/trainer/grpo_trainer.py) keeps only
    whole batches of ``generation_batch_size / num_generations`` prompts, so fewer rows train 0 steps without an error."""
    prompts = config.generation_batch_size // config.num_generations
    if len(dataset) < prompts:
        raise DatasetError(
            f"the dataset has {len(dataset)} rows and one generation batch takes {prompts} prompts "
            f"(generation_batch_size={config.generation_batch_size} completions in groups of num_generations="
            f"{config.num_generations}: per_device_train_batch_size={config.per_device_train_batch_size} x "
            f"steps_per_generation={config.steps_per_generation}), so no step could train: add rows, or lower "
            "per_device_train_batch_size, gradient_accumulation_steps, steps_per_generation or generation_batch_size"
        )


def _say_cut_prompts(dataset, tokenizer, max_prompt_length: int, chat_template_kwargs: dict[str, Any], by_trl: bool) -> None:
    """Say how many prompts are cut, by the installed TRL (``by_trl``) or by grpo-lite where TRL removed
    ``max_prompt_length``, as TRL 0.22-0.27 cut them (trl 0.22.2, trl/trainer/grpo_trainer.py: the rendered prompt's
    last max_prompt_length tokens, so the template's header goes first; TRL 0.22 keeps an image's tokens whole). A
    prompt's length counts its images' tokens as the processor makes them. Where TRL removed the field, a cut of a prompt
    with images is refused (``cut_prompts_on_the_left`` says why)."""
    lengths = prompt_lengths(dataset, tokenizer, chat_template_kwargs)
    if cut := [n for n in lengths if n > max_prompt_length]:
        low, high = min(cut), max(cut)
        if not by_trl and (images := image_column(dataset.column_names)):
            raise ConfigError(f"max_prompt_length={max_prompt_length} would cut {len(cut)} of {len(lengths)} prompts with images "
                              f"(column {images!r}), and TRL {version('trl')} removed the field: the prompts it scores are "
                              f"rendered again with their images, uncut. Set max_prompt_length={high} (keeps them whole) or "
                              "drop it; to cut them as TRL 0.22 did, train on the T4 stack (requirements/t4.txt)")
        cutter = f"TRL {version('trl')} " if by_trl else ""  # else grpo-lite, whose name opens every line it says
        logger.info(f"{cutter}cuts {len(cut)} of {len(lengths)} prompts on the left to their last max_prompt_length="
                    f"{max_prompt_length} tokens, the chat template's header first (they are "
                    f"{f'{low}-{high}' if low < high else high} tokens as it renders them); max_prompt_length={high} keeps "
                    "them whole")


def _check_trainable(model) -> None:
    """Refuse a model with no weight to train, which TRL would meet as an autograd error inside its first step."""
    if not any(parameter.requires_grad for parameter in model.parameters()):
        raise ConfigError(
            f"the model ({type(model).__name__}) has no weight to train: every parameter is frozen, as PEFT's "
            "merge_and_unload() leaves a model once it folds the LoRA weights into the base ones. Train the model "
            "load_model returned before merging (export(how='merged_16bit') merges a copy and leaves it trainable), or "
            "load the model again with load_model(...)"
        )


def _check_sequence_length(model, tokenizer, dataset, config, chat_template_kwargs: dict[str, Any],
                           max_prompt_length: int | None, tools: list[list[Any]] | None) -> None:
    """Refuse a run whose longest prompt (with the tools its template describes in it, ``tools``), cut to
    ``max_prompt_length`` where one is set, plus ``max_completion_length`` exceeds the model's ``max_seq_length``.

    Unsloth's loader sets ``model.max_seq_length`` from ``load_model(max_seq_length=...)`` and sizes the model's
    RoPE cache and vLLM's maximum model length from it (unsloth/models/llama.py, unsloth_zoo/vllm_utils.py):
    a longer sequence fails inside generation, after loading and often after the first steps.
    """
    limit = getattr(model, "max_seq_length", None)
    if not isinstance(limit, int) or "prompt" not in dataset.column_names:
        return
    longest = max(prompt_lengths(dataset, tokenizer, chat_template_kwargs, tools=tools), default=0)
    if max_prompt_length:
        longest = min(longest, max_prompt_length)
    if longest + config.max_completion_length > limit:
        raise ConfigError(
            f"the longest prompt ({longest} tokens{', with the tools its chat template describes' if tools else ''}) plus "
            f"max_completion_length={config.max_completion_length} exceeds the "
            f"model's max_seq_length={limit}: load the model with load_model(..., max_seq_length={longest + config.max_completion_length}) "
            f"or more, pass max_completion_length={max(limit - longest, 1)} or less, or drop long prompts with "
            "prepare_dataset(..., tokenizer=tokenizer, max_prompt_tokens=N)"
        )


def _dashboard(dashboard: Any, output_dir: Path) -> list[TrainerCallback]:
    """``True``: the view that fits; a view name; a LiveDashboard of the user's; ``False``: none."""
    if dashboard is True or isinstance(dashboard, str):
        return [LiveDashboard(output_dir, view="auto" if dashboard is True else dashboard)]
    return [dashboard] if dashboard else []


def grpo_trainer(model, tokenizer, dataset, rewards, config, callbacks, reward_timeout: float | None = REWARD_TIMEOUT,
                 **rollouts):
    """TRL's GRPOTrainer for the run; ``rollouts``: its tools, environment_factory or rollout_func, where given
    (grpo_lite.training.rollouts). The rewards TRL adds itself (an environment's ``get_reward``) are guarded as the run's
    own are, for ``reward_timeout`` seconds a call."""
    from .trl_compat import enable_cpu_logprobs, enable_input_grads_for_checkpointing, prepare_for_unsloth_trainer, restore_cpu_storages_by_index

    enable_cpu_logprobs()
    restore_cpu_storages_by_index()
    prepare_for_unsloth_trainer(model, config)
    enable_input_grads_for_checkpointing(model, config)
    from trl import GRPOTrainer

    if "ref" in getattr(model, "peft_config", {}):
        # A previous GRPOTrainer left its frozen "ref" adapter on the model, and TRL refuses to add a second: drop
        # it, so TRL copies the adapter as it is now and this run's KL is measured from where it starts.
        model.delete_adapter("ref")
    given = len(rewards)  # TRL appends an environment's get_reward to the very list it is given
    trainer = GRPOTrainer(model=model, reward_funcs=rewards, args=config, train_dataset=dataset,
                          processing_class=tokenizer, callbacks=callbacks, **rollouts)
    guard_environment_rewards(trainer, given, reward_timeout)
    if any(isinstance(callback, LiveDashboard) for callback in callbacks):
        # the dashboard is the run's one voice: its header shows the step, elapsed and remaining time
        from transformers.trainer import DEFAULT_PROGRESS_CALLBACK
        from transformers.trainer_callback import PrinterCallback

        for chatter in (DEFAULT_PROGRESS_CALLBACK, PrinterCallback):
            trainer.remove_callback(chatter)
    attach_all(trainer)
    return trainer


def train(
    model,
    tokenizer,
    dataset,
    rewards: Any,
    *,
    preset: str = "auto",
    output_dir: str | Path | None = None,
    overwrite: bool = False,
    reward_weights: Sequence[float] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
    resume: bool = False,
    dashboard: Any = True,
    heldout: Any = None,
    heldout_n: int | None = 200,
    heldout_samples: int = 1,
    reward_timeout: float | None = REWARD_TIMEOUT,
    tool_timeout: float | None = TOOL_TIMEOUT,
    rollout_timeout: float | None = ROLLOUT_TIMEOUT,
    chat_template_kwargs: dict[str, Any] | None = None,
    fold_system_prompt: bool = True,
    tools: Sequence[Any] | None = None,
    environment_factory: Any = None,
    rollout_func: Any = None,
    **overrides: Any,
) -> TrainResult:
    """GRPO-train ``model`` on ``dataset`` with ``rewards``; returns a :class:`TrainResult`.

    ``dataset`` needs a ``prompt`` column (see :func:`grpo_lite.prepare_dataset`; a pandas DataFrame with one works
    too); its other columns reach the reward functions. The run's files go to ``output_dir``; without one, to a fresh
    ``outputs/<model>-<n>`` (the model's short name, numbered on), said when the run starts. A folder holding another
    run is refused before anything is written: pass ``resume=True`` to continue it, another ``output_dir``, or
    ``overwrite=True`` to replace it (its record, logs, checkpoints and weights; other files stay); a folder holding
    anything else (an export, your own files) is refused whatever is asked. ``resume=True`` goes on from the run's newest
    whole checkpoint (a run with none is refused), naming each setting or the training rows that changed since. ``rewards`` are
    reward functions, registry or preset names, ``"module:function"`` or ``"path/to/file.py:function"`` references or
    a ``rewards.RewardSet`` (its weights become ``reward_weights``); each is logged under a name of its own
    (``rewards/<name>/mean``): two of one name (two lambdas) as ``<name>`` and ``<name>_2``, said when the run
    starts. ``overrides`` are
    ``trl.GRPOConfig`` fields (``max_steps=50``, ``num_generations=4``, ...), checked before training starts.
    ``dashboard`` draws a :class:`~grpo_lite.LiveDashboard` (``True``: the notebook or terminal view that
    fits; a view name, ``"log"``...; a ``LiveDashboard`` of your own; ``False``: none). ``callbacks`` run
    after grpo-lite's; a :class:`~grpo_lite.run.callbacks.RunCallback` among them is also attached to the trainer and
    closed when training ends, however it ends. Ctrl-C stops after
    the current step, with a checkpoint. ``heldout`` (a ``prepare_dataset`` dataset with ``prompt`` and
    ``answer``, not trained on) is evaluated on its first ``heldout_n`` rows before and after training,
    greedily and, with ``heldout_samples=k``, with k samples per row for pass@k: the reports, side by side,
    are printed, returned as ``result.evaluation`` and written to ``eval.json``. ``reward_timeout`` is the
    seconds one call of a reward function may take (``None``: no limit); a call past it scores ``None``,
    like a crash, and three failures in a row stop the run (docs/faults.md). ``tool_timeout`` is the seconds one call of
    a tool, or of an environment's ``reset`` or method, may take (the model is told it failed), ``rollout_timeout`` one
    call of ``rollout_func`` (the run stops with its steps saved); each limit is said when the run starts, and every
    failure of user code is said naming it, the row and what to do (docs/errors.md). ``chat_template_kwargs`` go to the chat
    template wherever a prompt is rendered: TRL's training prompts (GRPOConfig's field of that name), the length
    checks, held-out evaluation, and ``generate``/``evaluate``/``preview`` with this tokenizer afterwards (Qwen3's
    ``{"enable_thinking": False}``); a dataset column the chat template reads (gpt-oss's ``reasoning_effort``) is that
    row's setting, over them, in every one of those renders and in samples.jsonl, said when the run starts. A system
    prompt the chat template rejects or drops (Gemma 2, Mistral v0.1, Phi-3-mini) is folded into the first user turn, said
    once; ``fold_system_prompt=False`` refuses the data instead.

    A rollout can be more than one reply (TRL 1.x with transformers 5, the latest stack; refused on a stack without them,
    before the trainer is built): ``tools``, functions with type hints and a Google-style docstring the model may call,
    each result shown to it before it goes on; ``environment_factory``, a class (or function) making one environment per
    rollout, ``reset(**row)`` before it, its public methods the tools and its ``get_reward()`` a reward, or a dict of them
    that each row picks from by its ``environment`` column; ``rollout_func(prompts, trainer)``, a loop of your own
    returning ``prompt_ids``, ``completion_ids`` and ``logprobs`` (its other keys reach the rewards). Each may also be
    named as a run YAML names it, ``"module:function"`` or ``"path/to/file.py:function"``. samples.jsonl
    records each rollout as an episode, turn by turn, and metrics.jsonl TRL's ``tools/call_frequency`` and
    ``tools/failure_frequency``.
    """
    loaded = loaded_as(model)
    settings = RunSettings(
        model=model_name(model), rewards=_as_list(rewards), load=loaded.settings if loaded else None,
        reward_weights=_as_list(reward_weights), preset=preset,
        output_dir=os.fspath(output_dir) if isinstance(output_dir, (str, os.PathLike)) else output_dir, overwrite=overwrite,
        reward_timeout=reward_timeout, tool_timeout=tool_timeout, rollout_timeout=rollout_timeout,
        chat_template_kwargs=chat_template_kwargs, fold_system_prompt=fold_system_prompt,
        heldout=Heldout(heldout, heldout_n, heldout_samples) if heldout is not None else None, tools=_as_list(tools),
        environment_factory=environment_factory, rollout_func=rollout_func, overrides=overrides)
    return train_run(model, tokenizer, dataset, settings, callbacks=callbacks, resume=resume, dashboard=dashboard)


def _as_list(values: Any) -> Any:
    """A tuple, or an array of numbers (numpy, torch, pandas), as the list the settings hold; anything else as it is,
    for the settings' shapes to check."""
    if hasattr(values, "tolist") and not isinstance(values, (str, dict)):
        return values.tolist()
    return list(values) if isinstance(values, tuple) else values


def model_name(model) -> str:
    """The name a model was loaded by (its hub id or folder), as run.yaml records it and a run folder is named after."""
    loaded = loaded_as(model)
    return loaded.name if loaded else str(getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__)


def train_run(model, tokenizer, dataset, settings: RunSettings, *, callbacks: Sequence[TrainerCallback] = (),
              resume: bool = False, dashboard: Any = True) -> TrainResult:
    """:func:`train` for a run given as one :class:`RunSettings`, whose ``heldout.data`` is a prepared dataset."""
    settings.validate(model_loaded=True, resume=resume)
    dataset = _training_rows(dataset, tokenizer)
    funcs, set_weights = settings.reward_functions()
    rollouts = rollout_options(tokenizer, dataset, **settings.rollouts(), scored_by_environments=not funcs)
    _check_trainable(model)
    findings = fit.judge_loaded(model, tokenizer)  # what the installed TRL and transformers cannot train as it is
    fit.refuse(findings, "train")
    fit.fit_for_generation(model, findings)
    if images := image_column(dataset.column_names):
        check_processor_for_images(tokenizer, f"the rows have images (column {images!r})")
    if settings.output_dir is None:
        output_dir = fresh_run_dir(run_name(settings.model))
        say_fresh_run_dir(output_dir)
    else:
        output_dir = Path(settings.output_dir)
    if "rollout_func" not in rollouts:  # a rollout function's own keys reach the rewards too, known once it runs
        # a reward's required column the data lacks: refused before any step
        check_columns(funcs, [*dataset.column_names, *reward_arguments(rollouts)])
    weights = settings.reward_weights if settings.reward_weights is not None else set_weights
    ported = port_overrides(settings.preset, settings.overrides)  # what a script written for older TRL meant
    if weights is not None:  # the user's, or their RewardSet's
        ported.overrides["reward_weights"] = list(weights)
        ported.asked.add("reward_weights")
    chosen_overrides = {key: value for key, value in vllm_options(model).items() if key not in ported.overrides}
    template = dict(settings.chat_template_kwargs or {})
    # TRL renders the training prompts with them: as a GRPOConfig field, or bound on the tokenizer where TRL has none
    config = make_config(settings.preset, output_dir=output_dir, **chosen_overrides, **ported.overrides,
                         **template_kwargs_field(template))
    _stop_strings_for_vllm(config)
    sources = option_sources(settings.preset, ported, chosen_overrides)
    if is_main_process():  # the run's first words: what grpo-lite chose beyond TRL, then what it translated
        options = resolve_options(settings.preset, **chosen_overrides, **ported.overrides)  # as passed to GRPOConfig
        logger.info(changes_table(preset_changes(settings.preset, ported, options, sources), settings.preset))
        for note in ported.notes:
            logger.info(note)
    # TRL renders the prompt column itself: it gets the messages grpo-lite renders, a system turn kept or folded
    dataset = fit_dataset(dataset, tokenizer, template, fold_system_prompt=settings.fold_system_prompt)
    remember_template_kwargs(tokenizer, template)
    # a TRL that still has max_prompt_length cuts long prompts itself; where TRL removed it, grpo-lite cuts them alike
    max_prompt_length = getattr(config, "max_prompt_length", None) or ported.cut_prompts_to
    if max_prompt_length:
        _say_cut_prompts(dataset, tokenizer, max_prompt_length, template, by_trl=not ported.cut_prompts_to)
    if (per_row := describe_row_settings(tokenizer, dataset, template)) is not None:  # counted over the rows trained on
        logger.info(per_row)
    _check_one_batch(dataset, config)
    _check_sequence_length(model, tokenizer, dataset, config, template, max_prompt_length, rendered_tools(rollouts, dataset))
    heldout = settings.heldout if settings.heldout is not None and settings.heldout.data is not None else None
    if heldout is not None and is_data_frame(heldout.data):
        heldout = dataclasses.replace(heldout, data=as_dataset(heldout.data))
    # every call of the user's tools, environments and rollout function, in training and held-out episodes alike
    played, watched = guard_rollouts(rollouts, tool_timeout=settings.tool_timeout, rollout_timeout=settings.rollout_timeout)
    evaluation = []
    if heldout is not None:
        from ..evaluation.heldout import HeldoutEvaluation

        evaluation = [HeldoutEvaluation(tokenizer, heldout.data, funcs, output_dir, heldout_n=heldout.n,
                                        heldout_samples=heldout.samples, temperature=config.temperature,
                                        max_completion_length=config.max_completion_length, chat_template_kwargs=template,
                                        tools=played.get("tools"), environment_factory=played.get("environment_factory"),
                                        max_tool_calling_iterations=getattr(config, "max_tool_calling_iterations", None),
                                        reward_timeout=settings.reward_timeout)]

    names = distinct_names(funcs)  # TRL logs each reward under its function's name: two of one name would share a curve
    if (clashes := name_clashes(funcs, names)) is not None:
        logger.info(clashes)
    guarded = [guard(f, settings.reward_timeout, name=name) for f, name in zip(funcs, names)]
    logger.info(time_limits({"reward": settings.reward_timeout, "tool": settings.tool_timeout,
                             "rollout": settings.rollout_timeout}, rollouts))
    if (unlimited_rewards := unlimited(guarded)) is not None:
        logger.warning(unlimited_rewards)
    # FailureStop's, the one list: the guards of a factory function's classes join it as it makes them, and an
    # environment's get_reward once TRL has made it a reward
    watched[:0] = guarded
    record = _record(model, settings, funcs, names, rollouts, config, set_weights, chosen_overrides)
    record.chosen.update(rows=len(dataset), rows_fingerprint=rows_fingerprint(dataset))  # resuming compares them
    if ported.translated:
        record.chosen["translated"] = ported.translated  # the user's field -> its new form (None: dropped)
    record.chosen["sources"] = {key: source for key, source in sorted(sources.items()) if source != "trl"}
    views = _dashboard(dashboard, output_dir)  # a view name that does not exist is refused before anything is written
    checkpoint = resume_checkpoint(output_dir, config, record) if resume else None
    finished = finished_at(checkpoint, config.max_steps) if checkpoint is not None else None
    if checkpoint is None and (earlier := trained_in(model)) is not None:
        logger.warning(f"this model carries {earlier}: this run goes on from them (as a later stage does); to start from "
                       "the base weights, load the model again with load_model(...)")
    if is_main_process() and finished is None:  # a finished run resumed trains nothing: its record stays as it is
        if settings.overwrite and not resume and (removed := clear_run(output_dir)):
            logger.warning(f"overwrite=True: removed the earlier run's {', '.join(removed)} from {output_dir}")
        record.write(output_dir / RUN_FILE)

    switch = StopSwitch()
    watchers = [
        InvariantChecks(),  # before MetricsLog, which records the invariants it adds to the logs
        SampleLog(output_dir),  # before MetricsLog too: it adds the episodes' metrics
        MetricsLog(output_dir),
        RecordInCheckpoints(),
        FailureStop(watched, switch),
        NaNStop(switch),
        InterruptStops(switch),
        *views,
        *evaluation,  # after the dashboard: its last frame and the end of Stop come before the evaluation after training
        *callbacks,
        switch,  # last: it acts on stop requests made by the callbacks before it at the same step
    ]
    # a copy: TRL appends an environment's get_reward to the list it is given, guarded then and watched
    for finding in findings:
        if finding.during == "training":
            logger.info(f"fitted to this stack: {finding}")
    with targets_as_named():  # TRL 1.x copies the adapter as "ref", and a resumed run loads it: as it was named
        trainer = grpo_trainer(model, tokenizer, dataset, list(guarded), config, watchers,
                               reward_timeout=settings.reward_timeout, **played)
    environment_rewards = trainer.reward_funcs[len(guarded):]
    guarded += environment_rewards
    watched += environment_rewards
    if ported.cut_prompts_to:
        cut_prompts_on_the_left(trainer, ported.cut_prompts_to)
    with (faults_reported(trainer), generate_with_tokenizer(trainer.model, tokenizer, config),
          render_with_template_kwargs(trainer, tokenizer, template), image_rewards_as_text(trainer),
          fit.fitted(trainer, findings), targets_as_named()):
        try:
            if checkpoint is not None:
                _restore_trained_adapter(trainer.model, checkpoint)
            if finished is None:
                trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
            else:  # nothing left to train: the model takes the checkpoint's weights (the Trainer's loader: the rest)
                trainer._load_from_checkpoint(str(checkpoint))
                logger.info(f"the run in {output_dir} trained its max_steps={config.max_steps} already ({checkpoint.name}): "
                            "nothing is trained or written; the model holds its weights. Give a larger max_steps to train "
                            "on from it")
        finally:
            if (steps := finished or trainer.state.global_step) > 0:
                note_trained(model, trainer.model, run=f"{output_dir} ({steps} step{'s' if steps > 1 else ''})")
        if switch.save and finished is None:  # after a NaN the last good checkpoint is the result: nothing is saved over it
            _drop_reference_adapter(trainer.accelerator.unwrap_model(trainer.model))
            trainer.save_model(str(output_dir))  # the Trainer writes from the main process only
            if trainer.is_world_process_zero():
                tokenizer.save_pretrained(str(output_dir))
                logger.info(f"saved the adapter and tokenizer to {output_dir}")
    trainer.accelerator.wait_for_everyone()  # every process returns once the run's files are written
    if switch.error is not None:
        raise switch.error
    return TrainResult(trainer=trainer, output_dir=output_dir, rewards=guarded,
                       evaluation=evaluation[0].comparison if evaluation else None, stopped=switch.reason)


def _drop_reference_adapter(model) -> None:
    """Drop TRL 1.x's frozen "ref" copy of the adapter once the run has trained: it served the KL term of a beta > 0 run
    (trl/trainer/grpo_trainer.py, GRPOTrainer.__init__: model.add_adapter("ref", ...)), and PEFT would save it beside the
    trained adapter in the run's folder, a second adapter doubling it (export saves the trained one alone too). The
    checkpoints keep it, for a resumed run to measure its KL from (:func:`_restore_trained_adapter`)."""
    if "ref" in getattr(model, "peft_config", {}) and getattr(model, "active_adapter", None) != "ref":
        model.delete_adapter("ref")


def _restore_trained_adapter(model, checkpoint: Path) -> None:
    """Load the trained adapter of ``checkpoint`` into ``model``'s active adapter. Resuming, transformers' Trainer loads
    only the adapters in a checkpoint's subfolders once it has one (``Trainer._load_from_checkpoint``): TRL 1.x saves its
    frozen "ref" adapter there, and PEFT the trained one at the top, which would stay at its initial weights."""
    if hasattr(model, "load_adapter") and (checkpoint / "adapter_config.json").exists():
        model.load_adapter(str(checkpoint), adapter_name=model.active_adapter, is_trainable=True)


def _stop_strings_for_vllm(config) -> None:
    """Stop strings (``vllm_sampling_params``' ``stop``, carried over as transformers' ``stop_strings``) as vLLM's
    SamplingParams takes them, where the run generates through vLLM: ``stop``, kept in the completion as transformers
    keeps them."""
    kwargs = config.generation_kwargs
    if getattr(config, "use_vllm", False) and isinstance(kwargs, dict) and "stop_strings" in kwargs:
        rest = {key: value for key, value in kwargs.items() if key != "stop_strings"}
        config.generation_kwargs = {**rest, "stop": kwargs["stop_strings"], "include_stop_str_in_output": True}


def vllm_options(model) -> dict[str, Any]:
    """GRPOConfig settings for a model that carries a colocated vLLM engine (Unsloth ``fast_inference``).

    Unsloth's GRPOTrainer sets ``use_vllm=True`` and ``vllm_mode="colocate"`` itself when the model has
    ``vllm_engine`` (unsloth/models/rl.py, the ``vllm_setter`` it adds to the trainer's ``__init__``); saying so
    here puts them in run.yaml too, with vLLM's share of the GPU as load_model gave it.
    """
    if getattr(model, "vllm_engine", None) is None:
        return {}
    options: dict[str, Any] = {"use_vllm": True, "vllm_mode": "colocate"}
    loaded = loaded_as(model)
    if loaded is not None and loaded.backend.gpu_memory_utilization is not None:
        options["vllm_gpu_memory_utilization"] = loaded.backend.gpu_memory_utilization
    return options


def _record(model, settings: RunSettings, funcs, names: list[str], rollouts: dict[str, Any], config, set_weights,
            chosen_overrides: dict[str, Any]) -> RunRecord:
    """``run.yaml`` of this run: the settings as given (rewards, tools, environments and a rollout function by the names
    that resolve back to them), what the run chose, its GRPOConfig. Held-out rows given as a dataset are recorded by
    their count; a recipe names their file. ``names`` are the rewards' as the run logs them."""
    loaded = loaded_as(model)
    overrides = dict(settings.overrides)
    if overrides.get("vllm_sampling_params") is not None:  # a SamplingParams object: recorded by what it holds
        overrides["vllm_sampling_params"] = sampling_values(overrides["vllm_sampling_params"])
    references = map_rollout_options(rollouts, lambda thing, _: function_reference(thing))
    recorded = dataclasses.replace(settings, rewards=[reward_reference(f) for f in funcs], output_dir=None, dataset=None,
                                   load=loaded.settings if loaded else settings.load, overrides=overrides, **references)
    chosen: dict[str, Any] = {"preset": preset_name(settings.preset), "reward_names": list(names)}
    if settings.heldout is not None and settings.heldout.data is not None and not isinstance(settings.heldout.data, dict):
        chosen["heldout_rows"] = len(settings.heldout.data)
    if loaded is not None:
        backend = loaded.backend
        chosen.update(backend=backend.name, backend_reason=backend.reason, load_in_4bit=backend.load_in_4bit,
                      fast_inference=backend.fast_inference)
        if loaded.lora_modules:
            chosen["lora_modules"] = list(loaded.lora_modules)  # the weights that carry LoRA (layers, experts), by name
        if backend.gpu_memory_utilization is not None:
            chosen["gpu_memory_utilization"] = backend.gpu_memory_utilization
    else:
        peft_config = getattr(model, "peft_config", {}).get(getattr(model, "active_adapter", "default"))
        chosen["lora_rank"] = getattr(peft_config, "r", None)
    if set_weights is not None and settings.reward_weights is None:
        chosen["reward_weights"] = list(set_weights)
    if chosen_overrides:
        chosen["overrides"] = dict(chosen_overrides)
    return RunRecord(settings=recorded, chosen=chosen, grpo_config=config_to_dict(config))
