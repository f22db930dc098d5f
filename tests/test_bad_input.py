"""Bad input, as a new user gives it: each case ends in the exact user-facing outcome.

From the command line: exit code 2, one ``grpo-lite: ...`` line per problem naming the file and line, the key or
the column, with its fix, and no traceback; nothing is loaded and no run folder is made. From Python: the
exception type and a message naming the thing. A few cases are input plain TRL accepts, which must work here too.
docs/errors.md groups these messages by family.
"""

import functools
import json
import re
import sys

import numpy as np
import pytest
import torch
import yaml
from stacks import removed_here

from grpo_lite import export, load_model, prepare_dataset, train
from grpo_lite.data.prepare import DatasetError
from grpo_lite.guards.user_code import guard
from grpo_lite.launch.cli import main
from grpo_lite.model.exporter import ExportError
from grpo_lite.run.record import read_run
from grpo_lite.run.settings import ConfigError
from rewards import check_rewards
from rewards.calling import check_columns, missing_columns
from rewards.combine import reward_name
from rewards.errors import RewardError

RECIPE = {"model": "tiny", "dataset": {"builtin": "arithmetic"}, "rewards": ["numeric_correctness_reward"],
          "preset": "cpu-smoke", "overrides": {"max_steps": 1}}


def _with(**changes):
    recipe = json.loads(json.dumps(RECIPE))
    for key, value in changes.items():
        section, _, name = key.partition("__")
        if value is _DROP:
            recipe.pop(section)
        elif name:
            recipe.setdefault(section, {})[name] = value
        else:
            recipe[section] = value
    return yaml.safe_dump(recipe)


_DROP = object()
BAD_MODULE = "import os\nKEY = os.environ['JUDGE_API_KEY']\ndef judge(completions, **kwargs):\n    return [0.0] * len(completions)\n"
NO_KWARGS = "def strict(completions):\n    return [0.0] * len(completions)\n"

