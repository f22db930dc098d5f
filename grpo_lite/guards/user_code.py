"""Every call a run makes into user code, guarded alike: reward functions, tools, an environment's ``reset``, methods and
``get_reward``, rollout functions, and the servers they talk to.

Each kind has a time limit (:data:`TIME_LIMITS`: its setting and default, said when a run starts by :func:`time_limits`); a
call past it is stopped where it runs (:mod:`grpo_lite.guards.time_limit`) and said with the stack where it was. What a
call returns is checked against what the trainer needs (a finite number or None per completion, one per completion; a
prompt's text from ``reset``; the token lists TRL reads from a rollout function), and ``get_reward`` returning NaN or
None is named as a reward returning NaN is. An exception, its own or a server's (``http.client.HTTPException``, a refused
or cut connection, an answer that is not JSON), is said naming the callable or URL, the row and what to do. Then:

- a reward function (an environment's ``get_reward`` among them): its batch scores ``None``, which TRL skips;
- a tool or an environment's method: the model is told the call failed, as TRL tells it of any call that raised;
- an environment's ``reset``: its episode is not played: its tools answer the failure, its ``get_reward`` is None;
- a rollout function: there is no batch to train on, so the step ends there (:class:`CallFailed`): the run stops, its
  steps done saved (``grpo_lite.guards.faults``), and before training (preview) it is a :class:`UserCodeError`.

A callable that fails :data:`PATIENCE` calls in a row stops the run at that step's end with a checkpoint
(:class:`FailureStop`), and ``train`` raises :class:`UserCodeFailure` (:class:`RewardFailure` for a reward) naming it and
its last error; the run folder resumes. A tool's own exception is the model's call failing (wrong arguments, a move after
the end): the model is told, TRL counts it (``tools/failure_frequency``), and it is said once, but it stops nothing.

Each reward call gets its own copy of what TRL hands it (:func:`rewards.calling.reward_arguments`): TRL passes every
reward the same lists and logs them afterwards, so an edit one reward makes to them would reach the next reward and
samples.jsonl.

User code runs where TRL runs it: a plain function on the training thread, stopped there when it runs past its limit
(off the main thread it runs without a limit, and :func:`unlimited` says which and why); ``async`` code on an event loop
of its own.
"""

from __future__ import annotations

import functools
import http.client
import inspect
import socket
import traceback
import urllib.error
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from rewards.calling import BATCH_ARGUMENTS, SHARED_ARGUMENTS, is_async_reward, private_copy, read_scores, reward_arguments, run_coroutine
from rewards.combine import reward_name

from ..environments.http_env import HttpEnvironment
from ..errors import RunFault, UserError
from ..log import logger
from ..machine import stack
from ..run.settings import REWARD_TIMEOUT, ROLLOUT_TIMEOUT, TOOL_TIMEOUT
from ..run.stopping import StopSwitch
from .time_limit import TimedOut, TimeLimit, unavailable_reason

PATIENCE = 3  # failures of one callable in a row that stop a run
ROLLOUT_KEYS = ("prompt_ids", "completion_ids", "logprobs")  # what TRL reads from a rollout function's dict


@dataclass(frozen=True)
class TimeLimitSetting:
    """The time limit of a kind of user code: its setting, and what one call of it is."""

    setting: str
    call: str


TIME_LIMITS = {  # their defaults: REWARD_TIMEOUT, TOOL_TIMEOUT, ROLLOUT_TIMEOUT (grpo_lite/run/settings.py)
    "reward": TimeLimitSetting("reward_timeout", "reward call (a batch)"),
    "tool": TimeLimitSetting("tool_timeout", "tool call or environment reset"),
    "rollout": TimeLimitSetting("rollout_timeout", "rollout_func call (a batch)"),
}
# A server's failure, or the cause of one: a connection refused, reset or cut mid-reply, no answer in time, an HTTP
# exchange broken off (http.client's IncompleteRead, RemoteDisconnected, BadStatusLine), a name that does not resolve.
SERVER_ERRORS = (ConnectionError, TimeoutError, http.client.HTTPException, urllib.error.URLError, socket.gaierror)


class UserCodeFailure(RunFault, RuntimeError):
    """User code kept failing, or a rollout function failed: training stopped, and its checkpoint was saved."""


class RewardFailure(UserCodeFailure):
    """A reward function (or an environment's get_reward) kept failing; training stopped after saving a checkpoint."""


class UserCodeError(UserError):
    """User code failed where nothing trains yet (preview); the message names it, the row and what to do."""


