"""Calling a function that may never return, for at most a given time.

Python cannot stop a running thread, so a function stuck in ``input()``, an HTTP call without a timeout
or an endless loop cannot be interrupted from outside. :class:`TimeLimit` runs each call in a worker
thread (a daemon, so it never keeps Python from exiting) with its own event loop, for plain and
``async`` functions alike; the caller waits at most ``seconds``. When they run out it takes the stack
where the call is stuck, raises :class:`TimedOut`, and leaves the call running (it goes on using what it
uses until it returns by itself); the next call gets a new worker. The caller is never blocked longer.

One kind of hang stops every thread, the waiting one included: C code that never releases the GIL, such
as a regular expression backtracking catastrophically inside ``re``. No Python code can run then, so
while a call runs faulthandler (a C thread that needs no GIL) is armed: if the caller has not woken
``GIL_GRACE`` seconds after the limit, it prints every thread's stack and ends the process, which would
otherwise hang with no message.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import faulthandler
import sys
import threading
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

GIL_GRACE = 30.0  # seconds past the limit that a caller which cannot wake is given before the process ends


class TimedOut(Exception):
    """A call ran past its time limit; ``stack`` is where it was at that moment."""

    def __init__(self, seconds: float, stack: str):
        super().__init__(f"did not return within {seconds:g} s")
        self.seconds = seconds
        self.stack = stack


_watchdog_lock = threading.Lock()
_watched_calls = 0


def _fault_file():
    """Where faulthandler writes: the current stderr when it is a real file, else the process's own."""
    try:
        sys.stderr.fileno()
        return sys.stderr
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__


@contextmanager
def _gil_watchdog(seconds: float):
    """Ends the process with every thread's stack if nothing cancels it within ``seconds`` (see the module
    docstring). Concurrent calls share faulthandler's one timer: each (re)arms it, the last to finish cancels it."""
    global _watched_calls
    with _watchdog_lock:
        _watched_calls += 1
        faulthandler.dump_traceback_later(seconds, exit=True, file=_fault_file())
    try:
        yield
    finally:
        with _watchdog_lock:
            _watched_calls -= 1
            if _watched_calls == 0:
                faulthandler.cancel_dump_traceback_later()


_MACHINERY = (str(Path(threading.__file__)), str(Path(asyncio.__file__).parent), str(Path(__file__)))


def _user_frames(summary: traceback.StackSummary) -> str:
    """The frames of a stack that are the caller's code, not the worker's thread and event loop."""
    return "".join(traceback.format_list([f for f in summary if not f.filename.startswith(_MACHINERY)]))


class _Worker:
    """A daemon thread running an event loop, on which each call runs as one task."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()
        self.task: asyncio.Task | None = None

    def _run(self) -> None:
        self.loop.run_forever()
        self.loop.close()

    def submit(self, coroutine) -> concurrent.futures.Future:
        async def run():
            self.task = asyncio.current_task()
            return await coroutine

        return asyncio.run_coroutine_threadsafe(run(), self.loop)

    def stack(self) -> str:
        """Where the call is: the thread's stack while it runs code, the chain of awaits while it waits on one."""
        coroutine = self.task.get_coro() if self.task is not None else None
        if coroutine is not None and not coroutine.cr_running:
            frames = []
            while coroutine is not None and getattr(coroutine, "cr_frame", None) is not None:
                frames.append((coroutine.cr_frame, coroutine.cr_frame.f_lineno))
                coroutine = coroutine.cr_await
            return _user_frames(traceback.StackSummary.extract(frames))
        frame = sys._current_frames().get(self.thread.ident)
        return _user_frames(traceback.extract_stack(frame)) if frame is not None else ""

    def abandon(self, future: concurrent.futures.Future) -> None:
        """Cancel the call (an awaiting coroutine stops; running code cannot) and end the thread once it is done."""
        future.cancel()
        self.loop.call_soon_threadsafe(self._stop_when_done)

    def _stop_when_done(self) -> None:
        if self.task is None or self.task.done():
            self.loop.stop()
        else:
            self.task.add_done_callback(lambda _: self.loop.stop())


class TimeLimit:
    """Runs the calls of one function, one at a time, each for at most ``seconds``.

    >>> import time
    >>> limit = TimeLimit(0.2, name="example")
    >>> limit.call(sum, [1, 2])
    3
    >>> def stuck():
    ...     time.sleep(5)
    >>> try:
    ...     limit.call(stuck)
    ... except TimedOut as hang:
    ...     print(hang, "| stuck in stuck():", "in stuck" in hang.stack)
    did not return within 0.2 s | stuck in stuck(): True
    """

    def __init__(self, seconds: float, *, name: str = "call"):
        if not seconds > 0:
            raise ValueError(f"a time limit must be a positive number of seconds, not {seconds!r}")
        self.seconds = float(seconds)
        self.name = name
        self._worker: _Worker | None = None

    def _submit(self, coroutine) -> tuple[_Worker, concurrent.futures.Future]:
        if self._worker is None:
            self._worker = _Worker(f"grpo-lite {self.name}")
        return self._worker, self._worker.submit(coroutine)

    def _timed_out(self, worker: _Worker, future: concurrent.futures.Future) -> TimedOut:
        hang = TimedOut(self.seconds, worker.stack())
        worker.abandon(future)
        self._worker = None
        return hang

    def call(self, func: Callable, *args: Any, **kwargs: Any) -> Any:
        """``func(*args, **kwargs)``'s result or exception; :class:`TimedOut` after ``seconds``."""
        async def run_sync():
            return func(*args, **kwargs)

        worker, future = self._submit(run_sync())
        with _gil_watchdog(self.seconds + GIL_GRACE):
            done, _ = concurrent.futures.wait([future], timeout=self.seconds)
        if not done:
            raise self._timed_out(worker, future)
        return future.result()

    async def call_async(self, func: Callable, *args: Any, **kwargs: Any) -> Any:
        """``await func(*args, **kwargs)`` on the worker's loop, so that a coroutine which blocks its loop
        cannot block the caller's; :class:`TimedOut` after ``seconds``."""
        worker, future = self._submit(func(*args, **kwargs))
        with _gil_watchdog(self.seconds + GIL_GRACE):
            done, _ = await asyncio.wait({asyncio.wrap_future(future)}, timeout=self.seconds)
        if not done:
            raise self._timed_out(worker, future)
        return future.result()