# (case, files written into the working folder, the command's arguments after `grpo-lite`, the lines it must say)
CLI = [
    ("yaml-not-yaml", {"run.yaml": "model: [tiny\nrewards: x\n"}, ["train", "run.yaml"],
     ["run.yaml, line 2, column 8: not valid YAML"]),
    ("yaml-a-list", {"run.yaml": "- model: tiny\n"}, ["train", "run.yaml"], ["run.yaml: a run YAML is a mapping of settings"]),
    ("yaml-binary", {"run.yaml": b"\xff\xfe\x00model"}, ["train", "run.yaml"], ["run.yaml: not a text file"]),
    ("yaml-missing", {}, ["train", "nope.yaml"], ["run config 'nope.yaml' does not exist"]),
    ("unknown-setting", {"run.yaml": _with(modle="tiny")}, ["train", "run.yaml"],
     ["run.yaml: unknown setting 'modle'; did you mean model?"]),
    ("model-required", {"run.yaml": _with(model=_DROP)}, ["train", "run.yaml"], ["run.yaml: 'model' is required"]),
    ("rewards-required", {"run.yaml": _with(rewards=_DROP)}, ["train", "run.yaml"], ["run.yaml: 'rewards' is required"]),
    ("lora-rank-text", {"run.yaml": _with(load__lora_rank="big")}, ["train", "run.yaml"],
     ["the run: load.lora_rank='big': give a LoRA rank of 1 or more"]),
    ("lora-rank-zero", {"run.yaml": _with(load__lora_rank=0)}, ["train", "run.yaml"],
     ["the run: load.lora_rank=0: give a LoRA rank of 1 or more (16 is usual), or null/None to train every weight"]),
    ("max-seq-length-negative", {"run.yaml": _with(load__max_seq_length=-1)}, ["train", "run.yaml"],
     ["the run: load.max_seq_length=-1: give the longest prompt + completion in tokens"]),
    ("backend-unknown", {"run.yaml": _with(load__backend="gpu")}, ["train", "run.yaml"],
     ["the run: load.backend='gpu': use one of auto, unsloth, transformers, cpu"]),
    ("fast-inference-text", {"run.yaml": _with(load__fast_inference="maybe")}, ["train", "run.yaml"],
     ["the run: load.fast_inference='maybe': use true, false or auto"]),
    ("vllm-share-over-one", {"run.yaml": _with(load__gpu_memory_utilization=1.5)}, ["train", "run.yaml"],
     ["the run: load.gpu_memory_utilization=1.5: give vLLM's share of the GPU between 0 and 1"]),
    ("target-modules-empty", {"run.yaml": _with(load__target_modules=[])}, ["train", "run.yaml"],
     ["the run: load.target_modules=[]: give module names"]),
    ("load-in-4bit-text", {"run.yaml": _with(load__load_in_4bit="sure")}, ["train", "run.yaml"],
     ["the run: load.load_in_4bit='sure': use true or false"]),
    ("load-unknown-key", {"run.yaml": _with(load__max_seq_len=512)}, ["train", "run.yaml"],
     ["run.yaml: load: unknown setting 'max_seq_len'; did you mean max_seq_length?"]),
    ("learning-rate-text", {"run.yaml": _with(overrides__learning_rate="fast")}, ["train", "run.yaml"],
     ["the run: learning_rate='fast': give a number"]),
    ("max-steps-negative", {"run.yaml": _with(overrides__max_steps=-5)}, ["train", "run.yaml"],
     ["the run: max_steps=-5: give a positive number of steps, or -1 to train for num_train_epochs"]),
    ("max-steps-fraction", {"run.yaml": _with(overrides__max_steps=2.5)}, ["train", "run.yaml"],
     ["the run: max_steps=2.5: give a whole number"]),
    ("one-generation", {"run.yaml": _with(overrides__num_generations=1)}, ["train", "run.yaml"],
     ["the run: num_generations=1: GRPO compares completions within a group"]),
    ("beta-negative", {"run.yaml": _with(overrides__beta=-0.1)}, ["train", "run.yaml"],
     ["the run: beta=-0.1: the KL coefficient must be >= 0"]),
    ("temperature-zero", {"run.yaml": _with(overrides__temperature=0)}, ["train", "run.yaml"],
     ["the run: temperature=0: GRPO samples its groups, so give a temperature above 0"]),
    ("top-p-over-one", {"run.yaml": _with(overrides__top_p=1.5)}, ["train", "run.yaml"],
     ["the run: top_p=1.5: give a probability mass in (0, 1]"]),
    ("batch-zero", {"run.yaml": _with(overrides__per_device_train_batch_size=0)}, ["train", "run.yaml"],
     ["the run: per_device_train_batch_size=0: give the completions per device per step, 1 or more"]),
    ("accumulation-zero", {"run.yaml": _with(overrides__gradient_accumulation_steps=0)}, ["train", "run.yaml"],
     ["the run: gradient_accumulation_steps=0: give the steps to accumulate, 1 or more"]),
    ("bf16-and-fp16", {"run.yaml": _with(overrides__bf16=True, overrides__fp16=True, overrides__use_cpu=False)},
     ["train", "run.yaml"], ["the run: bf16=True and fp16=True together: pick one"]),
    ("override-typo", {"run.yaml": _with(overrides__num_generation=4)}, ["train", "run.yaml"],
     ["the run: 'num_generation' is not a GRPOConfig option; did you mean num_generations"]),
    ("logging-dir", {"run.yaml": _with(overrides__logging_dir="tb")}, ["train", "run.yaml"],
     ["the run: logging_dir: transformers 5 removed it; TensorBoard writes under output_dir unless"]),
    ("warmup-ratio-and-steps", {"run.yaml": _with(overrides__warmup_ratio=0.1, overrides__warmup_steps=5)}, ["train", "run.yaml"],
     ["the run: warmup_ratio=0.1 and warmup_steps=5 both given: warmup_ratio is the old name of warmup_steps; keep warmup_steps"]),
    ("warmup-ratio-over-one", {"run.yaml": _with(overrides__warmup_ratio=5)}, ["train", "run.yaml"],
     ["the run: warmup_ratio=5: give a ratio of the steps from 0 to below 1"]),
    ("max-prompt-length-text", {"run.yaml": _with(overrides__max_prompt_length="long")}, ["train", "run.yaml"],
     ["the run: max_prompt_length='long': give the longest prompt in tokens"]),
    ("batch-not-divisible", {"run.yaml": _with(overrides__per_device_train_batch_size=3, overrides__num_generations=4,
                                               overrides__steps_per_generation=1)},
     ["train", "run.yaml"], ["the run: the generation batch (3 completions"]),
    ("use-vllm-without-vllm", {"run.yaml": _with(overrides__use_vllm=True)}, ["train", "run.yaml"],
     ["the run: use_vllm=True needs vLLM, which is not installed"]),
    ("preset-typo", {"run.yaml": _with(preset="t4")}, ["train", "run.yaml"], ["the run: unknown preset 't4'; did you mean t4-16gb?"]),
    ("gpu-preset-on-cpu", {"run.yaml": _with(preset="t4-16gb")}, ["train", "run.yaml"],
     ["this preset uses bf16/fp16, which needs a GPU"]),
    ("reward-typo", {"run.yaml": _with(rewards=["gsm8kk"])}, ["train", "run.yaml"],
     ["the run: unknown reward 'gsm8kk'; did you mean gsm8k?"]),
    ("reward-module-missing", {"run.yaml": _with(rewards=["no_such_module_here:judge"])}, ["train", "run.yaml"],
     ["the run: reward 'no_such_module_here:judge': cannot import module 'no_such_module_here'"]),
    ("reward-module-raises", {"run.yaml": _with(rewards=["judge_needs_key:judge"]), "judge_needs_key.py": BAD_MODULE},
     ["train", "run.yaml"], ["importing module 'judge_needs_key' raised KeyError: 'JUDGE_API_KEY'"]),
    ("reward-attribute-missing", {"run.yaml": _with(rewards=["plain_rewards_a:jduge"]),
                                  "plain_rewards_a.py": BAD_MODULE.replace("KEY = os.environ['JUDGE_API_KEY']\n", "")},
     ["train", "run.yaml"], ["reward 'plain_rewards_a:jduge': module 'plain_rewards_a' has no 'jduge'; did you mean judge?"]),
    ("reward-without-kwargs", {"run.yaml": _with(rewards=["strict_rewards_b:strict"]), "strict_rewards_b.py": NO_KWARGS},
     ["train", "run.yaml"], ["reward function 'strict' must accept **kwargs"]),
    ("reward-path-half", {"run.yaml": _with(rewards=["my_rewards:"])}, ["train", "run.yaml"],
     ["reward 'my_rewards:': write 'module:function'"]),
    ("reward-weights-count", {"run.yaml": _with(reward_weights=[1.0, 2.0])}, ["train", "run.yaml"],
     ["the run: reward_weights has 2 values for the 1 reward functions"]),
    ("reward-timeout-zero", {"run.yaml": _with(reward_timeout=0)}, ["train", "run.yaml"],
     ["the run: reward_timeout=0: give the seconds one reward call may take"]),
    ("reward-timeout-text", {"run.yaml": _with(reward_timeout="soon")}, ["train", "run.yaml"],
     ["the run: reward_timeout='soon': give the seconds"]),
    ("model-folder-typo", {"run.yaml": _with(model="./models/my-modle"), "models/my-model/config.json": "{}"},
     ["train", "run.yaml"], ["the run: model './models/my-modle': no such folder; did you mean my-model?, and not a hub id"]),
    ("model-is-a-file", {"run.yaml": _with(model="weights.bin"), "weights.bin": "x"}, ["train", "run.yaml"],
     ["the run: model 'weights.bin' is a file; give the folder a model was saved to"]),
    ("model-folder-without-config", {"run.yaml": _with(model="empty-model"), "empty-model/README.md": "x"},
     ["train", "run.yaml"], ["the run: model 'empty-model': the folder has no config.json"]),
    ("model-not-a-hub-id", {"run.yaml": _with(model="qwen 2.5 instruct")}, ["train", "run.yaml"],
     ["the run: model 'qwen 2.5 instruct': no such folder, and not a hub id (namespace/name)"]),
    ("output-dir-is-a-file", {"run.yaml": _with(output_dir="out.txt"), "out.txt": "x"}, ["train", "run.yaml"],
     ["the run: output_dir 'out.txt' is a file; pick a folder for the run's files"]),
    ("output-dir-under-a-file", {"run.yaml": _with(output_dir="out.txt/run"), "out.txt": "x"}, ["train", "run.yaml"],
     ["the run: output_dir 'out.txt/run' cannot be made: out.txt is a file"]),
    ("output-dir-flag-is-a-file", {"run.yaml": _with(), "out.txt": "x"}, ["train", "run.yaml", "--output-dir", "out.txt"],
     ["the run: output_dir 'out.txt' is a file"]),
    ("no-dataset", {"run.yaml": _with(dataset=_DROP)}, ["train", "run.yaml"], ["the run has no dataset: add dataset:"]),
    ("dataset-file-missing", {"run.yaml": _with(dataset={"path": "train.jsonl"})}, ["train", "run.yaml"],
     ["the run: dataset: data file 'train.jsonl' does not exist"]),
    ("dataset-broken-line", {"run.yaml": _with(dataset={"path": "train.jsonl"}),
                             "train.jsonl": '{"question": "1+1?", "answer": "2"}\n\n{"question": "2+2?", "answer: "4"}\n'},
     ["train", "run.yaml"], ["train.jsonl, line 3: not JSON (Expecting ':' delimiter at column 32)"]),
    ("dataset-empty-file", {"run.yaml": _with(dataset={"path": "train.jsonl"}), "train.jsonl": ""}, ["train", "run.yaml"],
     ["the run: dataset: train.jsonl has no rows"]),
    ("dataset-line-not-object", {"run.yaml": _with(dataset={"path": "train.jsonl"}), "train.jsonl": '["1+1?", "2"]\n'},
     ["train", "run.yaml"], ["train.jsonl, line 1: a list, expected a JSON object of column -> value"]),
    ("dataset-wrong-column", {"run.yaml": _with(dataset={"path": "train.jsonl", "question": "q"}),
                              "train.jsonl": '{"question": "1+1?", "answer": "2"}\n'},
     ["train", "run.yaml"], ["train.jsonl: no column 'q' (columns: answer, question); name the right one (question: <column>)"]),
    ("dataset-no-answer-column", {"run.yaml": _with(dataset={"path": "train.csv"}), "train.csv": "question,gold\n1+1?,2\n"},
     ["train", "run.yaml"], ["train.csv: no column 'answer' (columns: gold, question); name the right one (answer: <column>)"]),
    ("dataset-prepared-without-prompt", {"run.yaml": _with(dataset={"path": "train.jsonl", "prepared": True}),
                                         "train.jsonl": '{"question": "1+1?"}\n'},
     ["train", "run.yaml"], ["train.jsonl: no column 'prompt'"]),
    ("dataset-builtin-typo", {"run.yaml": _with(dataset={"builtin": "arithmetc"})}, ["train", "run.yaml"],
     ["the run: dataset: no built-in dataset 'arithmetc'; did you mean arithmetic?"]),
    ("dataset-unknown-format", {"run.yaml": _with(dataset={"path": "train.txt"}), "train.txt": "1+1?\n"},
     ["train", "run.yaml"], ["cannot read 'train.txt': use a .csv, .jsonl or .json file"]),
    ("dataset-neither-path-nor-builtin", {"run.yaml": _with(dataset={"question": "q"})}, ["train", "run.yaml"],
     ["the run: dataset: give path: <a .jsonl, .json or .csv file> or builtin: <name>"]),
    ("dataset-json-item-not-object", {"run.yaml": _with(dataset={"path": "train.json"}),
                                      "train.json": '[{"question": "1+1?", "answer": "2"}, 7]'},
     ["train", "run.yaml"], ["train.json: item 1 is a int, expected an object of column -> value"]),
    ("dataset-not-utf8", {"run.yaml": _with(dataset={"path": "train.jsonl"}), "train.jsonl": b'{"question": "\xff"}\n'},
     ["train", "run.yaml"], ["train.jsonl: not UTF-8 text (invalid start byte at byte 14)"]),
    ("heldout-samples-zero", {"run.yaml": _with(heldout={"builtin": "arithmetic", "samples": 0})}, ["train", "run.yaml"],
     ["the run: heldout.samples=0: give the sampled completions per held-out row (1: greedy only; heldout_samples in train())"]),
    ("heldout-n-text", {"run.yaml": _with(heldout={"builtin": "arithmetic", "n": "all"})}, ["train", "run.yaml"],
     ["the run: heldout.n='all': give how many held-out rows to evaluate (e.g. 200; heldout_n in train())"]),
    ("heldout-file-missing", {"run.yaml": _with(heldout={"path": "test.jsonl"})}, ["train", "run.yaml"],
     ["the run: heldout: data file 'test.jsonl' does not exist"]),
    ("set-without-value", {"run.yaml": _with()}, ["train", "run.yaml", "--set", "max_steps"],
     ["--set 'max_steps': write KEY=VALUE, e.g. --set max_steps=50"]),
    ("set-load-typo", {"run.yaml": _with()}, ["train", "run.yaml", "--set", "load.lora_rnak=8"],
     ["--set load.lora_rnak: unknown setting 'lora_rnak'; did you mean lora_rank"]),
    ("set-learning-rate-text", {"run.yaml": _with()}, ["train", "run.yaml", "--set", "learning_rate=quick"],
     ["the run: learning_rate='quick': give a number"]),
    ("every-problem-at-once", {"run.yaml": _with(reward_timeout=-1, overrides__beta=-1, rewards=["gsm8kk"])},
     ["train", "run.yaml"], ["the run: reward_timeout=-1", "the run: beta=-1", "the run: unknown reward 'gsm8kk'"]),
    # the second wave: shapes the YAML allows that a setting does not, read by each setting's declared shape
    ("yaml-key-twice", {"run.yaml": _with() + "model: tiny\n"}, ["train", "run.yaml"],
     ["run.yaml, line 9: 'model' is given twice (first on line 3); keep one"]),
    ("yaml-nested-key-twice", {"run.yaml": "model: tiny\nrewards: [exact_match_reward]\noverrides: {max_steps: 1, max_steps: 2}\n"},
     ["train", "run.yaml"], ["run.yaml, line 3: 'max_steps' is given twice (first on line 3); keep one"]),
    ("set-key-twice", {"run.yaml": _with()}, ["train", "run.yaml", "--set", "load={lora_rank: 8, lora_rank: 4}"],
     ["--set load: '{lora_rank: 8, lora_rank: 4}' is not a YAML value ('lora_rank' is given twice"]),
    ("set-not-yaml", {"run.yaml": _with()}, ["train", "run.yaml", "--set", "rewards=[exact_match_reward"],
     ["--set rewards: '[exact_match_reward' is not a YAML value"]),
    ("dataset-a-plain-path", {"run.yaml": _with(dataset="train.jsonl")}, ["train", "run.yaml"],
     ["the run: dataset: data file 'train.jsonl' does not exist"]),
    ("set-dataset-a-plain-path", {"run.yaml": _with()}, ["train", "run.yaml", "--set", "dataset=train.jsonl"],
     ["the run: dataset: data file 'train.jsonl' does not exist"]),
    ("reward-weights-a-mapping", {"run.yaml": _with(reward_weights={"numeric_correctness_reward": 2.0})}, ["train", "run.yaml"],
     ["the run: reward_weights={'numeric_correctness_reward': 2.0}: give one number per reward function (e.g. [2.0, 0.5])"]),
    ("set-reward-weights-a-mapping", {"run.yaml": _with()}, ["train", "run.yaml", "--set", "reward_weights={a: 1}"],
     ["the run: reward_weights={'a': 1}: give one number per reward function"]),
    ("rewards-a-mapping", {"run.yaml": _with(rewards={"numeric_correctness_reward": 2.0})}, ["train", "run.yaml"],
     ["the run: rewards={'numeric_correctness_reward': 2.0}: give reward or preset names", "weights go in reward_weights"]),
    ("load-a-string", {"run.yaml": _with(load="fast")}, ["train", "run.yaml"],
     ["run.yaml: load='fast': give a mapping of load settings (e.g. {lora_rank: 16, max_seq_length: 1024})"]),
    ("overrides-a-string", {"run.yaml": _with(overrides="max_steps=5")}, ["train", "run.yaml"],
     ["run.yaml: overrides='max_steps=5': give a mapping of GRPOConfig field -> value"]),
    ("set-load-a-string", {"run.yaml": _with()}, ["train", "run.yaml", "--set", "load=fast"],
     ["--set load: load='fast': give a mapping of load settings"]),
    ("heldout-a-number", {"run.yaml": _with(heldout=5)}, ["train", "run.yaml"], ["run.yaml: heldout=5: give {path: test.jsonl"]),
    ("learning-rate-nan", {"run.yaml": _with(overrides__learning_rate=float("nan"))}, ["train", "run.yaml"],
     ["the run: learning_rate=nan: give a number (NaN and infinity are not numbers a run can use)"]),
    ("reward-timeout-inf", {"run.yaml": _with(reward_timeout=float("inf"))}, ["train", "run.yaml"],
     ["the run: reward_timeout=inf: give the seconds one reward call may take (e.g. 600), or null/None for no limit (NaN"]),
    ("lora-dropout-nan", {"run.yaml": _with(load__lora_dropout=float("nan"))}, ["train", "run.yaml"],
     ["the run: load.lora_dropout=nan: give a dropout between 0 and 1"]),
    ("set-learning-rate-inf", {"run.yaml": _with()}, ["train", "run.yaml", "--set", "learning_rate=inf"],
     ["the run: learning_rate='inf': give a number"]),
    ("model-a-number", {"run.yaml": _with(model=7)}, ["train", "run.yaml"],
     ["the run: model=7: give a hub id, a local model folder, or 'tiny'"]),
    ("enum-typo", {"run.yaml": _with(overrides__lr_scheduler_type="cosin")}, ["train", "run.yaml"],
     ["the run: lr_scheduler_type='cosin': use linear, cosine,", "; did you mean cosine"]),
    ("output-dir-among-overrides", {"run.yaml": _with(overrides__output_dir="elsewhere")}, ["train", "run.yaml"],
     ["the run: output_dir='elsewhere' among the GRPOConfig fields: it is the run's own setting"]),
    ("dataset-unknown-key", {"run.yaml": _with(dataset={"builtin": "arithmetic", "qestion": "q"})}, ["train", "run.yaml"],
     ["the run: dataset: unknown setting 'qestion'; did you mean question?"]),
    ("dataset-builtin-wrong-column", {"run.yaml": _with(dataset={"builtin": "arithmetic", "question": "problem"})},
     ["train", "run.yaml"], ["the run: dataset: built-in arithmetic: no column 'problem' (columns: answer, question)"]),
    ("dataset-prepared-builtin", {"run.yaml": _with(dataset={"builtin": "arithmetic", "prepared": True})}, ["train", "run.yaml"],
     ["the run: dataset: prepared: true rows are trained as they are from their file (path:), so builtin cannot apply"]),
    ("dataset-prepared-empty-prompt", {"run.yaml": _with(dataset={"path": "train.jsonl", "prepared": True}), "train.jsonl":
     '{"prompt": [{"role": "user", "content": "1+1?"}]}\n\n{"prompt": [{"role": "system", "content": "be brief"}, '
     '{"role": "user", "content": " "}]}\n'},
     ["train", "run.yaml"], ["the run: dataset: train.jsonl, line 3, column 'prompt': the chat prompt is empty (message 1, the "
                             "user's, has no text)"]),
    ("dataset-prepared-no-messages", {"run.yaml": _with(dataset={"path": "train.json", "prepared": True}),
                                      "train.json": '[{"prompt": [{"role": "user", "content": "1+1?"}]}, {"prompt": []}]'},
     ["train", "run.yaml"], ["the run: dataset: train.json, item 1, column 'prompt': the chat prompt is empty (no messages)"]),
    ("heldout-n-without-rows", {"run.yaml": _with(heldout={"n": 50})}, ["train", "run.yaml"],
     ["the run: heldout: give path: <a .jsonl, .json or .csv file> or builtin: <name> for the held-out rows"]),
    ("reward-file-missing", {"run.yaml": _with(rewards=["lab/my_rewrds.py:judge"]), "lab/my_rewards.py": NO_KWARGS},
     ["train", "run.yaml"], ["the run: reward 'lab/my_rewrds.py:judge': no file 'lab/my_rewrds.py'; did you mean my_rewards.py?"]),
    ("reward-file-without-function", {"run.yaml": _with(rewards=["my_rewards.py"])}, ["train", "run.yaml"],
     ["the run: reward 'my_rewards.py': name the function in the file too: 'my_rewards.py:<function>'"]),
    ("plan-negative-length", {}, ["plan", "Qwen2.5-1.5B", "--max-prompt-tokens", "-5"],
     ["plan: max_prompt_tokens=-5: give the longest prompt in tokens, 1 or more"]),
    ("plan-one-generation", {}, ["plan", "Qwen2.5-1.5B", "--num-generations", "1", "--gpu", "0"],
     ["plan: gpu=0.0: give a GPU's name", "plan: num_generations=1: GRPO compares completions within a group"]),
    ("flag-not-a-number", {}, ["plan", "Qwen2.5-1.5B", "--num-generations", "eight"],
     ["plan: argument --num-generations: invalid int value: 'eight'"]),
    ("score-unknown-reward", {"rows.jsonl": '{"completion": "4", "answer": "4"}\n'},
     ["score", "--data", "rows.jsonl", "--rewards", "exact_mach_reward"], ["unknown reward 'exact_mach_reward'"]),
    ("score-data-missing", {}, ["score", "--data", "rows.jsonl", "--rewards", "exact_match_reward"],
     ["--data rows.jsonl: no such file or folder"]),
    ("plan-unknown-model", {}, ["plan", "Qwen9-1B"], ["plan: unknown model 'Qwen9-1B'"]),
    ("plan-unknown-gpu", {}, ["plan", "Qwen2.5-1.5B", "--gpu", "T5"], ["plan: unknown gpu 'T5'"]),
    ("launch-kit-missing-recipe", {}, ["launch-kit", "nope.yaml"], ["run config 'nope.yaml' does not exist"]),
    ("launch-kit-corrupt-run-yaml", {"run/run.yaml": "model: tiny\nrewards: [a\n"}, ["launch-kit", "run"],
     ["run/run.yaml, line 3, column 1: not valid YAML"]),
    ("launch-kit-one-gpu", {"run.yaml": _with()}, ["launch-kit", "run.yaml", "--num-gpus", "1"],
     ["num_gpus must be 2 or more for the multi-GPU commands"]),
    ("demo-too-many-heldout", {}, ["demo", "--heldout-n", "5000", "--output-dir", "demo"], ["heldout_n=5000: use 1 to 200"]),
]