class CallFailed(Exception):
    """A guarded call that failed, said already. Its text is what the model is told of a tool call; ``said`` is the whole
    message (the callable, the row, what happened, what to do)."""

    def __init__(self, text: str, said: str):
        super().__init__(text)
        self.said = said


def is_server_failure(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, is a server's (:data:`SERVER_ERRORS`; an HTTP error answer only
    from 500 up): requests', httpx's and urllib3's errors carry one as their cause, http_environment's servers raise one."""
    seen: list[BaseException] = []
    while error is not None and not any(error is earlier for earlier in seen):
        if isinstance(error, urllib.error.HTTPError) and error.code < 500:
            return False  # the server answered, refusing the request (the action, the data): not its failure
        if isinstance(error, SERVER_ERRORS):
            return True
        seen.append(error)
        error = error.__cause__ or error.__context__
    return False


def _cut(value: Any, width: int = 48) -> str:
    """``value`` in about ``width`` characters at most: text quoted, anything else as its repr."""
    text = " ".join(value.split()) if isinstance(value, str) else repr(value)
    text = text if len(text) <= width else text[: width - 3] + "..."
    return repr(text) if isinstance(value, str) else text


def _prompt_text(prompt: Any) -> Any:
    """A prompt's last user text: chat messages' last user message, its text blocks joined; text as it is."""
    if isinstance(prompt, list):
        said = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        prompt = said[-1] if said else None
    if isinstance(prompt, list):
        prompt = " ".join(str(block.get("text", "")) for block in prompt if isinstance(block, dict) and block.get("text"))
    return prompt


def describe_row(row: Mapping[str, Any]) -> str:
    """A row as the guard's messages name it: its prompt's last user text and its other plain values, each cut short.

    >>> describe_row({"prompt": [{"role": "user", "content": "What is 2 + 2?"}], "answer": "4", "secret": 5})
    "the row 'What is 2 + 2?' (answer '4', secret 5)"
    """
    prompt = _prompt_text(row.get("prompt"))
    values = [f"{key} {_cut(value, 24)}" for key, value in row.items()
              if key not in ("prompt", "completion", "completion_ids") and isinstance(value, (str, int, float, bool))]
    return " ".join(["the row", *([_cut(prompt)] if isinstance(prompt, str) else []),
                     *([f"({', '.join(values[:4])}{', ...' if len(values) > 4 else ''})"] if values else [])])


def describe_call(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """A call as the model wrote it: ``guess(number=5)``."""
    shown = [_cut(value, 24) for value in args] + [f"{key}={_cut(value, 24)}" for key, value in kwargs.items()]
    return f"{name}({', '.join(shown)})"


_GUARDS = str(Path(__file__).parent)


def _user_traceback(error: BaseException) -> str:
    """``error``'s traceback without the guard's frames: the user's code, where it went wrong."""
    frames = traceback.extract_tb(error.__traceback__)
    frames = [frame for frame in frames if not frame.filename.startswith(_GUARDS)] or frames
    return ("Traceback (most recent call last):\n" + "".join(traceback.format_list(frames))
            + "".join(traceback.format_exception_only(error)))


@dataclass(frozen=True)
class Failure:
    """How one call failed: ``what`` in one line, ``detail`` below it (the stack where it hung, a traceback; nothing for
    a server's, whose line names it), whether it was a hang or a server's failure, and the exception it raised."""

    what: str
    detail: str = ""
    hang: bool = False
    server: bool = False
    error: BaseException | None = None

    @property
    def own(self) -> bool:
        return not (self.hang or self.server)


