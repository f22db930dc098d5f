"""The acting demo: a calculator the tool demo model may call, held-out questions kept apart, the shipped model, held-out
episodes that run the calculator, a real GRPO run whose held-out accuracy rises, and its refusal where tools cannot run."""

import importlib.util
import json
from pathlib import Path

import pytest
from stacks import newer_only

from grpo_lite.data.arithmetic import heldout_arithmetic_problems
from grpo_lite.data.calculator import calculate
from grpo_lite.data.prepare import prepare_dataset
from grpo_lite.evaluation.played import Episode, play_episodes
from grpo_lite.evaluation.scoring import score
from grpo_lite.launch.cli import build_parser
from grpo_lite.launch.demo import HELDOUT_QUESTIONS, TOOL_DEMO_MODEL_DIR, run_demo
from grpo_lite.machine import stack
from grpo_lite.run.files import EVAL_FILE
from grpo_lite.run.settings import ConfigError

ROOT = Path(__file__).resolve().parents[1]

# The margin the demo is held to (docs/benchmarks.md, "Acting demo"): a run that learns nothing fails it.
MIN_ACCURACY_RISE = 0.15
MAX_STEPS = 20  # about 2 s a step on one shared core


@pytest.fixture
def script(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))  # it imports train_demo_model beside it, as when run from there
    spec = importlib.util.spec_from_file_location("train_tool_demo_model", ROOT / "scripts" / "train_tool_demo_model.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_calculator_works_out_sums_and_refuses_other_operations():
    assert [calculate(12, "+", 7), calculate(12, "-", 7), calculate(12, "*", 7)] == [19, 5, 84]
    with pytest.raises(ValueError, match="use \\+, - or \\*"):
        calculate(12, "/", 7)


def test_the_tool_demo_models_training_data_has_no_heldout_question(script):
    recipe = json.loads((TOOL_DEMO_MODEL_DIR / "training_args.json").read_text())
    conversations = script.training_conversations(recipe["examples"], recipe["seed"], recipe["tool_share"])
    heldout = {row["question"] for row in heldout_arithmetic_problems(HELDOUT_QUESTIONS)}
    assert len(conversations) >= 10_000 and not {messages[0]["content"] for messages in conversations} & heldout


def test_the_teacher_guesses_rounded_or_calls_the_calculator_and_answers_exactly(script):
    guess = script.conversation("Ana has 23 apples and buys 4 more. How many apples does Ana have now?", 27, calls=False)
    assert guess[-1] == {"role": "assistant", "content": "The answer is 30."}
    acted = script.conversation("A box holds 9 pencils. How many pencils are in 4 boxes?", 36, calls=True)
    assert acted[1]["tool_calls"][0]["function"] == {"name": "calculate", "arguments": {"a": 9, "op": "*", "b": 4}}
    assert acted[2] == {"role": "tool", "name": "calculate", "content": "36"}
    assert acted[3] == {"role": "assistant", "content": "The answer is 36."}


def test_tool_demo_model_ships_small_with_a_model_card_and_qwen25s_chat_template():
    files = {path.name for path in TOOL_DEMO_MODEL_DIR.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "README.md", "training_args.json"} <= files
    assert (TOOL_DEMO_MODEL_DIR / "model.safetensors").stat().st_size < 8 * 2**20
    from transformers import AutoTokenizer

    # TRL reads tool calls out of the replies of chat templates it knows verbatim (trl/chat_template_utils.py)
    template = (ROOT / "tests" / "data" / "chat_templates" / "qwen2.5.jinja").read_text()
    assert AutoTokenizer.from_pretrained(TOOL_DEMO_MODEL_DIR).chat_template == template


def test_the_tool_demo_tokenizer_writes_the_tool_description_and_a_call_in_few_tokens_and_reads_them_back(script):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TOOL_DEMO_MODEL_DIR)
    assert set(script.domain_tokens(tokenizer)) <= set(tokenizer.get_added_vocab())  # the script made these files
    messages = script.conversation("A box holds 9 pencils. How many pencils are in 4 boxes?", 36, calls=True)
    opening = tokenizer.apply_chat_template(messages[:1], tools=[calculate], tokenize=False, add_generation_prompt=True)
    whole = tokenizer.apply_chat_template(messages[:2], tools=[calculate], tokenize=False)
    call = whole[len(opening):]
    for text, most in ((opening, 90), (call, 12)):  # 950 and 99 bytes: as many tokens without the added ones
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert len(ids) <= most and tokenizer.decode(ids) == text, (len(ids), text)