# old fields the installed release may still have, and then takes as written
STACK_MARKS = {"logging-dir": removed_here("logging_dir"), "warmup-ratio-and-steps": removed_here("warmup_ratio")}


@pytest.mark.parametrize("case, files, argv, said", [pytest.param(*case, id=case[0], marks=STACK_MARKS.get(case[0], ())) for case in CLI])
def test_the_command_line_says_what_is_wrong_in_one_line_each_and_exits_2(case, files, argv, said, tmp_path, monkeypatch,
                                                                         capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GRPO_LITE_DEBUG", raising=False)
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    before = sorted(p.name for p in tmp_path.iterdir())
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("grpo-lite: ")]
    assert rc == 2, err
    assert "Traceback" not in err
    assert not [line for line in err.splitlines() if re.match(r"grpo-lite (?!warning:)[^:]*:", line)], err  # one prefix
    for expected in said:
        assert any(expected in line for line in lines), f"{expected!r} not in:\n{err}"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == before  # no run folder was made


def test_debug_shows_the_traceback_of_a_user_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text(_with(overrides__beta=-1))
    with pytest.raises(ConfigError, match="beta=-1"):
        main(["--debug", "train", "run.yaml"])
    monkeypatch.setenv("GRPO_LITE_DEBUG", "1")
    with pytest.raises(ConfigError, match="beta=-1"):
        main(["train", "run.yaml"])