class GuardedCall:
    """The calls of one piece of user code, each for at most ``timeout`` seconds (None: no limit), their failures said
    once each and counted. ``label`` names it in messages (``"tool 'guess'"``, ``"environment Game's reset"``);
    ``setting`` is its time limit's."""

    def __init__(self, func: Callable, label: str, setting: str, timeout: float | None):
        self.func = func
        self.label = label
        self.setting = setting
        self.timeout = timeout
        # async code runs on an event loop of its own, which any thread can time
        self.unlimited_reason = None if timeout is None or is_async_reward(func) else unavailable_reason()
        self.limit = TimeLimit(timeout, name=label) if timeout is not None else None
        self.calls = 0
        self.failures = 0
        self.consecutive_failures = 0
        self.last_error: str | None = None
        self._said: set[str] = set()

    def _invoke(self, *args, **kwargs) -> Any:
        self.calls += 1
        if self.limit is None or unavailable_reason() is not None:
            return self.func(*args, **kwargs)
        return self.limit.call(self.func, *args, **kwargs)

    async def _invoke_async(self, *args, **kwargs) -> Any:
        self.calls += 1
        if self.limit is None:
            return await self.func(*args, **kwargs)
        return await self.limit.call_async(self.func, *args, **kwargs)

    def _failure(self, error: BaseException) -> Failure:
        if isinstance(error, TimedOut):
            return Failure(f"it did not return within {self.setting}={error.seconds:g} s", f"It was here:\n{error.stack}",
                           hang=True)
        if isinstance(error, CallFailed):
            return Failure(str(error), error.said, error=error)
        if is_server_failure(error):
            return Failure(" ".join(f"{type(error).__name__}: {error}".split()), server=True, error=error)
        return Failure(f"it raised {type(error).__name__}: {error}", _user_traceback(error), error=error)

    def attempt(self, *args, **kwargs) -> tuple[Any, Failure | None]:
        """The call's result and None, or None and how it failed."""
        try:
            return self._invoke(*args, **kwargs), None
        except Exception as error:  # TimedOut among them
            return None, self._failure(error)

    async def attempt_async(self, *args, **kwargs) -> tuple[Any, Failure | None]:
        try:
            return await self._invoke_async(*args, **kwargs), None
        except Exception as error:
            return None, self._failure(error)

    def answered(self) -> None:
        self.consecutive_failures = 0

    def failed(self, message: str, *, key: str | None = None, counts: bool = True) -> None:
        """Say ``message`` once for each ``key`` (default: the message itself), and count the failure unless it does
        not count (``counts``: a tool's own exception, the model's wrong call, does not)."""
        if counts:
            self.failures += 1
            self.consecutive_failures += 1
            self.last_error = message
        else:
            self.answered()
        key = message if key is None else key
        if key not in self._said:
            self._said.add(key)
            (logger.warning if counts else logger.info)(message)


def _fix(failure: Failure, what: str, setting: str) -> str:
    """What to do about ``failure`` of ``what`` (``"the tool"``), whose time limit is ``setting``."""
    if failure.hang:
        return (f"Fix {what} (a timeout for its network calls, no input()), or raise {setting} (train(..., {setting}=...), "
                "None for no limit) if it really takes this long.")
    if failure.server:
        return (f"Start the server it calls (or fix its address): {PATIENCE} failures in a row stop the run with its "
                "checkpoint, which resumes once the server is back (train(..., resume=True)).")
    return f"Fix {what}."


# --- rewards ----------------------------------------------------------------------------------------------------------

class GuardedReward(GuardedCall):
    """``func`` called as TRL calls a reward, each call for at most ``timeout`` seconds (None: no limit), with failures
    and hangs turned into ``None`` scores, said naming the step and the row, and counted."""

    _FATE = "It was stopped there."

    def __init__(self, func: Callable, timeout: float | None = REWARD_TIMEOUT, name: str | None = None,
                 label: str | None = None):
        self.__name__ = name or reward_name(func)  # what TRL logs it under (trl.trainer.utils.get_callable_name)
        super().__init__(func, label or f"reward function {self.__name__!r}", "reward_timeout", timeout)

    def _where(self, kwargs: dict[str, Any], n: int, index: int | None) -> str:
        """`` at step 3 on completion 2 of 8, the row '...' (answer '4')``: where a call failed."""
        state = kwargs.get("trainer_state")
        step = f" at step {state.global_step + 1}" if getattr(state, "global_step", None) is not None else ""
        prompts = kwargs.get("prompts")
        if index is None or not isinstance(prompts, list) or index >= len(prompts):
            first = describe_row({"prompt": prompts[0]}) if isinstance(prompts, list) and prompts else "no row"
            return f"{step} on a batch of {n} completions (the first: {first.removeprefix('the row ')})"
        row = {"prompt": prompts[index], **{key: values[index] for key, values in kwargs.items()
                                            if key not in (*BATCH_ARGUMENTS, *SHARED_ARGUMENTS) and isinstance(values, list)
                                            and len(values) == n}}
        return f"{step} on completion {index} of {n}, {describe_row(row)}"

    def _failed(self, detail: str, n: int, kwargs: dict[str, Any], index: int | None = None) -> list[None]:
        self.failed(f"{self.label} failed{self._where(kwargs, n, index)}; this batch scores None.\n{detail}", key=detail)
        return [None] * n

    def _raised(self, failure: Failure, n: int, kwargs: dict[str, Any]) -> list[None]:
        if failure.hang:  # the whole batch was being scored: no row to name
            fix = _fix(failure, "the function", self.setting).replace("it really takes", "scoring a batch really takes")
            return self._failed(f"{failure.what}. {failure.detail}{self._FATE} {fix}", n, kwargs)
        detail = failure.detail if failure.own else f"{failure.what}. {_fix(failure, 'the function', self.setting)}"
        per_completion = [values for key, values in kwargs.items()  # the completions first, then the prompts, the columns
                          if key not in SHARED_ARGUMENTS and isinstance(values, list) and len(values) == n]
        return self._failed(detail, n, kwargs, _row_in_frames(failure.error, per_completion))

    def _checked(self, value: Any, n: int, kwargs: dict[str, Any]) -> list[float | None]:
        scores, violations = read_scores(value, n)
        if violations:
            return self._failed(f"it {violations[0].message}", n, kwargs, violations[0].row)
        self.answered()
        return scores

    def __call__(self, *args, completions=(), **kwargs):
        n = len(completions)  # before the call: the function may change its own copy
        args, kwargs = private_copy(args), reward_arguments({"completions": completions, **kwargs})
        try:
            scores = self._invoke(*args, **kwargs)
        except Exception as error:  # TimedOut among them
            return self._raised(self._failure(error), n, kwargs)
        return self._checked(scores, n, kwargs)


