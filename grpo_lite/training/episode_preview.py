"""preview() with tools, an environment or a rollout function: groups of episodes played as training plays them.

A GRPOTrainer is built for the chosen rows as ``train`` builds one (``beta=0``: no reference model) and its generation
step runs once (``_generate_and_score_completions``: each environment reset with its row, the tool loop up to
``max_tool_calling_iterations`` or the rollout function, every reward scored, an environment's ``get_reward`` among
them); nothing is trained.
The episodes come back as samples.jsonl rows (:func:`grpo_lite.monitor.samples.batch_samples`) and go to the same
report as replies do (:func:`grpo_lite.evaluation.group_preview.report_on`): the lab scores the rewards on the
completions as TRL gave them, an environment's reward as TRL scored it (:func:`recorded_reward`), and the report adds
what only episodes show (:func:`grpo_lite.evaluation.episodes.episode_findings`). Without tools or an environment,
:func:`preview` is :func:`grpo_lite.evaluation.group_preview.preview`.
"""

from __future__ import annotations

import tempfile
from typing import Any

from rewards import resolve_rewards
from rewards.calling import private_copy
from rewards.combine import distinct_names

from ..data.prompts import template_kwargs
from ..evaluation import group_preview
from ..evaluation.group_preview import PreviewReport, checked_input, report_on, sampling_settings
from ..guards.user_code import CallFailed, UserCodeError, guard, guard_rollouts
from ..model.inference import Completion
from ..monitor.samples import batch_samples, keep_rollout_episodes
from ..run.config import make_config
from .rollouts import rollout_options
from .trainer import grpo_trainer
from .trl_compat import template_kwargs_field

SCORED_COLUMN = "scored_by_trl/"  # a lab row's column holding a score TRL gave (an environment's reward)


def recorded_reward(name: str):
    """A reward named ``name`` that gives each lab row the score TRL gave it (its ``scored_by_trl/<name>`` column): an
    environment's ``get_reward`` reads the environment after its episode, which the lab cannot replay."""

    def recorded(completions, **columns):
        return list(columns[SCORED_COLUMN + name])

    recorded.__name__ = recorded.__qualname__ = name
    return recorded


