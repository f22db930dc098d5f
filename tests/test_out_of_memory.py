"""Reading an out-of-memory error: the phase from the traceback, the planner's nearest config, the fixes per phase."""

import pytest
import torch

from grpo_lite.guards import out_of_memory as oom
from grpo_lite.machine import stack
from grpo_lite.machine.planner import plan
from grpo_lite.run.config import make_config


def traceback_through(*names):
    """The traceback of a CUDA out-of-memory error raised inside functions with these names, outermost first."""
    def innermost():
        raise torch.cuda.OutOfMemoryError("CUDA out of memory.")

    call = innermost
    for name in reversed(names):
        def outer(inner=call):
            inner()

        outer.__code__ = outer.__code__.replace(co_name=name)
        call = outer
    with pytest.raises(torch.cuda.OutOfMemoryError) as error:
        call()
    return error.value.__traceback__


@pytest.mark.parametrize("names, phase", [
    (("train", "training_step", "_prepare_inputs", "_generate_and_score_completions", "_generate", "generate"), oom.GENERATION),
    (("train", "training_step", "_generate_and_score_completions", "_get_per_token_logps_and_entropies"), oom.SCORING),
    (("train", "training_step", "compute_loss", "_compute_loss", "forward"), oom.LOSS),
    (("train", "training_step", "backward", "_engine_run_backward"), oom.BACKWARD),
    (("train", "_inner_training_loop", "on_train_begin", "evaluate"), oom.ELSEWHERE),
])
def test_the_phase_is_read_from_the_functions_in_the_traceback(names, phase):
    assert oom.where_it_ran_out(traceback_through(*names)) is phase


def test_running_out_in_the_optimizer_step_is_told_by_torch_optim_s_frames():
    weight = torch.nn.Parameter(torch.ones(2))
    weight.grad = torch.ones(2)
    optimizer = torch.optim.AdamW([weight])

    def out_of_memory(optimizer, args, kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory.")

    optimizer.register_step_pre_hook(out_of_memory)
    with pytest.raises(torch.cuda.OutOfMemoryError) as error:
        optimizer.step()
    assert oom.where_it_ran_out(error.value.__traceback__) is oom.OPTIMIZER


RUN = dict(model_name_or_config="Qwen2.5-3B", num_generations=16, max_prompt_tokens=256, max_completion_length=2048,
           lora_rank=16, load_in_4bit=True, gpu_memory_utilization=None, weight_bytes=2.0)


def test_the_nearest_config_is_the_planner_s_suggestion_as_options():
    planned = plan(gpu=15.0, **RUN)
    assert not planned.fits and planned.changes
    fitting, options = oom.nearest_config(RUN, 15.0, 15.0)
    assert options == {f: new for f, (_, new) in planned.changes.items()}
    assert fitting.total_gb == planned.suggestion.total_gb <= 15.0


def test_a_vllm_run_is_offered_a_lower_gpu_memory_utilization_first():
    run = {**RUN, "model_name_or_config": "Qwen2.5-1.5B", "num_generations": 16, "max_completion_length": 512,
           "gpu_memory_utilization": 0.9}
    assert not plan(gpu=24.0, **run).fits  # vLLM's pool, 90% of the card, leaves too little for training
    fitting, options = oom.nearest_config(run, 24.0, 24.0)
    share = options["gpu_memory_utilization"]
    assert list(options) == ["gpu_memory_utilization"] and share < 0.9 and fitting.fits
    assert not plan(gpu=24.0, **{**run, "gpu_memory_utilization": round(share + 0.05, 2)}).fits


@pytest.mark.seam
def test_fixes_per_phase_keep_the_batch_of_each_optimizer_step(tmp_path):
    plain = make_config("cpu-smoke", output_dir=tmp_path, per_device_train_batch_size=4, num_generations=4)
    checkpointed = make_config("cpu-smoke", output_dir=tmp_path, gradient_checkpointing=True)
    # under the name the installed transformers reads: activation_checkpointing from 5.23
    assert oom.phase_fixes(oom.BACKWARD, plain) == {stack.field_name("gradient_checkpointing"): True}
    assert oom.phase_fixes(oom.BACKWARD, checkpointed) == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 2}
    assert oom.phase_fixes(oom.SCORING, plain) == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 2}
    assert oom.phase_fixes(oom.OPTIMIZER, plain) == {"optim": "adamw_8bit"}
    assert oom.phase_fixes(oom.GENERATION, plain) == {}  # the planner's config is the fix there


@pytest.mark.parametrize("num_generations, batch, planned_sequences", [(4096, 4096, 1024), (8, 16, 8), (4, 16, 8), (8, 8, 2)])
def test_the_planner_s_smaller_batch_becomes_options_trl_accepts(tmp_path, num_generations, batch, planned_sequences):
    """The planner sizes the sequences a step holds (the micro-batch), so its suggestion lowers
    per_device_train_batch_size; num_generations follows only where TRL's config would refuse the pair."""
    args = make_config("cpu-smoke", output_dir=tmp_path, num_generations=num_generations, per_device_train_batch_size=batch)
    options = oom.as_run_options({"num_generations": planned_sequences}, args)
    assert options["per_device_train_batch_size"] == planned_sequences
    assert options.get("num_generations", num_generations) == min(num_generations, planned_sequences)
    smaller = make_config("cpu-smoke", output_dir=tmp_path, **{"num_generations": num_generations, **options})  # TRL checks the pair
    assert smaller.per_device_train_batch_size == planned_sequences