class AsyncGuardedReward(GuardedReward):
    """:class:`GuardedReward` for ``async def`` reward functions (TRL awaits them concurrently)."""

    _FATE = "Code that blocks its event loop cannot be stopped: it is left running there, on a loop of its own."

    async def __call__(self, *args, completions=(), **kwargs):
        n = len(completions)  # before the call: the function may change its own copy
        args, kwargs = private_copy(args), reward_arguments({"completions": completions, **kwargs})
        try:
            scores = await self._invoke_async(*args, **kwargs)
        except Exception as error:  # TimedOut among them
            return self._raised(self._failure(error), n, kwargs)
        return self._checked(scores, n, kwargs)


class AwaitedGuardedReward(AsyncGuardedReward):
    """:class:`AsyncGuardedReward` called plainly, for a TRL that awaits no callable object (``async_reward_objects``
    in grpo_lite/machine/stack.py): each call runs the function's coroutine to its end, one reward after another."""

    def __call__(self, *args, completions=(), **kwargs):
        return run_coroutine(super().__call__(*args, completions=completions, **kwargs))


def _row_in_frames(error: BaseException, per_completion: list[list]) -> int | None:
    """The completion a reward was at when it raised, where a frame of its holds one of the values it was given for one
    (``for completion in completions``, ``for a in answer``): innermost frame first, ``per_completion``'s lists in their
    order (the completions first); None where no frame does. Numbers are no evidence (one 0 is every 0)."""
    frames = [frame for frame, _ in traceback.walk_tb(error.__traceback__)
              if not frame.f_code.co_filename.startswith(_GUARDS)]
    for frame in reversed(frames):
        held = [value for value in frame.f_locals.values() if not isinstance(value, (int, float, bool, type(None)))]
        for values in per_completion:
            for i, given in enumerate(values):
                if any(value is given for value in held):
                    return i
    return None


def guard(func: Callable, timeout: float | None = REWARD_TIMEOUT, name: str | None = None,
          label: str | None = None) -> GuardedReward:
    """``func`` wrapped so that its failures and hangs score ``None``; async functions stay async where the installed
    TRL awaits the wrapper. ``name``: the one TRL logs it under (default: its own, :func:`rewards.combine.reward_name`);
    ``label``: what messages call it (default ``reward function '<name>'``)."""
    if isinstance(func, GuardedReward) and name in (None, func.__name__):
        return func
    func = func.func if isinstance(func, GuardedReward) else func
    if not is_async_reward(func):
        return GuardedReward(func, timeout, name, label)
    kind = AsyncGuardedReward if stack.newer("async_reward_objects") else AwaitedGuardedReward
    return kind(func, timeout, name, label)


def environment_reward(kind: type) -> Callable:
    """The reward TRL makes of an environment class's ``get_reward`` (trl/trainer/grpo_trainer.py, GRPOTrainer.__init__):
    each rollout played in an instance of exactly ``kind`` scored by its ``get_reward()``, every other one None."""
    if inspect.iscoroutinefunction(kind.get_reward):
        async def get_reward(environments, **kwargs):
            return [await e.get_reward() if type(e) is kind else None for e in environments]
    else:
        def get_reward(environments, **kwargs):
            return [e.get_reward() if type(e) is kind else None for e in environments]
    return get_reward


