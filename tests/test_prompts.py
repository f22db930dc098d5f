"""One renderer of prompts (grpo_lite.data.prompts): the system prompt kept, folded or refused, never dropped; the run's
chat_template_kwargs in every path that asks the model something; LoRA on every linear projection of a family."""

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml
from families import BY_NAME, FAMILIES
from stacks import prompts_trl_generates_from

from grpo_lite import evaluate, generate, load_model, prepare_dataset, preview, train
from grpo_lite.data.prepare import REASONING_SYSTEM_PROMPT, DatasetError, check_prompts
from grpo_lite.data.prompts import chat_messages, prompt_token_ids, render_prompt
from grpo_lite.evaluation.rescore import rescore_run
from grpo_lite.machine import stack
from grpo_lite.model import inference
from grpo_lite.model.load import loaded_as
from grpo_lite.run.files import RUN_FILE
from grpo_lite.run.record import read_run
from grpo_lite.run.settings import ConfigError

ROWS = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)]
ONE_STEP = dict(preset="cpu-smoke", max_steps=1, num_generations=4, per_device_train_batch_size=4, max_completion_length=4,
                beta=0.0, dashboard=False)
THINKING_OFF = {"enable_thinking": False}


def characters_reward(completions, **kwargs):
    return [len(set(completion[0]["content"])) / 10 for completion in completions]


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {family.name: family.build(root) for family in FAMILIES}


def load(family_dirs, name, **options):
    return load_model(str(family_dirs[name]), lora_rank=4, **options)


@pytest.mark.parametrize("family", FAMILIES, ids=[family.name for family in FAMILIES])
def test_the_system_text_survives_every_template_or_the_prompt_is_refused_with_the_fix(family, family_dirs, capsys):
    _, tokenizer = load(family_dirs, family.name)
    messages = [{"role": "system", "content": REASONING_SYSTEM_PROMPT}, {"role": "user", "content": "What is 2 + 2?"}]
    capsys.readouterr()
    prompt = render_prompt(tokenizer, messages)
    assert REASONING_SYSTEM_PROMPT in prompt and prompt.endswith(family.generation_prompt)
    said = capsys.readouterr().err.strip().splitlines()
    if family.system == "kept":
        assert said == [] and chat_messages(tokenizer, messages) == messages
        return
    # folded into the first user turn as Gemma 3's template does, said once in one line naming the template's rule
    rule = {"rejected": "rejects a system turn", "dropped": "renders no system turn"}[family.system]
    assert len(said) == 1 and rule in said[0] and "folded into the first user turn" in said[0]
    assert chat_messages(tokenizer, messages) == [{"role": "user", "content": f"{REASONING_SYSTEM_PROMPT}\n\nWhat is 2 + 2?"}]
    render_prompt(tokenizer, messages)
    assert capsys.readouterr().err == ""  # once per tokenizer
    # or refused, before anything trains, in one line naming the rule and the fix
    with pytest.raises(DatasetError, match=rf"{rule}.*fold_system_prompt=False: pass fold_system_prompt=True") as refused:
        prepare_dataset(ROWS, tokenizer=tokenizer, fold_system_prompt=False)
    assert "\n" not in str(refused.value)


def test_the_template_rules_the_issue_names():
    """What the real templates do with a system turn, rendered by transformers itself: the cases folding is for."""
    from jinja2 import TemplateError

    from grpo_lite.model.tiny import build_tokenizer

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    for name, error in (("gemma-2", "System role not supported"), ("mistral-v0.1", "Conversation roles must alternate")):
        tokenizer = build_tokenizer(family=BY_NAME[name].family)
        tokenizer.chat_template = BY_NAME[name].chat_template()
        with pytest.raises(TemplateError, match=error):
            tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    tokenizer = build_tokenizer(family="phi-3")
    tokenizer.chat_template = BY_NAME["phi-3-mini"].chat_template()
    assert "Be brief." not in tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


# --- what a template does with a system turn, asked of the template ----------------------------------------------------

def _template_tokenizer(template: str):
    from grpo_lite.model.tiny import build_tokenizer

    tokenizer = build_tokenizer()
    tokenizer.chat_template = template
    return tokenizer