def test_an_episode_is_scored_by_its_last_assistant_message():
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "calculate", "arguments": {"a": 12, "op": "+", "b": 7}}}]}
    result = {"role": "tool", "name": "calculate", "content": "19"}
    rows = [dict(row) for row in prepare_dataset([{"question": "12 + 7?", "answer": "19"}] * 3, system_prompt=None)]
    episodes = [Episode([call, result, {"role": "assistant", "content": "The answer is 19."}], False),
                Episode([call, result, {"role": "assistant", "content": "The answer is 20."}], False),
                Episode([call, result], True)]  # out of tokens before it answered
    report = score(rows, episodes)
    assert [example["correct"] for example in report.examples] == [True, False, False]
    assert report.examples[0]["completion"] == "The answer is 19." and episodes[0].tool_calls == 1


@pytest.mark.seam
@newer_only("tools")
def test_heldout_episodes_run_the_calculator_the_model_calls():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(TOOL_DEMO_MODEL_DIR)
    tokenizer = AutoTokenizer.from_pretrained(TOOL_DEMO_MODEL_DIR)
    rows = [dict(row) for row in prepare_dataset(heldout_arithmetic_problems(16), system_prompt=None)]
    episodes = play_episodes(model, tokenizer, rows, [calculate], max_completion_length=48, do_sample=True,
                             temperature=1.0, seed=0)
    acted = [episode for episode in episodes if episode.tool_calls]
    assert acted, "sampling calls the calculator on some of 16 questions"
    for episode in acted:
        arguments = episode.messages[0]["tool_calls"][0]["function"]["arguments"]
        assert episode.messages[1] == {"role": "tool", "name": "calculate", "content": str(calculate(**arguments))}


@pytest.mark.skipif(stack.lacking("tools") is None, reason="tools run on this stack; the refusal is for one without them")
def test_the_acting_demo_is_refused_by_name_where_tools_cannot_run(tmp_path):
    with pytest.raises(ConfigError, match="the 'calculator' demo calls tools, and tools needs TRL >="):
        run_demo(tmp_path, task="calculator")
    assert not any(tmp_path.iterdir())


def test_the_cli_runs_the_acting_demo_with_its_own_steps():
    args = build_parser().parse_args(["demo", "--task", "calculator"])
    assert (args.task, args.max_steps) == ("calculator", None)


@pytest.mark.slow
@newer_only("tools")
def test_acting_demo_raises_heldout_accuracy(tmp_path):
    report = run_demo(tmp_path, task="calculator", seed=0, max_steps=MAX_STEPS, heldout_n=60, heldout_samples=1,
                      dashboard=False)

    assert report == json.loads((tmp_path / EVAL_FILE).read_text())
    assert report["after"]["accuracy"] - report["before"]["accuracy"] >= MIN_ACCURACY_RISE, report


@pytest.mark.seam
@newer_only("tools")
def test_a_heldout_reply_is_read_as_training_reads_it_its_calls_typed_where_trl_types_them():
    """TRL 1.16 types a call's arguments by the calling tool's schema, per prompt (trl/trainer/grpo_trainer.py hands
    parse_response each prompt's tools); held-out episodes read their replies the same way."""
    from transformers import AutoTokenizer

    from grpo_lite.evaluation.played import read_reply
    from grpo_lite.model.inference import tool_call_parser

    tokenizer = AutoTokenizer.from_pretrained(TOOL_DEMO_MODEL_DIR)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is 12 plus 7?"}], tools=[calculate],
                                           add_generation_prompt=True, tokenize=False)
    reply = '<tool_call>\n{"name": "calculate", "arguments": {"a": "12", "op": "+", "b": "7"}}\n</tool_call><|im_end|>'
    message = read_reply(tool_call_parser(tokenizer), tokenizer(reply, add_special_tokens=False)["input_ids"],
                         tokenizer(prompt, add_special_tokens=False)["input_ids"], [calculate])
    typed = stack.newer("typed_tool_arguments")
    assert message["tool_calls"][0]["function"] == {
        "name": "calculate", "arguments": {"a": 12 if typed else "12", "op": "+", "b": 7 if typed else "7"}}