def preview(model, tokenizer, dataset, rewards: Any, *, tools=None, environment_factory=None, rollout_func=None, n_prompts: int = 8,
            num_generations: int = 8, max_completion_length: int | None = None, preset: str = "auto", greedy: bool = True,
            batch_size: int = 16, seed: int = 0, chat_template_kwargs: dict[str, Any] | None = None,
            **overrides: Any) -> PreviewReport:
    """:func:`grpo_lite.evaluation.group_preview.preview`, and with ``tools``, ``environment_factory`` or ``rollout_func``
    (as ``train`` takes them) ``num_generations`` episodes of each of the first ``n_prompts`` rows, played by TRL's tool
    loop or the rollout function with the run's settings (``preset`` and ``overrides``, ``max_tool_calling_iterations`` among them). The report's ``episodes``
    are the episodes as samples.jsonl keeps them; its findings add every episode ending at the turn limit, a tool whose
    every call failed, and no episode calling a tool. ``chat_template_kwargs`` as for replies (``None``: those the last
    ``train()`` with this tokenizer used). Episodes are sampled in one batch and have no greedy accuracy
    (``greedy`` and ``batch_size`` are for replies): pass@k stands alone."""
    if tools is None and environment_factory is None and rollout_func is None:
        return group_preview.preview(model, tokenizer, dataset, rewards, n_prompts=n_prompts, num_generations=num_generations,
                                     max_completion_length=max_completion_length, preset=preset, greedy=greedy,
                                     batch_size=batch_size, seed=seed, chat_template_kwargs=chat_template_kwargs, **overrides)
    import torch

    scored_by_environments = environment_factory is not None and isinstance(rewards, (list, tuple)) and not rewards
    dataset = checked_input(dataset, None if scored_by_environments else rewards, num_generations)
    chosen = dataset.select(range(min(n_prompts, len(dataset))))
    rollouts = rollout_options(tokenizer, chosen, tools=tools, environment_factory=environment_factory,
                               rollout_func=rollout_func, scored_by_environments=scored_by_environments)
    played, _ = guard_rollouts(rollouts)  # each call timed and checked as in training, its failures said
    funcs, weights = ([], None) if scored_by_environments else resolve_rewards(rewards)
    if max_completion_length is not None:
        overrides["max_completion_length"] = max_completion_length
    settings = sampling_settings(preset, num_generations=num_generations, **overrides)
    rows = [dict(row) for row in chosen]
    # a dict per sample, as TRL's sampler gives them: TRL writes a rollout function's own keys into each
    inputs = [dict(row) for row in rows for _ in range(num_generations)]
    with tempfile.TemporaryDirectory() as output_dir, torch.random.fork_rng():
        torch.manual_seed(seed)
        config = make_config(preset, output_dir=output_dir, **{**overrides, "beta": 0.0, "report_to": "none",  # no reference model
                             "num_generations": num_generations, "per_device_train_batch_size": len(inputs)},
                             **template_kwargs_field(template_kwargs(tokenizer, chat_template_kwargs)))
        # guarded as training guards them; the lab below scores the rewards again, naming the rows a failure is on
        guarded = [guard(f, name=name) for f, name in zip(funcs, distinct_names(funcs))]
        trainer = grpo_trainer(model, tokenizer, chosen, guarded, config, [], **played)
        keep_rollout_episodes(trainer)
        try:
            batch = trainer._generate_and_score_completions(inputs)
        except CallFailed as failed:  # a rollout function's: no episodes to show
            raise UserCodeError(f"preview: {failed.said}") from None
        episodes = batch_samples(trainer, step=0)
        given = list(trainer._logs["completion"])[-len(inputs):]  # as TRL gave them to the rewards: the episode's messages
    completions = _completions(batch, trainer.eos_token_ids, episodes)
    environment_rewards = [name for name in episodes[0]["rewards"] if name not in distinct_names(funcs)]
    lab_rows = [{**{k: v for k, v in row.items() if k != "prompt"}, "prompt": row["prompt"], "completion": private_copy(text),
                 "completion_ids": list(completion.token_ids),
                 **{SCORED_COLUMN + name: episode["rewards"][name] for name in environment_rewards}}
                for row, text, completion, episode in zip(inputs, given, completions, episodes)]
    groups = [list(range(g * num_generations, (g + 1) * num_generations)) for g in range(len(rows))]
    spec = [*funcs, *map(recorded_reward, environment_rewards)]
    if weights is not None or settings.get("reward_weights"):
        settings["reward_weights"] = [*(settings.get("reward_weights") or weights), *[1.0] * len(environment_rewards)]
    return report_on(lab_rows, groups, completions, spec, settings, [], episodes=episodes,
                     with_tools=tools is not None or environment_factory is not None)


def _completions(batch: dict[str, Any], eos_token_ids, episodes: list[dict[str, Any]]) -> list[Completion]:
    """Each episode's tokens the model wrote (the tools' results left out, as the loss leaves them: TRL's ``tool_mask``),
    and whether it was cut at max_completion_length (its last token no end of turn, as TRL counts
    completions/clipped_ratio)."""
    completions = []
    written = batch.get("tool_mask", batch["completion_mask"]).tolist()
    for ids, mask, model_wrote, episode in zip(batch["completion_ids"].tolist(), batch["completion_mask"].tolist(), written,
                                               episodes):
        kept = [token for token, keep in zip(ids, mask) if keep]
        own = tuple(token for token, keep, wrote in zip(ids, mask, model_wrote) if keep and wrote)
        completions.append(Completion(episode["completion"], own, not kept or kept[-1] not in eos_token_ids))
    return completions