TURNS = ("{% for m in loop_messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
         "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
SYSTEM_TURN = "{% set loop_messages = messages[1:] if messages[0]['role'] == 'system' else messages %}"
# templates that render the system turn changed: the text is kept, as the template renders it
CHANGING = {
    "reads a directive out of it": "{% if messages[0]['role'] == 'system' %}{{ 'mode: ' + ('off' if '/no_think' in "
                                   "messages[0]['content'] else 'on') + '\\n' + messages[0]['content'].replace('/no_think', '')"
                                   ".rstrip() + '\\n' }}{% endif %}",
    "trims and lowercases it": "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] | trim | lower }}{% endif %}",
    "prefixes it": "{% if messages[0]['role'] == 'system' %}{{ '# Instructions\\n\\n' + messages[0]['content'] }}{% endif %}",
}
# templates that reject or render no system turn: the text is folded into the first user turn
LOSING = {
    "rejects it": "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}",
    "renders none of it": "",
}


@pytest.mark.parametrize("does", list(CHANGING), ids=list(CHANGING))
def test_a_template_that_changes_the_system_text_keeps_it_as_it_renders_it(does, capsys):
    tokenizer = _template_tokenizer(SYSTEM_TURN + CHANGING[does] + TURNS)
    messages = [{"role": "system", "content": "Be BRIEF. /no_think "}, {"role": "user", "content": "What is 2 + 2?"}]
    assert chat_messages(tokenizer, messages) == messages and "folded" not in capsys.readouterr().err
    assert render_prompt(tokenizer, messages) == tokenizer.apply_chat_template(messages, tokenize=False,
                                                                               add_generation_prompt=True)


@pytest.mark.parametrize("does", list(LOSING), ids=list(LOSING))
def test_a_template_that_loses_the_system_turn_folds_it_even_where_the_question_repeats_its_text(does, capsys):
    tokenizer = _template_tokenizer(SYSTEM_TURN + LOSING[does] + TURNS)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Be brief. What is 2 + 2?"}]
    assert chat_messages(tokenizer, messages) == [{"role": "user", "content": "Be brief.\n\nBe brief. What is 2 + 2?"}]
    assert "folded into the first user turn" in capsys.readouterr().err


def test_a_system_directive_smollm3_reads_trains_and_generates_with_thinking_off(family_dirs, tmp_path, monkeypatch, capsys):
    """SmolLM3's template takes /no_think out of the system prompt and turns thinking off: the system turn is kept (its
    text is not in the prompt as written), and every path asks the model with thinking off, TRL's training included."""
    model, tokenizer = load(family_dirs, "smollm3")
    dataset = prepare_dataset(ROWS, tokenizer=tokenizer, system_prompt=f"{REASONING_SYSTEM_PROMPT} /no_think")
    assert "folded" not in capsys.readouterr().err
    assert [m["role"] for m in dataset[0]["prompt"]] == ["system", "user"]
    thinking_off = "<|im_start|>assistant\n<think>\n\n</think>\n"
    trained = render_prompt(tokenizer, dataset[0]["prompt"])
    assert "Reasoning Mode: /no_think" in trained and REASONING_SYSTEM_PROMPT in trained and trained.endswith(thinking_off)
    asked: list[str] = []
    real_sample = inference._transformers_sample
    monkeypatch.setattr(inference, "_transformers_sample", lambda model, tokenizer, texts, images, **options: (
        asked.extend(texts), real_sample(model, tokenizer, texts, images, **options))[1])

    with prompts_trl_generates_from(model) as trl_asked:
        result = train(model, tokenizer, dataset, [characters_reward], output_dir=tmp_path / "run", **ONE_STEP)
    trl_texts = {tokenizer.decode(ids) for ids in trl_asked}
    assert trl_texts and all("Reasoning Mode: /no_think" in text and text.endswith(thinking_off) for text in trl_texts)
    generate(result.model, tokenizer, [dataset[0]["prompt"]], max_completion_length=2)
    evaluate(result.model, tokenizer, dataset, heldout_n=1, max_completion_length=2, progress=None)
    assert asked == [trained] * 2


@pytest.mark.parametrize("name", ["smollm3", "smollm2"])
def test_a_template_that_writes_a_system_turn_of_its_own_into_a_prompt_without_one_says_so_once(name, capsys):
    tokenizer = _tokenizer(BY_NAME[name])
    capsys.readouterr()
    assert render_prompt(tokenizer, [QUESTION]).count("You are a helpful AI assistant named SmolLM") == 1
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "writes a system turn of its own into prompts that have none: 'You are a helpful AI " \
                               "assistant named SmolLM" in said[0] and "system_prompt=" in said[0]
    render_prompt(tokenizer, [{"role": "user", "content": "What is 3 + 3?"}])
    render_prompt(tokenizer, [{"role": "system", "content": "Be brief."}, QUESTION])
    assert capsys.readouterr().err == ""  # once per tokenizer; a prompt with its own system turn is asked with it


@pytest.mark.parametrize("name", ["qwen3", "llama-3.2", "gemma-2", "gemma-3", "mistral-v0.1", "phi-3-mini"])
def test_a_template_that_writes_no_system_text_of_its_own_says_nothing(name, capsys):
    tokenizer = _tokenizer(BY_NAME[name])
    capsys.readouterr()
    render_prompt(tokenizer, [QUESTION])
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("name", ["gemma-2", "mistral-v0.1"])
def test_rows_prepared_without_a_tokenizer_train_folded_or_are_refused_before_training(name, family_dirs, tmp_path, capsys):
    model, tokenizer = load(family_dirs, name)
    dataset = prepare_dataset(ROWS)  # the default system prompt, no tokenizer to check it against
    with pytest.raises(DatasetError, match="fold_system_prompt=True") as refused:
        train(model, tokenizer, dataset, [characters_reward], output_dir=tmp_path / "refused", fold_system_prompt=False,
              **ONE_STEP)
    assert "\n" not in str(refused.value) and not (tmp_path / "refused" / "checkpoint-1").exists()
    capsys.readouterr()
    result = train(model, tokenizer, dataset, [characters_reward], output_dir=tmp_path / "run", **ONE_STEP)
    assert "the system prompt is folded into the first user turn" in capsys.readouterr().err
    assert result.trainer.state.global_step == 1
    trained_on = result.trainer.train_dataset[0]["prompt"]
    assert trained_on == [{"role": "user", "content": f"{REASONING_SYSTEM_PROMPT}\n\n{ROWS[0]['question']}"}]
    logged = json.loads((tmp_path / "run" / "samples.jsonl").read_text().splitlines()[0])
    assert [m["role"] for m in logged["prompt"]] == ["user"]  # what the model was asked, as the run's files keep it
    assert logged["prompt"][0]["content"].startswith(f"{REASONING_SYSTEM_PROMPT}\n\nWhat is")
    # re-scoring finds each logged question's row in the data as the user gave it, system prompt folded in or not
    rescored = rescore_run(tmp_path / "run", ["numeric_correctness_reward"], ROWS)
    assert len(rescored.rows) == 4 and rescored.ok


def test_phi_lora_covers_its_fused_projections_by_default_and_a_llama_list_is_carried_over(family_dirs, capsys):
    model, _ = load(family_dirs, "phi-3-mini")
    assert loaded_as(model).lora_modules == ("o_proj", "qkv_proj", "gate_up_proj", "down_proj")
    capsys.readouterr()
    # the list Unsloth's notebooks give for Llama means every attention and MLP projection: Phi holds them fused
    model, _ = load(family_dirs, "phi-3-mini", target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                               "down_proj"])
    assert loaded_as(model).lora_modules == ("o_proj", "qkv_proj", "gate_up_proj", "down_proj")
    said = capsys.readouterr().err
    assert ("target_modules: carried over to this model's own weights: q_proj, k_proj, v_proj to qkv_proj (fused); "
            "gate_proj, up_proj to gate_up_proj (fused)") in said
    model, _ = load(family_dirs, "phi-3-mini", target_modules=["qkv_proj", "wq"])
    assert loaded_as(model).lora_modules == ("qkv_proj",)
    said = capsys.readouterr().err
    assert "wq is not in this model" in said
    assert "left out: attention o_proj (not in target_modules), MLP gate_up_proj (not in target_modules)" in said
    with pytest.raises(ConfigError, match="none of the LoRA target_modules.*its layers are o_proj, qkv_proj"):
        load(family_dirs, "phi-3-mini", target_modules=["wq"])


