"""A run stopped by Ctrl-C or SIGTERM (README, "Exit codes": 130): the signal is noted on the run before it is
raised, no item runs after it, the reports still say what ran, and no claim of an interrupted run is met."""
from __future__ import annotations

from typing import Any

import pluggy

from _vllm_gates.run.features import Judging, ReportPass, hookimpl

pytest_hookimpl = pluggy.HookimplMarker("pytest")  # pytest.hookimpl, without importing pytest where no pytest runs


def inside_gc_callback(frame: Any) -> bool:
    """Whether ``frame`` (a signal handler's) runs inside a garbage-collection callback (Hypothesis registers one):
    a KeyboardInterrupt raised there is printed by Python as an ignored exception with its traceback, and lost."""
    import gc

    codes = set()
    for callback in gc.callbacks:
        function = getattr(callback, "__func__", callback)
        code = getattr(function, "__code__", None)
        if code is not None:
            codes.add(code)
    while frame is not None and codes:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def no_line_to_show(frame: Any) -> bool:
    """Whether some frame under the handler is at an instruction without a line number (Python 3.11 has them, e.g.
    entering a `with` block's context managers): pytest's report of a KeyboardInterrupt raised there fails on the
    missing line (TypeError) and the run exits 1 with a traceback instead of 130."""
    while frame is not None:
        if frame.f_lineno is None:
            return True
        frame = frame.f_back
    return False


def _deliver_again(signum: int) -> None:
    """The signal sent again in a moment, once the garbage collector's callback has returned (or the interpreter
    has moved to an instruction with a line number)."""
    import os
    import threading

    timer = threading.Timer(0.02, os.kill, (os.getpid(), signum))
    timer.daemon = True
    timer.start()


class InterruptWatcher:
    """The pytest side: SIGTERM stops the run as Ctrl-C does; a Ctrl-C is noted (pytest's keyboard-interrupt hook
    has no config to find the run by); the handlers found before are put back when the session ends."""

    def __init__(self, run: Any):
        self.run = run
        self.previous_sigterm: Any = None
        self.previous_sigint: Any = None

    def install(self) -> None:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        run = self.run

        def stop(signum: int, frame: Any) -> None:
            run.interrupt("SIGTERM", override=True)
            if inside_gc_callback(frame) or no_line_to_show(frame):
                _deliver_again(signum)
                return
            raise KeyboardInterrupt("SIGTERM")

        def interrupt(signum: int, frame: Any) -> None:
            # noted before it is raised: code that swallows the KeyboardInterrupt cannot turn an interrupted run into a
            # green one; the next item stops the run again
            run.interrupt("SIGINT")
            if inside_gc_callback(frame) or no_line_to_show(frame):
                _deliver_again(signum)
                return
            raise KeyboardInterrupt("SIGINT")

        self.previous_sigterm = signal.signal(signal.SIGTERM, stop)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.previous_sigint = signal.signal(signal.SIGINT, interrupt)

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        self.run.interrupt("SIGINT")

    @pytest_hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: Any) -> None:
        """A run already interrupted (its KeyboardInterrupt swallowed somewhere) runs no further item."""
        if self.run.interrupted:
            raise KeyboardInterrupt(self.run.interrupted)

    def pytest_unconfigure(self, config: Any) -> None:
        import signal

        if self.previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self.previous_sigterm)
        if self.previous_sigint is not None:
            signal.signal(signal.SIGINT, self.previous_sigint)


@hookimpl
def gates_configure(run: Any, config: Any) -> None:
    watcher = InterruptWatcher(run)
    watcher.install()
    config.pluginmanager.register(watcher, "vllm-gates-interrupts")


def _stopped(report: Any, judging: Judging) -> Any:
    """The last pass: an interrupted run's report says so, and none of its claims is met."""
    if not judging.run.interrupted:
        return report
    from _vllm_gates.results.verdicts import interrupted

    return interrupted(report, judging.run.interrupted)


@hookimpl
def gates_report_passes() -> list[ReportPass]:
    return [ReportPass(700, "interrupted", _stopped)]