def test_numbers_given_as_text_are_read_as_numbers_as_hf_argument_parsers_read_them(tmp_path):
    from grpo_lite.launch.recipe import apply_settings, read_recipe

    (tmp_path / "run.yaml").write_text("model: tiny\nrewards: [exact_match_reward]\noverrides: {learning_rate: 1e-5}\n")
    settings = apply_settings(read_recipe(tmp_path / "run.yaml"), ["max_steps=20", "beta=4e-2"])
    assert yaml.safe_load("x: 1e-5")["x"] == "1e-5"  # YAML 1.1 reads it as text
    assert settings.overrides == {"learning_rate": 1e-5, "max_steps": 20, "beta": 0.04}
    assert settings.problems() == []


# --- from Python ---------------------------------------------------------------------------------------------------

ROWS = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(8)]
QUICK = dict(preset="cpu-smoke", max_steps=1, num_generations=4, per_device_train_batch_size=4, max_completion_length=8,
             dashboard=False)


@pytest.fixture
def prepared():
    return prepare_dataset(ROWS, system_prompt=None)


def _file(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def test_an_empty_jsonl_file_names_the_file(tmp_path):
    with pytest.raises(DatasetError, match=r"empty\.jsonl has no rows"):
        prepare_dataset(_file(tmp_path, "empty.jsonl", "\n\n"))


def test_a_broken_jsonl_line_names_the_file_and_line(tmp_path):
    with pytest.raises(DatasetError, match=r"bad\.jsonl, line 2: not JSON \(Expecting value at column 14\)"):
        prepare_dataset(_file(tmp_path, "bad.jsonl", '{"question": "a", "answer": "1"}\n{"question": , "answer": "2"}\n'))


def test_an_empty_dataset_says_it_has_no_rows():
    from datasets import Dataset

    with pytest.raises(DatasetError, match="the dataset has no rows"):
        prepare_dataset(Dataset.from_list([]))


def test_a_missing_question_column_is_named():
    with pytest.raises(DatasetError, match=r"column 'prompt_text' \(the question\) is missing; the data has columns"):
        prepare_dataset(ROWS, question="prompt_text")


def test_every_prompt_over_the_limit_is_an_error_naming_the_limit_that_keeps_them(tiny_model):
    from grpo_lite.data.prepare import prompt_lengths

    _, tokenizer = tiny_model
    lengths = prompt_lengths(prepare_dataset(ROWS, tokenizer=tokenizer), tokenizer)
    span = f"{min(lengths)}-{max(lengths)}" if min(lengths) < max(lengths) else f"{max(lengths)}"
    with pytest.raises(DatasetError, match=rf"^max_prompt_tokens=2 drops all {len(ROWS)} rows: their prompts are {span} tokens "
                                           rf"as the chat template renders them; max_prompt_tokens={max(lengths)} keeps them all$"):
        prepare_dataset(ROWS, tokenizer=tokenizer, max_prompt_tokens=2)
    assert len(prepare_dataset(ROWS, tokenizer=tokenizer, max_prompt_tokens=max(lengths))) == len(ROWS)


def test_train_given_a_list_of_rows_says_to_prepare_it(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    with pytest.raises(DatasetError, match="dataset is a list, not a datasets.Dataset; build it with grpo_lite.prepare_dataset"):
        train(model, tokenizer, ROWS, "numeric_correctness_reward", output_dir=tmp_path / "run", **QUICK)


def test_train_on_no_rows_is_an_error(tiny_model, prepared, tmp_path):
    model, tokenizer = tiny_model
    with pytest.raises(DatasetError, match="the dataset has no rows, so there is nothing to train on"):
        train(model, tokenizer, prepared.select([]), "numeric_correctness_reward", output_dir=tmp_path / "run", **QUICK)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("keywords, message", [
    ({"max_steps": -5}, "max_steps=-5: give a positive number of steps"),
    ({"learning_rate": "fast"}, "learning_rate='fast': give a number"),
    ({"temperature": -1.0}, "temperature=-1.0: GRPO samples its groups"),
    ({"reward_weights": [1.0, 2.0]}, "reward_weights has 2 values for the 1 reward functions"),
    ({"heldout_samples": 0, "heldout": "rows"}, "heldout.samples=0"),
], ids=["max_steps", "learning_rate", "temperature", "reward_weights", "heldout_samples"])
def test_train_refuses_settings_before_the_run_folder_exists(keywords, message, tiny_model, prepared, tmp_path):
    model, tokenizer = tiny_model
    if keywords.get("heldout") == "rows":
        keywords["heldout"] = prepared
    with pytest.raises(ConfigError, match=message):
        train(model, tokenizer, prepared, "numeric_correctness_reward", output_dir=tmp_path / "run", **{**QUICK, **keywords})
    assert not (tmp_path / "run").exists()


class _TestsReward:
    def __call__(self, completions, test_cases, **kwargs):
        return [0.0] * len(completions)


def _needs_solution(completions, solution, **kwargs):
    return [0.0] * len(completions)


async def _async_needs_tests(completions, *, test_cases, **kwargs):
    return [0.0] * len(completions)


def _needs_prompt(prompt, completions, **kwargs):  # TRL passes the prompts as `prompts`, never the prompt column
    return [0.0] * len(completions)


NEEDS_COLUMN = {
    "a function": (_needs_solution, "'_needs_solution' needs column 'solution'"),
    "keyword-only, async": (_async_needs_tests, "'_async_needs_tests' needs column 'test_cases'"),
    "a callable object": (_TestsReward(), "'_TestsReward' needs column 'test_cases'"),
    "a partial": (functools.partial(lambda completions, answer, solution, **kwargs: [0.0] * len(completions), answer=None),
                  "'<lambda>' needs column 'solution'"),
    "the prompt column": (_needs_prompt, "'_needs_prompt' needs column 'prompt'"),
}


@pytest.mark.parametrize("case", NEEDS_COLUMN, ids=list(NEEDS_COLUMN))
def test_a_reward_needing_a_column_the_data_lacks_is_refused_before_the_run_folder_exists(case, tiny_model, prepared, tmp_path):
    func, said = NEEDS_COLUMN[case]
    model, tokenizer = tiny_model
    with pytest.raises(RewardError, match=rf"reward {re.escape(said)}.*which the dataset lacks \(its columns: question, prompt, answer\)"):
        train(model, tokenizer, prepared, ["numeric_correctness_reward", func], output_dir=tmp_path / "run", **QUICK)
    assert not (tmp_path / "run").exists()
    report = check_rewards([func], [{"prompt": "2+2?", "completion": "4", "answer": "4"}])
    assert not report.ok and [(p.kind, p.function) for p in report.problems] == [("missing_column", reward_name(func))]
    assert said.split("needs ")[1] in report.problems[0].message


def test_a_reward_given_everything_it_requires_is_not_refused():
    def uses_all(prompts, completions, completion_ids, trainer_state, log_extra, log_metric, answer, level=1, *, note=None, **kwargs):
        return [0.0] * len(completions)

    assert missing_columns(uses_all, ["prompt", "answer"]) == []
    assert missing_columns(uses_all, ["prompt"]) == ["answer"]
    check_columns([uses_all, _needs_solution], ["prompt", "answer", "solution"])


def test_train_into_a_file_is_refused(tiny_model, prepared, tmp_path):
    model, tokenizer = tiny_model
    with pytest.raises(ConfigError, match=r"output_dir '.*notes\.txt' is a file"):
        train(model, tokenizer, prepared, "numeric_correctness_reward", output_dir=_file(tmp_path, "notes.txt", "x"), **QUICK)


@pytest.mark.parametrize("keywords, message", [
    ({"lora_rank": 0}, "load_model: lora_rank=0: give a LoRA rank of 1 or more"),
    ({"lora_rank": "16"}, "load_model: lora_rank='16': give a LoRA rank"),
    ({"backend": "gpu"}, "load_model: backend='gpu': use one of auto, unsloth, transformers, cpu"),
    ({"max_seq_length": 0}, "load_model: max_seq_length=0"),
    ({"gpu_memory_utilization": 2}, "load_model: gpu_memory_utilization=2"),
], ids=["lora_rank-zero", "lora_rank-text", "backend", "max_seq_length", "vllm-share"])
def test_load_model_refuses_bad_options_before_loading(keywords, message, tiny_model_dir):
    with pytest.raises(ConfigError, match=message):
        load_model(str(tiny_model_dir), **keywords)


def test_load_model_with_a_folder_typo_says_the_folder_does_not_exist(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "qwen-small").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"model 'models/qwen-smal': no such folder; did you mean qwen-small\?"):
        load_model("models/qwen-smal")


def test_a_corrupted_run_yaml_names_the_file(tmp_path):
    (tmp_path / "run.yaml").write_bytes(b"model: tiny\nrewards: [\x00]\n")
    with pytest.raises(ConfigError, match=r"run\.yaml, line 2, column 11: not valid YAML"):
        read_run(tmp_path)


def test_export_into_an_earlier_export_is_refused(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "model.safetensors").write_bytes(b"an earlier merged export")
    with pytest.raises(ExportError, match=r"out already holds model\.safetensors; export into an empty folder, or pass "
                                          "overwrite=True"):
        export(model, tokenizer, tmp_path / "out", how="adapter")


def test_a_reward_module_that_raises_on_import_is_named(tmp_path, monkeypatch):
    from rewards import resolve_rewards

    (tmp_path / "judge_needs_key_py.py").write_text(BAD_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("JUDGE_API_KEY", raising=False)
    with pytest.raises(ValueError, match="importing module 'judge_needs_key_py' raised KeyError: 'JUDGE_API_KEY'"):
        resolve_rewards("judge_needs_key_py:judge")


# --- scores as TRL takes them ---------------------------------------------------------------------------------------

SCORES = {
    "list": lambda n: [1.0] * n,
    "tuple": lambda n: (1.0,) * n,
    "numpy": lambda n: np.ones(n, dtype=np.float32),
    "tensor": lambda n: torch.ones(n),
    "generator": lambda n: (1.0 for _ in range(n)),
    "ints and None": lambda n: [1] * (n - 1) + [None],
}


@pytest.mark.parametrize("kind", SCORES)
def test_any_sequence_of_numbers_trl_accepts_is_scores(kind):
    def reward(completions, **kwargs):
        return SCORES[kind](len(completions))

    scores = guard(reward)(prompts=["p"] * 3, completions=["a", "b", "c"])
    assert scores == ([1.0, 1.0, None] if kind == "ints and None" else [1.0, 1.0, 1.0])
    assert all(score is None or type(score) is float for score in scores)


@pytest.mark.parametrize("value, said", [
    ("1.0", "returned a str for 2 completions"),
    (np.ones((2, 1)), "returned a ndarray for 2 completions"),
    (3.0, "returned a float for 2 completions"),
    ([1.0], "returned 1 scores for 2 completions"),
], ids=["text", "2-D", "one number", "too few"])
def test_what_trl_cannot_take_scores_none_and_says_why(value, said, caplog):
    guarded = guard(lambda completions, **kwargs: value)
    assert guarded(prompts=["p", "p"], completions=["a", "b"]) == [None, None]
    assert said in caplog.text or said in guarded.last_error


def test_a_reward_returning_numpy_trains_like_a_list(tiny_model, prepared, tmp_path):
    model, tokenizer = tiny_model

    def numpy_reward(completions, **kwargs):
        return np.array([float(len(completion[0]["content"]) % 3) for completion in completions])

    result = train(model, tokenizer, prepared, [numpy_reward], output_dir=tmp_path / "run", **{**QUICK, "max_steps": 2})
    assert result.rewards[0].failures == 0 and result.metrics[-1]["rewards/numpy_reward/mean"] is not None


def test_the_suite_covers_sixty_cases_or_more():
    here = sys.modules[__name__]
    parametrized = sum(len(mark.args[1]) for test in vars(here).values() if callable(test)
                       for mark in getattr(test, "pytestmark", []) if mark.name == "parametrize")
    plain = sum(1 for name, test in vars(here).items() if name.startswith("test_") and callable(test)
                and not getattr(test, "pytestmark", None))
    assert parametrized + plain - 1 >= 60


def test_the_errors_page_quotes_messages_the_code_says():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    source = "\n".join(path.read_text() for folder in ("grpo_lite", "rewards") for path in (root / folder).rglob("*.py"))
    rows = [line.split("|")[1:4] for line in (root / "docs" / "errors.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith(("| family", "|---"))]
    quoted = [span for _, says, _ in rows for span in says.split("`")[1::2]]
    assert len(rows) >= 12 and len(quoted) >= 40
    assert [span for span in quoted if span not in source] == []