def test_a_qwen3_run_with_thinking_off_asks_the_same_prompt_in_training_generate_evaluate_preview(family_dirs, tmp_path,
                                                                                                  monkeypatch):
    model, tokenizer = load(family_dirs, "qwen3")
    dataset = prepare_dataset(ROWS, tokenizer=tokenizer, chat_template_kwargs=THINKING_OFF)
    asked: list[str] = []  # every text generate, evaluate and preview (and held-out evaluation) give the model
    real_sample = inference._transformers_sample
    monkeypatch.setattr(inference, "_transformers_sample", lambda model, tokenizer, texts, images, **options: (
        asked.extend(texts), real_sample(model, tokenizer, texts, images, **options))[1])

    with prompts_trl_generates_from(model) as trl_asked:  # TRL's own rendering of the training prompts, thinking off
        result = train(model, tokenizer, dataset, [characters_reward], output_dir=tmp_path / "run", heldout=dataset,
                       heldout_n=2, chat_template_kwargs=THINKING_OFF, **ONE_STEP)
    trained = tokenizer.decode(prompt_token_ids(tokenizer, dataset[0]["prompt"], THINKING_OFF))
    assert trl_asked and {tokenizer.decode(ids) for ids in trl_asked} <= {
        tokenizer.decode(prompt_token_ids(tokenizer, p, THINKING_OFF)) for p in dataset["prompt"]}
    assert trained.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") and REASONING_SYSTEM_PROMPT in trained
    assert asked.count(trained) == 2  # held-out evaluation before and after training

    asked.clear()
    generate(result.model, tokenizer, [dataset[0]["prompt"]], max_completion_length=2)
    evaluate(result.model, tokenizer, dataset, heldout_n=1, max_completion_length=2, progress=None)
    preview(result.model, tokenizer, dataset, [characters_reward], n_prompts=1, num_generations=2, max_completion_length=2,
            greedy=False, preset="cpu-smoke")
    assert asked == [trained] * 3
    asked.clear()
    generate(result.model, tokenizer, [dataset[0]["prompt"]], max_completion_length=2, chat_template_kwargs={})
    assert asked[0].endswith("<|im_start|>assistant\n") and asked[0] != trained  # asked otherwise, it renders otherwise

    # recorded in run.yaml, with TRL's config, and read back as the run's setting
    record = read_run(tmp_path / "run")
    assert record.settings.chat_template_kwargs == THINKING_OFF
    if stack.has_config_field("chat_template_kwargs"):  # before TRL 0.25 they are bound on the tokenizer while training
        assert record.grpo_config["chat_template_kwargs"] == THINKING_OFF
    assert yaml.safe_load((tmp_path / "run" / RUN_FILE).read_text())["chat_template_kwargs"] == THINKING_OFF


