"""TimeLimit: calls that hang are given up after their limit, with the stack where they hung."""

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from grpo_lite.guards import time_limit
from grpo_lite.guards.time_limit import SIGNAL, TimedOut, TimeLimit, unavailable_reason


def test_an_awaiting_coroutine_is_reported_where_it_waits_and_cancelled():
    cancelled = threading.Event()

    async def slow_http_call(url, **kwargs):
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    limit = TimeLimit(0.2, name="http")
    with pytest.raises(TimedOut) as hang:
        asyncio.run(limit.call_async(slow_http_call, "https://example.invalid"))
    assert "in slow_http_call" in hang.value.stack and "await asyncio.sleep(60)" in hang.value.stack
    assert cancelled.wait(5)


def test_a_function_s_own_timeout_error_is_its_error_not_a_hang():
    def times_out():
        raise TimeoutError("the server did not answer")

    with pytest.raises(TimeoutError, match="the server did not answer"):
        TimeLimit(5).call(times_out)


def test_a_plain_call_runs_on_the_calling_thread_and_is_stopped_there():
    threads, stopped = [], []

    def busy_then_asleep(spin):
        threads.append(threading.current_thread())
        try:
            while spin:  # pure Python, then a blocking call: both are cut off where they are
                pass
            time.sleep(60)
        except BaseException:
            stopped.append(spin)
            raise

    limit = TimeLimit(0.3)
    for spin in (True, False):
        started = time.monotonic()
        with pytest.raises(TimedOut) as hang:
            limit.call(busy_then_asleep, spin)
        assert time.monotonic() - started < 30 and "in busy_then_asleep" in hang.value.stack
        assert "grpo_lite/guards/time_limit.py" not in hang.value.stack  # the stack starts at the call
    assert threads == [threading.main_thread()] * 2 and stopped == [True, False]
    assert limit.call(lambda: 7) == 7  # and the next call runs normally


def test_math_verify_keeps_its_own_signal_timeouts_inside_the_limit():
    # math-verify's parse/verify time themselves with signal.alarm (math_verify/utils.py `timeout`), which only
    # the main thread may set: off it, parse and verify raise "doesn't support threaded environment" (math_verify/parser.py, grader.py).
    from math_verify import parse, verify

    def equivalent(gold, answer):
        return verify(parse(gold), parse(answer))

    assert TimeLimit(5).call(equivalent, "$\\frac{1}{2}$", "0.5") is True

    off_main = []

    def in_a_thread():
        try:
            equivalent("$\\frac{1}{2}$", "0.5")
        except ValueError as error:
            off_main.append(str(error))

    worker = threading.Thread(target=in_a_thread)
    worker.start()
    worker.join()
    assert "doesn't support threaded environment" in off_main[0]  # what moving the call to a thread would do


def test_off_the_main_thread_a_call_is_refused_with_the_reason():
    reasons, errors = [], []

    def in_a_thread():
        reasons.append(unavailable_reason())
        try:
            TimeLimit(1, name="reward f").call(sum, [1])
        except RuntimeError as error:
            errors.append(str(error))

    worker = threading.Thread(target=in_a_thread)
    worker.start()
    worker.join()
    assert unavailable_reason() is None
    assert "off the main thread" in reasons[0] and errors[0].startswith("reward f cannot be time-limited: it is called off")


def test_a_signal_that_is_not_a_deadline_s_goes_to_the_handler_installed_before():
    received = []
    previous = signal.signal(SIGNAL, lambda signum, frame: received.append(signum))
    try:
        time_limit._dispatcher = None  # the dispatcher is installed at the first limited call and keeps what was there
        TimeLimit(5).call(lambda: os.kill(os.getpid(), SIGNAL) or time.sleep(0.05))
        assert received == [SIGNAL]
    finally:
        signal.signal(SIGNAL, previous)
        time_limit._dispatcher = None


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="positive number of seconds"):
        TimeLimit(0)


def test_a_hang_that_holds_the_gil_ends_the_process_with_its_stack():
    # A catastrophic regular expression runs inside `re` without releasing the GIL: no thread can act, so
    # faulthandler prints the stacks and ends the process instead of letting it hang silently.
    script = textwrap.dedent("""
        import re
        import grpo_lite.guards.time_limit as time_limit

        time_limit.GIL_GRACE = 1.0

        def backtracking_reward():
            return re.match(r"(a+)+$", "a" * 40 + "b")

        time_limit.TimeLimit(0.5).call(backtracking_reward)
        print("returned")
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "returned" not in run.stdout
    assert "Timeout" in run.stderr and "in backtracking_reward" in run.stderr