def guard_environment_rewards(trainer, first: int, timeout: float | None) -> list[GuardedReward]:
    """Guard the rewards TRL's trainer added after the ``first`` it was given (an environment's ``get_reward``, named after
    its class) as the run's own are guarded; returns them."""
    added = []
    for i in range(first, len(trainer.reward_funcs)):
        name = trainer.reward_func_names[i]
        trainer.reward_funcs[i] = guard(trainer.reward_funcs[i], timeout, name=name, label=f"environment {name}'s get_reward")
        added.append(trainer.reward_funcs[i])
    return added


# --- tools, environments, rollout functions ---------------------------------------------------------------------------

class GuardedTool(GuardedCall):
    """A tool's calls: the run's tool, or an environment's method. A hang or a server's failure is said, counted, and
    what the model is told; the tool's own exception is said once and raised as it is, TRL telling the model."""

    def __init__(self, func: Callable, label: str, timeout: float | None):
        super().__init__(func, label, "tool_timeout", timeout)

    def _answer(self, result: Any, failure: Failure | None, call: str, row: str | None) -> Any:
        if failure is None:
            try:  # TRL shows the model a list as content blocks, anything else as its text: made here, where it is guarded
                result = result if isinstance(result, list) else str(result)
            except Exception as error:
                failure = self._failure(error)
            else:
                self.answered()
                return result
        where = f" ({call}{f', {row}' if row else ''})"
        if failure.own:  # raised again as it is: TRL tells the model {"error": str(error)}, as it would unguarded
            self.failed(f"{self.label} failed{where}: {failure.what}; the model is told so, as TRL tells it of a call that "
                        "failed (tools/failure_frequency counts them): a wrong call the model made is part of its "
                        f"learning; if the tool is wrong, fix it.\n{failure.detail}", key=failure.what, counts=False)
            raise failure.error
        self.failed(f"{self.label} failed{where}: {failure.what}; the model is told the call failed and the episode goes "
                    f"on. {_fix(failure, 'the tool', self.setting)}" + (f" {failure.detail}" if failure.detail else ""),
                    key=failure.what)
        told = failure.what if failure.server else f"{self.func.__name__} {failure.what.removeprefix('it ')}"
        raise CallFailed(told, self.last_error)

    def run(self, args: tuple, kwargs: dict, *, shown: tuple = (), row: str | None = None) -> Any:
        """The tool's result for the model (a list as it is, else its text); raises for a call that failed. ``shown``:
        the arguments the model gave (not ``self``); ``row``: the episode's, where known."""
        result, failure = self.attempt(*args, **kwargs)
        return self._answer(result, failure, describe_call(self.func.__name__, shown, kwargs), row)

    async def run_async(self, args: tuple, kwargs: dict, *, shown: tuple = (), row: str | None = None) -> Any:
        result, failure = await self.attempt_async(*args, **kwargs)
        return self._answer(result, failure, describe_call(self.func.__name__, shown, kwargs), row)


def guarded_tool(tool: Callable, timeout: float | None = TOOL_TIMEOUT) -> Callable:
    """``tool`` as TRL takes it (its name, signature, type hints and docstring; async where it is), each call guarded:
    see :class:`GuardedTool`. A tool guarded already is returned as it is."""
    if isinstance(getattr(tool, "guard", None), GuardedTool):
        return tool
    checked = GuardedTool(tool, f"tool {tool.__name__!r}", timeout)
    if inspect.iscoroutinefunction(tool):
        @functools.wraps(tool)
        async def run(*args, **kwargs):
            return await checked.run_async(args, kwargs, shown=args)
    else:
        @functools.wraps(tool)
        def run(*args, **kwargs):
            return checked.run(args, kwargs, shown=args)
    run.guard = checked
    return run


_EPISODE = "_grpo_lite_episode"  # an environment instance's row and, where its reset failed, why


def _episode(environment: Any) -> dict[str, Any]:
    """What the guard keeps on an environment instance; a throwaway where the instance has no ``__dict__``."""
    attributes = getattr(environment, "__dict__", None)
    return attributes.setdefault(_EPISODE, {}) if isinstance(attributes, dict) else {}


def _observation_problem(observation: Any) -> str | None:
    """What is wrong with what ``reset`` returned, as TRL adds it to the prompt's last message: None, text, or a list of
    content blocks."""
    if observation is None or isinstance(observation, str):
        return None
    if isinstance(observation, list) and all(isinstance(block, dict) and "type" in block for block in observation):
        return None
    return (f"it returned {_cut(observation)} (a {type(observation).__name__}); return None, text added to the prompt, or "
            "a list of content blocks")