def test_the_length_checks_count_the_prompt_training_renders(family_dirs, tmp_path):
    """Thinking off adds an empty think block to Qwen3's prompt: prepare_dataset's lengths and train()'s max_seq_length
    check count it, as TRL renders it."""
    from grpo_lite.data.prepare import prompt_lengths

    model, tokenizer = load(family_dirs, "qwen3")
    dataset = prepare_dataset(ROWS, tokenizer=tokenizer, chat_template_kwargs=THINKING_OFF)
    with_think_block = prompt_lengths(dataset, tokenizer, THINKING_OFF)
    assert with_think_block == [n + len(tokenizer("<think>\n\n</think>\n\n")["input_ids"])
                                for n in prompt_lengths(dataset, tokenizer, {})]
    model, tokenizer = load(family_dirs, "qwen3", max_seq_length=max(with_think_block) + ONE_STEP["max_completion_length"] - 1)
    with pytest.raises(ConfigError, match=rf"the longest prompt \({max(with_think_block)} tokens\)"):
        train(model, tokenizer, dataset, [characters_reward], output_dir=tmp_path, chat_template_kwargs=THINKING_OFF, **ONE_STEP)


def test_chat_template_kwargs_travel_with_the_run_and_a_resume_must_keep_them(family_dirs, tmp_path):
    from grpo_lite.launch.kit import write_launch_kit
    from grpo_lite.monitor.show import show_run

    model, tokenizer = load(family_dirs, "qwen3")
    dataset = prepare_dataset(ROWS, tokenizer=tokenizer, chat_template_kwargs=THINKING_OFF)
    train(model, tokenizer, dataset, [characters_reward], output_dir=tmp_path / "run", chat_template_kwargs=THINKING_OFF,
          **ONE_STEP)
    kit = write_launch_kit(tmp_path / "run", tmp_path / "kit", dataset=dataset)
    assert yaml.safe_load((kit / "recipe.yaml").read_text())["chat_template_kwargs"] == THINKING_OFF
    assert show_run(tmp_path / "run", view="log").header["chat template"] == "enable_thinking=False"
    with pytest.raises(ConfigError, match=r"chat_template_kwargs: \{'enable_thinking': False\} -> \{\}"):
        train(model, tokenizer, dataset, [characters_reward], output_dir=tmp_path / "run", resume=True, **ONE_STEP)


