"""Calling a function for at most a given time, without moving it to another thread.

A reward function must run where TRL would run it. Some need the main thread (math-verify's ``parse`` and
``verify`` time themselves with ``signal.alarm``, which works only there), some keep thread-local state.
So :meth:`TimeLimit.call` runs a plain function on the calling thread, and a watchdog thread cuts it off:
when the limit is reached it takes the stack where the call is stuck, then sends the calling thread
:data:`SIGNAL`, whose handler raises inside the call. That ends a Python loop and a blocking call (``sleep``,
a socket read, ``input()``) alike, and the caller gets :class:`TimedOut`. Python runs signal handlers on the
main thread only, so this limit exists there only: :func:`unavailable_reason` says why it does not where it
does not, and callers then run the function without a limit rather than elsewhere.

``async`` functions run on an event loop in a worker thread (a daemon, so it never keeps Python from
exiting), as TRL runs them on a loop of its own: one that awaits past its limit is cancelled, and one that
blocks its loop (a sync call inside ``async def``) is left running there while the caller goes on; the next
call gets a new worker.

One kind of hang stops every thread, the watchdog included: C code that never releases the GIL, such as a
regular expression backtracking catastrophically inside ``re``. No Python code can run then, so while a call
runs faulthandler (a C thread that needs no GIL) is armed: if the caller has not woken ``GIL_GRACE`` seconds
after the limit, it prints every thread's stack and ends the process, which would otherwise hang with no
message.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import faulthandler
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

GIL_GRACE = 30.0  # seconds past the limit that a caller which cannot wake is given before the process ends
# SIGALRM is math-verify's (its timeout sets and cancels signal.alarm inside the call); SIGUSR2 is nobody's
# by default, and a handler installed for it before ours still gets the signals that are not ours.
SIGNAL = getattr(signal, "SIGUSR2", None)


class TimedOut(Exception):
    """A call ran past its time limit; ``stack`` is where it was at that moment."""

    def __init__(self, seconds: float, stack: str):
        super().__init__(f"did not return within {seconds:g} s")
        self.seconds = seconds
        self.stack = stack


class _Expired(BaseException):
    """Raised inside a call whose time is up: a BaseException, so that the call's own ``except Exception``
    does not swallow it (math-verify's TimeoutException is one for the same reason)."""


def unavailable_reason() -> str | None:
    """Why a plain function called from this thread cannot be time-limited where it runs; None when it can."""
    if SIGNAL is None or not hasattr(signal, "pthread_kill"):
        return "this platform cannot signal a thread (no SIGUSR2 / pthread_kill)"
    if threading.current_thread() is not threading.main_thread():
        return ("it is called off the main thread, where Python cannot interrupt a call, and moving it to "
                "another thread would change how it runs (signal.alarm timeouts such as math-verify's, thread-local state)")
    return None


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
    """The frames of a stack that are the caller's code, not this module's, a thread's or an event loop's."""
    return "".join(traceback.format_list([f for f in summary if not f.filename.startswith(_MACHINERY)]))


def _call_frames(summary: traceback.StackSummary) -> str:
    """The frames of the limited call: those below :meth:`TimeLimit.call` on the thread's stack."""
    ours = [i for i, f in enumerate(summary) if f.filename == __file__]
    return "".join(traceback.format_list(summary[ours[-1] + 1:] if ours else summary))


class _Deadline:
    """One call's deadline on the main thread: a timer that, unless the call ends first, records the call's
    stack and signals the thread, and the handler that turns that signal into :class:`_Expired`."""

    def __init__(self, seconds: float):
        self.thread = threading.get_ident()
        self.lock = threading.Lock()
        self.running = True
        self.stack: str | None = None
        self.timer = threading.Timer(seconds, self._expire)
        self.timer.daemon = True

    def _expire(self) -> None:
        with self.lock:  # the call cannot end between the stack and the signal
            if not self.running:
                return
            frame = sys._current_frames().get(self.thread)
            self.stack = _call_frames(traceback.extract_stack(frame)) if frame is not None else ""
            signal.pthread_kill(self.thread, SIGNAL)

    def handles(self) -> bool:
        """Whether a signal that arrived now is this deadline's: it raises once, while the call runs."""
        if self.running and self.stack is not None:
            self.running = False
            return True
        return False

    def end(self) -> None:
        with self.lock:
            self.running = False
        self.timer.cancel()


class _Dispatcher:
    """The one handler of :data:`SIGNAL`, installed at the first limited call and left in place (restoring the
    previous disposition could let a signal still in flight end the process). Signals that are not a deadline's
    go to the handler that was there before, or get its default action."""

    def __init__(self):
        self.deadlines: list[_Deadline] = []
        self.previous = signal.signal(SIGNAL, self._handle)

    def _handle(self, signum, frame) -> None:
        for deadline in reversed(self.deadlines):
            if deadline.handles():
                raise _Expired
        if callable(self.previous):
            self.previous(signum, frame)
        elif self.previous == signal.SIG_DFL:
            signal.signal(SIGNAL, signal.SIG_DFL)
            os.kill(os.getpid(), SIGNAL)

    @contextmanager
    def deadline(self, seconds: float):
        deadline = _Deadline(seconds)
        self.deadlines = [d for d in self.deadlines if d.running] + [deadline]  # an expired call may not have removed its own
        deadline.timer.start()
        try:
            yield deadline
        finally:
            deadline.end()


_dispatcher: _Dispatcher | None = None


class _Worker:
    """A daemon thread running an event loop, on which each async call runs as one task."""

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
    """Runs the calls of one function, each for at most ``seconds``: plain functions on the calling (main)
    thread, ``async`` ones on a worker's event loop.

    >>> import threading, time
    >>> limit = TimeLimit(0.2, name="example")
    >>> limit.call(lambda: threading.current_thread() is threading.main_thread())
    True
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

    def call(self, func: Callable, *args: Any, **kwargs: Any) -> Any:
        """``func(*args, **kwargs)``'s result or exception, run on this thread; :class:`TimedOut` after
        ``seconds``. Only on the main thread (see :func:`unavailable_reason`)."""
        global _dispatcher
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"{self.name} cannot be time-limited: {reason}")
        if _dispatcher is None:
            _dispatcher = _Dispatcher()
        try:
            # the deadline inside the watchdog: a late signal can then only cut the deadline's own exit short
            with _gil_watchdog(self.seconds + GIL_GRACE), _dispatcher.deadline(self.seconds) as deadline:
                return func(*args, **kwargs)
        except _Expired:
            raise TimedOut(self.seconds, deadline.stack or "") from None

    def _submit(self, coroutine) -> tuple[_Worker, concurrent.futures.Future]:
        if self._worker is None:
            self._worker = _Worker(f"grpo-lite {self.name}")
        return self._worker, self._worker.submit(coroutine)

    async def call_async(self, func: Callable, *args: Any, **kwargs: Any) -> Any:
        """``await func(*args, **kwargs)`` on the worker's loop, so that a coroutine which blocks its loop
        cannot block the caller's; :class:`TimedOut` after ``seconds``."""
        worker, future = self._submit(func(*args, **kwargs))
        with _gil_watchdog(self.seconds + GIL_GRACE):
            done, _ = await asyncio.wait({asyncio.wrap_future(future)}, timeout=self.seconds)
        if not done:
            hang = TimedOut(self.seconds, worker.stack())
            worker.abandon(future)
            self._worker = None
            raise hang
        return future.result()
