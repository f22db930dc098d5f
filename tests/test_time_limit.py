"""TimeLimit: calls that hang are given up after their limit, with the stack where they hung."""

import asyncio
import subprocess
import sys
import textwrap
import threading

import pytest

from grpo_lite.time_limit import TimedOut, TimeLimit


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


def test_the_next_call_gets_a_new_worker_while_the_abandoned_one_still_runs():
    release = threading.Event()
    limit = TimeLimit(0.2)
    with pytest.raises(TimedOut):
        limit.call(release.wait)
    assert limit.call(lambda: threading.current_thread().name) == "grpo-lite call"
    assert sum(t.name == "grpo-lite call" for t in threading.enumerate()) >= 2  # the first one still waits
    release.set()


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="positive number of seconds"):
        TimeLimit(0)


def test_a_hang_that_holds_the_gil_ends_the_process_with_its_stack():
    # A catastrophic regular expression runs inside `re` without releasing the GIL: no thread can act, so
    # faulthandler prints the stacks and ends the process instead of letting it hang silently.
    script = textwrap.dedent("""
        import re
        import grpo_lite.time_limit as time_limit

        time_limit.GIL_GRACE = 1.0

        def backtracking_reward():
            return re.match(r"(a+)+$", "a" * 40 + "b")

        time_limit.TimeLimit(0.5).call(backtracking_reward)
        print("returned")
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "returned" not in run.stdout
    assert "Timeout" in run.stderr and "in backtracking_reward" in run.stderr