def test_chat_template_kwargs_is_a_run_setting_checked_with_the_others():
    from grpo_lite.run.settings import RunSettings

    problems = RunSettings(model="tiny", rewards=["soft_xml_format_reward"], chat_template_kwargs=["enable_thinking"],
                           fold_system_prompt="yes", overrides={"chat_template_kwargs": {}}).problems()
    assert any(p.startswith("chat_template_kwargs=['enable_thinking']: give a mapping") for p in problems)
    assert any(p.startswith("chat_template_kwargs is a run setting") for p in problems)
    assert any(p.startswith("fold_system_prompt='yes'") for p in problems)
    settings = RunSettings(model="tiny", rewards=["soft_xml_format_reward"]).with_setting("chat_template_kwargs={enable_thinking: false}")
    assert settings.chat_template_kwargs == THINKING_OFF and settings.overrides == {}


def test_the_format_warmup_trains_on_the_prompt_grpo_renders(family_dirs, tmp_path):
    from grpo_lite.data.prompts import prompt_token_ids
    from grpo_lite.training.warmup import warmup_format

    model, tokenizer = load(family_dirs, "qwen3")
    prompt = [{"role": "system", "content": REASONING_SYSTEM_PROMPT}, {"role": "user", "content": "What is 2 + 2?"}]
    examples = [{"prompt": prompt, "completion": [{"role": "assistant", "content": "<answer>4</answer>"}]}] * 2
    result = warmup_format(model, tokenizer, examples, output_dir=tmp_path, max_steps=1, chat_template_kwargs=THINKING_OFF)
    expected = prompt_token_ids(tokenizer, prompt, THINKING_OFF)
    assert result.trainer.train_dataset[0]["input_ids"][: len(expected)] == expected


# --- what a prompt's shape becomes: a prefill continued, content parts as text -----------------------------------------

QUESTION = {"role": "user", "content": "What is 2 + 2?"}
PREFILL = "<think>\nTwo and two"


def _tokenizer(family):
    from grpo_lite.model.tiny import build_tokenizer

    tokenizer = build_tokenizer(family=family.family)
    tokenizer.chat_template = family.chat_template()
    return tokenizer


@pytest.mark.parametrize("family", FAMILIES, ids=[family.name for family in FAMILIES])
def test_a_prefill_is_continued_inside_the_assistant_turn_as_trl_renders_it(family):
    from trl.data_utils import maybe_apply_chat_template

    tokenizer = _tokenizer(family)
    prompt = [QUESTION, {"role": "assistant", "content": PREFILL}]
    rendered = render_prompt(tokenizer, prompt)
    assert rendered.endswith(PREFILL) and rendered.count(PREFILL) == 1
    assert family.generation_prompt.strip() in rendered  # the turn it ends in is the assistant's, opened once
    assert rendered == maybe_apply_chat_template({"prompt": prompt}, tokenizer)["prompt"]  # as TRL 0.22-0.24 train on it
    assert render_prompt(tokenizer, [QUESTION]).endswith(family.generation_prompt)  # a question still opens a new turn