def _guarded_reset(reset: Callable, checked: GuardedCall, name: str) -> Callable:
    @functools.wraps(reset)
    def guarded(self, *args, **row):
        episode = _episode(self)
        episode.update(row=describe_row(row), unplayable=None)
        observation, failure = checked.attempt(self, *args, **row)
        if failure is None and (problem := _observation_problem(observation)) is not None:
            failure = Failure(problem)
        if failure is None:
            checked.answered()
            return observation
        checked.failed(f"environment {name}'s reset failed on {episode['row']}: {failure.what}; this episode is not "
                       f"played: its tools answer the failure and its get_reward scores None. "
                       f"{_fix(failure, 'reset', checked.setting)}" + (f"\n{failure.detail}" if failure.detail else ""),
                       key=failure.what)
        episode["unplayable"] = f"the episode could not start: reset {failure.what.removeprefix('it ')}"
        return None
    return guarded


def _guarded_method(method: Callable, checked: GuardedTool) -> Callable:
    def arguments(self, args, kwargs):
        episode = _episode(self)
        if episode.get("unplayable"):
            raise CallFailed(episode["unplayable"], episode["unplayable"])
        return (self, *args), kwargs, episode.get("row")

    if inspect.iscoroutinefunction(method):
        @functools.wraps(method)
        async def guarded(self, *args, **kwargs):
            given, kwargs, row = arguments(self, args, kwargs)
            return await checked.run_async(given, kwargs, shown=args, row=row)
    else:
        @functools.wraps(method)
        def guarded(self, *args, **kwargs):
            given, kwargs, row = arguments(self, args, kwargs)
            return checked.run(given, kwargs, shown=args, row=row)
    return guarded


def _checked_reward(get_reward: Callable, name: str) -> Callable:
    """``get_reward`` of an environment whose episode was played, checked as a reward's score is (a finite number; None
    and NaN named); None for an episode whose reset failed. Its time is the reward call's (``reward_timeout``)."""
    def checked(self, value):
        episode = _episode(self)
        scores, violations = read_scores([value], 1)
        if value is not None and not violations:
            return scores[0]
        said = (f"environment {name}'s get_reward returned {value!r} for the episode of {episode.get('row', 'its row')}; "
                "return a finite float (the episode's reward)")
        raise CallFailed(said, said)

    if inspect.iscoroutinefunction(get_reward):
        @functools.wraps(get_reward)
        async def guarded(self):
            return None if _episode(self).get("unplayable") else checked(self, await get_reward(self))
    else:
        @functools.wraps(get_reward)
        def guarded(self):
            return None if _episode(self).get("unplayable") else checked(self, get_reward(self))
    return guarded


def _guarded_class(kind: type, timeout: float | None, guards: list[GuardedCall], *, slots: bool) -> type:
    """A subclass of ``kind`` of the same name whose reset, public methods and get_reward are guarded; ``slots``: with
    no slot of its own, so that an instance of ``kind`` can become one."""
    name = kind.__name__
    namespace: dict[str, Any] = {"__module__": kind.__module__, "__qualname__": kind.__qualname__, "__doc__": kind.__doc__,
                                 "_grpo_lite_guarded": True}
    if slots:
        namespace["__slots__"] = ()
    for attribute, function in inspect.getmembers(kind, predicate=inspect.isfunction):
        if attribute == "reset":
            checked = GuardedCall(function, f"environment {name}'s reset", "tool_timeout", timeout)
            namespace[attribute] = _guarded_reset(function, checked, name)
        elif attribute == "get_reward":
            namespace[attribute] = _checked_reward(function, name)
            continue
        elif not attribute.startswith("_") and not isinstance(inspect.getattr_static(kind, attribute), staticmethod):
            checked = GuardedTool(function, f"tool {attribute!r} of environment {name}", timeout)
            namespace[attribute] = _guarded_method(function, checked)
        else:
            continue
        guards.append(checked)
    return type(name, (kind,), namespace)


