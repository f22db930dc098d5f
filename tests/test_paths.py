"""Every public function that takes a path takes a pathlib.Path as well as text: a model folder, a data file, a reward
file reference, a run folder, an output folder, a recipe.

PATH_ARGUMENTS names each such argument of the public API (grpo_lite.__all__); test_every_path_argument_is_called_here
holds that list to the API, so a new path-taking argument comes with its case.
"""

import inspect
import json

import pytest
import yaml

import grpo_lite
from grpo_lite import build_tiny_model, export, load_model, plan, prepare_dataset, read_metrics, rescore_run, show_run, train, train_stages
from grpo_lite.errors import UserError
from grpo_lite.launch.recipe import read_recipe
from grpo_lite.run.record import read_run

ROWS = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(8)]
QUICK = dict(preset="cpu-smoke", num_generations=4, per_device_train_batch_size=4, max_completion_length=8, dashboard=False)
BREVITY = "def brevity(completions, **kwargs):\n    return [-len(c[0]['content']) / 10 for c in completions]\n"

# (function, argument): each argument of the public API that names a file or folder
PATH_ARGUMENTS = {("load_model", "model_name"), ("build_tiny_model", "path"), ("prepare_dataset", "rows_or_dataset"),
                  ("plan", "model_name_or_config"), ("train", "output_dir"), ("train", "rewards"), ("preview", "rewards"),
                  ("train_stages", "output_dir"), ("warmup_format", "output_dir"), ("LiveDashboard", "output_dir"),
                  ("show_run", "output_dir"), ("read_metrics", "path"), ("rescore_run", "output_dir"),
                  ("export", "out_dir"), ("run_dir", "drive_root"), ("run_demo", "output_dir"), ("run_demo", "model_dir")}


def test_every_path_argument_is_called_here():
    named = {(name, parameter) for name in grpo_lite.__all__ if callable(getattr(grpo_lite, name))
             for parameter, declared in inspect.signature(getattr(grpo_lite, name)).parameters.items()
             if "Path" in str(declared.annotation) or parameter.endswith(("_dir", "path", "_root"))}
    assert named <= PATH_ARGUMENTS, f"path arguments with no case here: {sorted(named - PATH_ARGUMENTS)}"


@pytest.fixture(scope="module")
def run_from_paths(tmp_path_factory):
    """A run given only paths: the model folder, the data file, the reward file and the output folder as pathlib.Path."""
    root = tmp_path_factory.mktemp("paths")
    folder = build_tiny_model(root / "model")
    (root / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    (root / "my_rewards.py").write_text(BREVITY)
    model, tokenizer = load_model(folder, lora_rank=8)
    dataset = prepare_dataset(root / "rows.jsonl", system_prompt=None)
    result = train(model, tokenizer, dataset, [root / "my_rewards.py:brevity", "numeric_correctness_reward"],
                   output_dir=root / "run", max_steps=1, **QUICK)
    return root, model, tokenizer, dataset, result


def test_a_model_loaded_from_a_path_trains_and_its_run_records_the_folder_as_text(run_from_paths):
    root, model, _, _, result = run_from_paths
    assert result.output_dir == root / "run" and [r["step"] for r in read_metrics(root / "run")] == [1]
    run = read_run(root / "run")
    assert run.settings.model == str(root / "model") and run.reward_names == ["brevity", "numeric_correctness_reward"]
    assert run.settings.rewards[0] == f"{root / 'my_rewards.py'}:brevity"
    assert len(prepare_dataset(root / "rows.jsonl", system_prompt=None)) == len(ROWS)


def test_a_run_folder_is_read_from_a_path(run_from_paths):
    root, _, _, dataset, _ = run_from_paths
    assert read_metrics(root / "run")[0]["step"] == 1
    assert show_run(root / "run", view="log") is not None and (root / "run" / "dashboard.png").exists()
    report = rescore_run(root / "run", [root / "my_rewards.py:brevity"], dataset=dataset)
    assert report.rows and all(set(row["scores"]) == {"brevity"} for row in report.rows)


def test_a_path_goes_where_text_goes_before_anything_loads(run_from_paths, tmp_path):
    from grpo_lite import LiveDashboard, preview, run_demo, run_dir

    root, model, tokenizer, dataset, _ = run_from_paths
    shown = preview(model, tokenizer, dataset, root / "my_rewards.py:brevity", n_prompts=1, num_generations=2,
                    max_completion_length=4, preset="cpu-smoke")
    assert shown.functions == ["brevity"] and len(shown.groups) == 1
    assert plan(root / "model", gpu="T4").fits in (True, False)
    (tmp_path / "drive" / "MyDrive").mkdir(parents=True)  # Drive, mounted
    assert run_dir("r", drive=True, drive_root=tmp_path / "drive") == tmp_path / "drive" / "MyDrive" / "grpo-lite" / "r-1"
    assert LiveDashboard(tmp_path / "dash", view="log").output_dir == tmp_path / "dash"
    assert export(model, tokenizer, tmp_path / "adapter") == tmp_path / "adapter"
    assert (tmp_path / "adapter" / "adapter_config.json").exists()
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump({"model": "tiny", "rewards": ["exact_match_reward"],
                                                          "dataset": "rows.jsonl"}))
    (tmp_path / "rows.jsonl").write_text((root / "rows.jsonl").read_text())
    assert read_recipe(tmp_path / "recipe.yaml").dataset == {"path": str(tmp_path / "rows.jsonl")}
    with pytest.raises(UserError, match=f"output_dir '{tmp_path / 'adapter'}' holds files no grpo-lite run wrote"):
        run_demo(tmp_path / "adapter", model_dir=root / "model", max_steps=1, dashboard=False)
    with pytest.raises(UserError, match=r"model '.*nowhere': no such folder"):
        load_model(tmp_path / "nowhere")


def test_train_stages_and_the_format_warm_up_write_to_a_path(run_from_paths, tmp_path):
    from grpo_lite import Stage, warmup_format

    root, model, tokenizer, dataset, _ = run_from_paths
    warmup_format(model, tokenizer, [{"prompt": [{"role": "user", "content": "1 + 1?"}],
                                      "completion": [{"role": "assistant", "content": "2"}]}],
                  output_dir=tmp_path / "warm-up", max_steps=1)
    results = train_stages([Stage(root / "my_rewards.py:brevity", max_steps=1, name="short")], model, tokenizer, dataset,
                           output_dir=tmp_path / "plan", **QUICK)
    assert results[0].output_dir == tmp_path / "plan" / "1-short" and read_metrics(tmp_path / "plan")[0]["stage"] == "short"