def test_a_prefill_the_template_rewrites_cannot_be_continued_and_says_so():
    tokenizer = _tokenizer(BY_NAME["qwen3"])
    with pytest.raises(DatasetError, match=r"does not render the prompt's last \(assistant\) message as written"):
        render_prompt(tokenizer, [QUESTION, {"role": "assistant", "content": "<think>\nok</think>\n\nThe answer"}])


@pytest.mark.parametrize("family", FAMILIES, ids=[family.name for family in FAMILIES])
def test_content_given_as_text_parts_renders_as_its_text_in_every_template(family):
    tokenizer = _tokenizer(family)
    parts = [{"type": "text", "text": "What is "}, {"type": "text", "text": "2 + 2?"}]
    as_parts = render_prompt(tokenizer, [{"role": "user", "content": parts}])
    assert as_parts == render_prompt(tokenizer, [QUESTION]) and "'type'" not in as_parts
    with_system = [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}, {"role": "user", "content": parts}]
    assert render_prompt(tokenizer, with_system) == render_prompt(tokenizer, [{"role": "system", "content": "Be brief."}, QUESTION])


@pytest.mark.parametrize("part", [{"type": "image", "url": "cat.png"}, {"type": "image_url", "image_url": {"url": "x"}},
                                  {"type": "text"}, "just text"], ids=["image with its image", "image_url", "text without text", "a string"])
def test_a_part_that_is_neither_text_nor_an_image_placeholder_is_refused_naming_the_message(part, tiny_model):
    _, tokenizer = tiny_model
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, part]}]
    with pytest.raises(DatasetError, match=r"message 1 \(user\) holds .*: give .*\{'type': 'image'\}"):
        render_prompt(tokenizer, prompt)
    with pytest.raises(DatasetError, match=r"row 1, column 'prompt': message 1 \(user\) holds"):
        check_prompts([{"prompt": [QUESTION]}, {"prompt": prompt}])


@pytest.mark.parametrize("last", [{"role": "assistant", "content": PREFILL}, {"role": "system", "content": "Answer in Latin."},
                                  {"role": "assistant", "content": [{"type": "text", "text": PREFILL}]}],
                         ids=["prefill", "system", "prefill as parts"])
def test_a_prompt_whose_last_turn_the_model_would_not_answer_is_refused_before_training(last, tiny_model, tmp_path):
    """TRL 0.25 and later close a prefill and open a new assistant turn; TRL 0.22-0.24 continue it and refuse a last
    system turn: a run would differ between the ends of the supported range, so it is refused, naming the row."""
    from grpo_lite.data.prepare import as_dataset

    model, tokenizer = tiny_model
    rows = [{"prompt": [QUESTION]}] * 3 + [{"prompt": [QUESTION, last]}]
    said = "a prefill, the start of the answer" if last["role"] == "assistant" else "ends in a 'system' message"
    with pytest.raises(DatasetError, match=rf"row 3, column 'prompt': the chat prompt .*{said}"):
        train(model, tokenizer, as_dataset(rows), [characters_reward], output_dir=tmp_path / "run", **ONE_STEP)
    assert not (tmp_path / "run").exists()


def test_a_run_on_prompts_of_text_parts_asks_the_model_what_it_asks_for_their_text(tiny_model, tmp_path):
    """Rows whose content is text in one row and text parts in another become one dataset, and TRL's trainer asks the
    model the prompt the text gives (as rendered here): parts would make the tiny model's template fail."""
    from grpo_lite.data.prepare import as_dataset

    model, tokenizer = tiny_model
    texts = [f"What is {i} + {i}?" for i in range(4)]
    rows = [{"prompt": [{"role": "user", "content": [{"type": "text", "text": text}] if i % 2 else text}]}
            for i, text in enumerate(texts)]
    with prompts_trl_generates_from(model) as asked:
        train(model, tokenizer, as_dataset(rows), [characters_reward], output_dir=tmp_path, **{**ONE_STEP, "num_generations": 2,
                                                                                               "per_device_train_batch_size": 8})
    expected = {tuple(prompt_token_ids(tokenizer, [{"role": "user", "content": text}])) for text in texts}
    assert {tuple(ids) for ids in asked} == expected