def guarded_environment(factory: Any, timeout: float | None, guards: list[GuardedCall]) -> Any:
    """``factory`` (a class, a function making instances, or a dict of them) making environments whose ``reset``, tools
    and ``get_reward`` are guarded, each instance still an instance of its class, of the same name (TRL names the
    environment's reward after it). The guards made are added to ``guards``."""
    if isinstance(factory, dict):
        return {key: guarded_environment(each, timeout, guards) for key, each in factory.items()}
    if getattr(factory, "_grpo_lite_guarded", False):
        return factory
    if inspect.isclass(factory):
        return _guarded_class(factory, timeout, guards, slots=False)
    classes: dict[type, type] = {}

    @functools.wraps(factory)
    def make():
        environment = factory()
        kind = type(environment)
        if kind not in classes:
            classes[kind] = _guarded_class(kind, timeout, guards, slots=True)
        try:
            environment.__class__ = classes[kind]
        except TypeError as refused:  # an instance that cannot change class (a built-in type's)
            logger.warning(f"environment_factory makes a {kind.__name__}, whose instances cannot be guarded ({refused}): "
                           "its calls run without time limits or checks")
        return environment

    make._grpo_lite_guarded = True
    return make


def _rollout_problem(output: Any, n: int) -> str | None:
    """What is wrong with a rollout function's dict for ``n`` prompts, as TRL reads it (trl/trainer/grpo_trainer.py,
    ``_generate``): the lists it needs, one per prompt, token ids, a log-probability per completion token, ``env_mask``'s
    0 and 1 per token, and its own keys' lists one per prompt (they reach the rewards)."""
    if not isinstance(output, Mapping):
        return f"it returned {_cut(output)} (a {type(output).__name__}), not a dict of {', '.join(ROLLOUT_KEYS)}"
    if missing := [key for key in ROLLOUT_KEYS if key not in output]:
        return f"its dict has no {', '.join(map(repr, missing))} (it has {', '.join(map(repr, output)) or 'nothing'})"
    for key, values in output.items():
        if key in (*ROLLOUT_KEYS, "env_mask") or isinstance(values, list):
            if not isinstance(values, (list, tuple)) or len(values) != n:
                got = f"{len(values)} values" if isinstance(values, (list, tuple)) else f"a {type(values).__name__}"
                return f"its {key!r} is {got} for {n} prompts; give one per prompt"
    for i, (prompt, completion, logprobs) in enumerate(zip(*(output[key] for key in ROLLOUT_KEYS))):
        for key, ids in (("prompt_ids", prompt), ("completion_ids", completion)):
            if not isinstance(ids, (list, tuple)) or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
                return f"its {key}[{i}] is {_cut(ids)}, not a list of token ids (whole numbers)"
        if not isinstance(logprobs, (list, tuple)) or len(logprobs) != len(completion):
            got = f"{len(logprobs)} values" if isinstance(logprobs, (list, tuple)) else _cut(logprobs)
            return f"its logprobs[{i}] is {got} for {len(completion)} completion tokens; give one per token"
        if (bad := next((v for v in logprobs if not _finite(v)), _FINITE)) is not _FINITE:
            return f"its logprobs[{i}] holds {_cut(bad)}; give a finite log-probability per token"
        if "env_mask" in output:
            mask = output["env_mask"][i]
            if not isinstance(mask, (list, tuple)) or len(mask) != len(completion) or not set(mask) <= {0, 1}:
                return f"its env_mask[{i}] is {_cut(mask)} for {len(completion)} completion tokens; give a 1 (the model's) or 0 per token"
    return None


_FINITE = object()  # no value that is not a finite number


def _finite(value: Any) -> bool:
    """A finite number, as a score must be (a bool, None or text is not one)."""
    return value is not None and not isinstance(value, bool) and not read_scores([value], 1)[1]


def guarded_rollout(rollout_func: Callable, timeout: float | None = ROLLOUT_TIMEOUT) -> Callable:
    """``rollout_func`` as TRL calls it, ``rollout_func(prompts, trainer)``, for at most ``timeout`` seconds, its dict
    checked (:func:`_rollout_problem`); a failure is said and raised as :class:`CallFailed`: there is no batch to go on
    with."""
    if getattr(rollout_func, "_grpo_lite_guarded", False):
        return rollout_func
    name = getattr(rollout_func, "__name__", repr(rollout_func))
    checked = GuardedCall(rollout_func, f"rollout function {name!r}", "rollout_timeout", timeout)

    @functools.wraps(rollout_func)
    def run(prompts, trainer):
        output, failure = checked.attempt(prompts, trainer)
        if failure is None and (problem := _rollout_problem(output, len(prompts))) is not None:
            failure = Failure(problem)
        if failure is None:
            checked.answered()
            return output
        first = describe_row({"prompt": prompts[0]}).removeprefix("the row ") if prompts else "none"
        checked.failed(f"{checked.label} failed on a batch of {len(prompts)} prompts (the first: {first}): {failure.what}. "
                       f"{_fix(failure, 'the rollout function', checked.setting)}"
                       + (f"\n{failure.detail}" if failure.detail else ""), key=failure.what)
        raise CallFailed(failure.what, checked.last_error)

    run._grpo_lite_guarded = True
    return run


