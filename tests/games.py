"""Small text games a model plays through tools, and a tiny model taught to call one.

``NumberGuess`` and ``LetterGuess`` are environments as TRL's GRPOTrainer takes them (``environment_factory``): reset with
their row, their public method the tool, ``get_reward`` the score. ``guess`` is the same game as a plain tool.
``play_number_guess`` is a ``rollout_func`` that plays the game itself through the tokenizer. A random tiny model never
writes a tool call, so :func:`build_tool_calling_model` fine-tunes one (supervised, on one fixed reply that calls
``guess``) until sampling it writes that call: the tool loop then runs for real.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from families import TOOL_CALLING

SECRET = 5
CALL = {"name": "guess", "arguments": {"number": SECRET}}  # the one reply the tiny model is taught
REPLY = f"<tool_call>\n{json.dumps(CALL)}\n</tool_call><|im_end|>"
TAUGHT_STEPS = 240  # supervised steps until sampling at temperature 1 writes REPLY


class NumberGuess:
    """Find a secret number from 1 to 9; each guess is told higher, lower or correct."""

    def __init__(self):
        self.secret, self.guesses, self.found = SECRET, 0, False

    def reset(self, secret: int = SECRET, **row) -> str | None:
        self.secret, self.guesses, self.found = int(secret), 0, False
        return None

    def guess(self, number: int) -> str:
        """Guess the secret number.

        Args:
            number: The number guessed, from 1 to 9.
        """
        self.guesses += 1
        if number == self.secret:
            self.found = True
            return "correct"
        return "higher" if number < self.secret else "lower"

    def get_reward(self) -> float:
        return 1.0 / self.guesses if self.found else 0.0


class LetterGuess:
    """Find a secret letter; each guess is told whether it is the one."""

    def __init__(self):
        self.secret, self.found = "e", False

    def reset(self, letter: str = "e", **row) -> str | None:
        self.secret, self.found = letter, False
        return "Guess the letter."

    def guess_letter(self, letter: str) -> str:
        """Guess the secret letter.

        Args:
            letter: One lowercase letter.
        """
        self.found = letter == self.secret
        return "correct" if self.found else "wrong"

    def get_reward(self) -> float:
        return float(self.found)


def guess(number: int) -> str:
    """Guess the secret number.

    Args:
        number: The number guessed, from 1 to 9.
    """
    return NumberGuess().guess(number)


def guessing_lessons() -> list[tuple[list, str, str]]:
    """(tools, question, reply) the tool-calling model learns for tests/test_rollouts.py: the number game with ``guess`` as
    its tool, and the letter game's, whose tool is another, each answered with :data:`REPLY`."""
    return [(tools, f"Find my number from 1 to {top}.{told}", REPLY) for top in (7, 8, 9)
            for tools, told in (([guess], ""), ([LetterGuess().guess_letter], "Guess the letter."))]


def build_tool_calling_model(path: Path, lessons: list[tuple[list, str, str]] | None = None, **size) -> Path:
    """A tiny Qwen2 with Qwen2.5's chat template, fine-tuned until it answers each lesson's question, asked with its
    tools, with its reply (default :func:`guessing_lessons`), saved to ``path``; ``size`` goes to build_tiny_model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = TOOL_CALLING.build(path, **size)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    examples = []
    for tools, question, reply in lessons or guessing_lessons():
        text = tokenizer.apply_chat_template([{"role": "user", "content": question}], tools=tools, add_generation_prompt=True,
                                             tokenize=False)
        prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
        answer = tokenizer(reply, add_special_tokens=False)["input_ids"]
        examples.append((torch.tensor([prompt + answer]), torch.tensor([[-100] * len(prompt) + answer])))
    optimizer = torch.optim.AdamW(model.parameters(), lr=4e-3)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for step in range(TAUGHT_STEPS):
            ids, labels = examples[step % len(examples)]
            model(input_ids=ids, labels=labels).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    model.save_pretrained(folder)
    return folder


def _sample(model, ids: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
    """A reply sampled after ``ids``, and each of its tokens' log-probability."""
    out = model.generate(torch.tensor([ids]), do_sample=True, temperature=1.0, max_new_tokens=max_new_tokens,
                         output_logits=True, return_dict_in_generate=True)
    new = out.sequences[0, len(ids):].tolist()
    logprobs = [torch.log_softmax(logits[0].float(), -1)[token].item() for logits, token in zip(out.logits, new)]
    return new, logprobs


def play_number_guess(prompts, trainer):
    """A rollout function: for each prompt, one game of NumberGuess played through the tokenizer: the model's reply, the
    tool's result when it calls ``guess`` (rendered by the chat template, masked out of the loss), and its next reply."""
    tokenizer = trainer.processing_class
    model = trainer.accelerator.unwrap_model(trainer.model)
    rollouts = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "guesses": []}
    for prompt in prompts:
        game = NumberGuess()
        render = dict(tools=[game.guess], tokenize=False)
        opening = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, **render)
        prompt_ids = tokenizer(opening, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            ids, logprobs = _sample(model, prompt_ids, 80)
        mask = [1] * len(ids)
        text = tokenizer.decode(ids, skip_special_tokens=True)
        if call := re.search(r"<tool_call>\s*(\{.*\})\s*</tool_call>", text, re.DOTALL):
            try:
                arguments = json.loads(call.group(1)).get("arguments", {})
                result = game.guess(**arguments)
            except (ValueError, TypeError) as error:
                arguments, result = {}, f"error: {error}"
            said = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                "name": "guess", "arguments": arguments}}]}
            before = tokenizer.apply_chat_template([*prompt, said], **render)
            after = tokenizer.apply_chat_template([*prompt, said, {"role": "tool", "name": "guess", "content": result}],
                                                  add_generation_prompt=True, **render)
            shown = tokenizer(after[len(before):], add_special_tokens=False)["input_ids"]  # the result, as the template shows it
            with torch.no_grad():
                more, more_logprobs = _sample(model, prompt_ids + ids + shown, 40)
            ids, logprobs, mask = ids + shown + more, logprobs + [0.0] * len(shown) + more_logprobs, mask + [0] * len(shown) + [1] * len(more)
        rollouts["prompt_ids"].append(prompt_ids)
        rollouts["completion_ids"].append(ids)
        rollouts["logprobs"].append(logprobs)
        rollouts["env_mask"].append(mask)
        rollouts["guesses"].append(game.guesses)
    return rollouts


# Two steps of an environment's episodes, each up to two moves, as tests/test_environments.py and
# tests/test_http_environment.py train them
EPISODE_STEPS = dict(preset="cpu-smoke", max_steps=2, num_generations=4, per_device_train_batch_size=4, max_completion_length=192,
                     max_tool_calling_iterations=2, dashboard=False)


def calls_reward(completions, **kwargs):
    """1 for a rollout whose model called a tool (its messages carry tool_calls, or its text a <tool_call>)."""
    return [float("tool_call" in str(completion)) for completion in completions]


def called_act(completions, **kwargs):
    """1 for a rollout whose model called the environment's act tool."""
    return [float("act" in str(completion)) for completion in completions]