# --- a template that changes with the clock ----------------------------------------------------------------------------

def test_samples_keep_their_rows_chat_prompt_while_the_template_renders_a_new_date_each_time(family_dirs, tmp_path,
                                                                                             monkeypatch):
    """Llama 3.2's template writes today's date (strftime_now): past midnight TRL's text of a prompt is not the text
    rendered before. samples.jsonl knows each completion's row by its place in the batch, on every TRL."""
    import itertools
    from datetime import datetime, timedelta

    from transformers.utils import chat_template_utils

    from grpo_lite.monitor.samples import read_samples

    days = itertools.count()

    class EveryRenderADayLater(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 1, 1) + timedelta(days=next(days))

    monkeypatch.setattr(chat_template_utils, "datetime", EveryRenderADayLater)
    model, tokenizer = load(family_dirs, "llama-3.2")
    dataset = prepare_dataset(ROWS, tokenizer=tokenizer)
    assert render_prompt(tokenizer, dataset[0]["prompt"]) != render_prompt(tokenizer, dataset[0]["prompt"])
    train(model, tokenizer, dataset, [characters_reward], output_dir=tmp_path / "run", **{**ONE_STEP, "max_steps": 2})
    samples = read_samples(tmp_path / "run")
    assert len(samples) == 2 * ONE_STEP["num_generations"]
    assert all(row["prompt"] in dataset["prompt"] for row in samples)
    for step in (1, 2):  # one prompt per step, its group of completions
        assert len({json.dumps(row["prompt"]) for row in samples if row["step"] == step}) == 1
    rescored = rescore_run(tmp_path / "run", ["numeric_correctness_reward"], ROWS)  # each found in the data by its question
    assert len(rescored.rows) == len(samples) and rescored.ok