def guard_rollouts(options: dict[str, Any], *, tool_timeout: float | None = TOOL_TIMEOUT,
                   rollout_timeout: float | None = ROLLOUT_TIMEOUT) -> tuple[dict[str, Any], list[GuardedCall]]:
    """``options`` (GRPOTrainer's tools, environment_factory, rollout_func, as checked by
    ``grpo_lite.training.rollouts``) guarded, and the guards made (for :class:`FailureStop` to watch): a list that grows
    as a factory function makes environments of a class not met yet. The rollout function's guard raises where it fails,
    so it is not among them."""
    guards: list[GuardedCall] = []
    guarded = dict(options)
    if options.get("tools") is not None:
        guarded["tools"] = [guarded_tool(tool, tool_timeout) for tool in options["tools"]]
        guards += [tool.guard for tool in guarded["tools"]]
    if options.get("environment_factory") is not None:
        guarded["environment_factory"] = guarded_environment(options["environment_factory"], tool_timeout, guards)
    if options.get("rollout_func") is not None:
        guarded["rollout_func"] = guarded_rollout(options["rollout_func"], rollout_timeout)
    return guarded, guards


def unlimited(guards: Sequence[GuardedCall]) -> str | None:
    """One line naming the callables that run without the time limit asked for, and why; None when there are none."""
    unlimited = [g for g in guards if g.unlimited_reason is not None]
    if not unlimited:
        return None
    names = ", ".join(repr(g.__name__) if isinstance(g, GuardedReward) else g.label for g in unlimited)
    return (f"{unlimited[0].setting} does not apply to {names}: {unlimited[0].unlimited_reason}. "
            "They run as under plain TRL; a hang in one of them hangs the run.")


def _seconds(limit: float | None) -> str:
    return "no limit" if limit is None else f"{limit:g} s"


def time_limits(limits: Mapping[str, float | None], options: Mapping[str, Any]) -> str:
    """The time limits of a run with ``limits`` (a :data:`TIME_LIMITS` key -> its seconds, None for none) and ``options`` (its
    tools, environment_factory, rollout_func), each with its setting: the line a run starts with."""
    kinds = ["reward"]
    if options.get("tools") is not None or options.get("environment_factory") is not None:
        kinds.append("tool")
    if options.get("rollout_func") is not None:
        kinds.append("rollout")
    said = [f"{_seconds(limits[kind])} a {TIME_LIMITS[kind].call} ({TIME_LIMITS[kind].setting})" for kind in kinds]
    factory = options.get("environment_factory")
    for each in (factory.values() if isinstance(factory, dict) else [factory]):
        if inspect.isclass(each) and issubclass(each, HttpEnvironment):
            said.append(f"{each._timeout_s:g} s a request to {each.__name__}'s servers (http_environment(timeout_s=...))")
    return f"time limits: {', '.join(dict.fromkeys(said))}; a call past its limit is stopped and said"


class FailureStop(TrainerCallback):
    """Asks ``switch`` to stop when one of ``guards`` has failed ``patience`` calls in a row.

    List it before the switch: it checks at each step's end, and the switch acts at the same step's end. ``guards`` may
    grow once the trainer exists (an environment's get_reward, guarded then).
    """

    def __init__(self, guards: list[GuardedCall], switch: StopSwitch, patience: int = PATIENCE):
        self.guards = guards
        self.switch = switch
        self.patience = patience
        self.failed: GuardedCall | None = None

    def on_step_end(self, args, state, control, **kwargs):
        for checked in self.guards:
            if self.failed is None and checked.consecutive_failures >= self.patience:
                self.failed = checked
                self.switch.request(f"{checked.label} failed {self.patience} calls in a row",
                                    error=self.error(state.global_step, args.output_dir))
        return control

    def error(self, step: int, output_dir) -> UserCodeFailure:
        """The exception ``train`` raises after saving, naming the callable and its last error."""
        kind = RewardFailure if isinstance(self.failed, GuardedReward) else UserCodeFailure
        last = self.failed.last_error or ""
        joined = "\n" if "\n" in last else " "  # a server's failure is one line: the whole message stays one
        return kind(f"{self.failed.label} failed {self.patience} calls in a row; training stopped at step {step} and a "
                    f"checkpoint was saved in {output_dir}: fix it (start a server it calls), then resume from there "
                    f"(train(..., resume=True), grpo-lite train CONFIG --resume). Last error:{joined}{last}")