GPT_OSS_TEMPLATE = (Path(__file__).parent / "data" / "chat_templates" / "gpt-oss.jinja").read_text()
# two rows of one question with different efforts: only the row, not the prompt, says which effort it is asked with
EFFORT_ROWS = [{"question": f"What is {i // 2} + 1?", "answer": str(i // 2 + 1), "reasoning_effort": effort}
               for i, effort in enumerate(["low", "high", "high", "low"])]


@pytest.fixture(scope="module")
def gpt_oss_dir(tmp_path_factory):
    from grpo_lite.model.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("gpt-oss-template"), chat_template=GPT_OSS_TEMPLATE)


def test_the_columns_the_template_reads_are_asked_of_the_template_and_a_rows_value_wins(gpt_oss_dir):
    from grpo_lite.data.prompts import describe_row_settings, row_template_kwargs, template_columns

    _, tokenizer = load_model(str(gpt_oss_dir), lora_rank=4)
    # "answer" appears nowhere as a variable; "tools" and "messages" are apply_chat_template's own
    assert template_columns(tokenizer, ["prompt", "answer", "reasoning_effort", "tools", "messages", "model_identity"]) == [
        "reasoning_effort", "model_identity"]
    rows = [{"prompt": "a", "reasoning_effort": "low"}, {"prompt": "b", "reasoning_effort": None}]  # None: the row has none
    assert row_template_kwargs(tokenizer, rows, {"reasoning_effort": "high", "model_identity": "tiny"}) == [
        {"reasoning_effort": "low", "model_identity": "tiny"}, {"reasoning_effort": "high", "model_identity": "tiny"}]
    assert describe_row_settings(tokenizer, rows, {"reasoning_effort": "high"}) == (
        "the chat template reads the dataset's reasoning_effort (low: 1 row): each row is rendered with its own value, over "
        "chat_template_kwargs' reasoning_effort='high' (which holds for the rows without one)")
    assert describe_row_settings(tokenizer, [{"prompt": "a", "answer": "4"}]) is None


def test_a_column_the_template_reads_renders_each_row_with_its_own_value_on_every_path(gpt_oss_dir, tmp_path, monkeypatch,
                                                                                      capsys):
    """gpt-oss's reasoning_effort per row, as Unsloth's gpt-oss notebook gives it: TRL's training prompts, held-out
    evaluation, the length checks, generate, evaluate, preview and samples.jsonl each render a row with its own effort
    over the run's "medium" (the template's default too), and the run says so when it starts."""
    from grpo_lite.data.prepare import prompt_lengths
    from grpo_lite.monitor.samples import question_of, read_samples

    model, tokenizer = load_model(str(gpt_oss_dir), lora_rank=4)
    dataset = prepare_dataset(EFFORT_ROWS, tokenizer=tokenizer)
    renders = [tokenizer.decode(prompt_token_ids(tokenizer, row["prompt"], {"reasoning_effort": row["reasoning_effort"]}))
               for row in dataset]
    assert [f"Reasoning: {row['reasoning_effort']}" in text for row, text in zip(EFFORT_ROWS, renders)] == [True] * 4
    asked: list[str] = []  # every text generate, evaluate and preview (and held-out evaluation) give the model
    real_sample = inference._transformers_sample
    monkeypatch.setattr(inference, "_transformers_sample", lambda model, tokenizer, texts, images, **options: (
        asked.extend(texts), real_sample(model, tokenizer, texts, images, **options))[1])
    capsys.readouterr()

    with prompts_trl_generates_from(model) as trl_asked:  # each step's batch holds every row: all four in one render
        result = train(model, tokenizer, dataset, [characters_reward], output_dir=tmp_path / "run", heldout=dataset,
                       heldout_n=4, chat_template_kwargs={"reasoning_effort": "medium"},
                       **{**ONE_STEP, "max_steps": 2, "num_generations": 2, "per_device_train_batch_size": 8})
    assert ("the chat template reads the dataset's reasoning_effort (low: 2 rows, high: 2 rows): each row is rendered with "
            "its own value, over chat_template_kwargs' reasoning_effort='medium'") in capsys.readouterr().err
    trained = Counter(tokenizer.decode(ids) for ids in trl_asked)
    # each row's 2 completions in each of 2 steps, and its greedy one in held-out evaluation before and after training
    assert set(trained) == set(renders) and set(trained.values()) == {2 * 2 + 2}
    assert asked == renders * 2  # held-out evaluation before and after training

    samples = read_samples(tmp_path / "run")
    assert Counter((question_of(s["prompt"]), s["template_columns"]["reasoning_effort"]) for s in samples) == Counter(
        {(f"What is {row['question'][8]} + 1?", row["reasoning_effort"]): 2 * 2 for row in EFFORT_ROWS})
    assert all(isinstance(s["prompt"], list) for s in samples)  # mapped back to the row's chat prompt on every TRL

    asked.clear()
    generate(result.model, tokenizer, dataset, max_completion_length=2)
    evaluate(result.model, tokenizer, dataset, max_completion_length=2, progress=None)
    preview(result.model, tokenizer, dataset, [characters_reward], n_prompts=4, num_generations=2, max_completion_length=2,
            greedy=False, preset="cpu-smoke")
    assert asked == renders * 3
    asked.clear()
    generate(result.model, tokenizer, list(dataset["prompt"]), max_completion_length=2)  # prompts alone: the run's effort
    assert all("Reasoning: medium" in text for text in asked)

    lengths = prompt_lengths(dataset, tokenizer)
    assert lengths == [len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in renders]
    model, tokenizer = load_model(str(gpt_oss_dir), lora_rank=4, max_seq_length=max(lengths) + ONE_STEP["max_completion_length"] - 1)
    with pytest.raises(ConfigError, match=rf"the longest prompt \({max(lengths)} tokens\)"):  # "medium" is longer than "high"
        train(model, tokenizer, dataset, [characters_reward], output_dir=tmp_path / "long", **ONE_STEP)
