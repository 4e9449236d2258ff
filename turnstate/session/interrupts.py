"""An interrupt (Ctrl-C, or a signal raised as it) that a run never loses.

Python raises a signal's KeyboardInterrupt in the main thread wherever it is. When that is a
finalizer (the garbage collector closing a streamed HTTP body, say), the exception cannot go anywhere:
Python prints "Exception ignored in ..." with a traceback and goes on, and the run would play on as if
no one had asked it to stop (and, under `interrupt_once`, ignore the same signal again). Within
`interruptible()` every interrupt is remembered as well as raised, one swallowed so is not printed,
and `raise_pending()`, which the runner calls before each turn and a sweep's driver after each run,
raises it there.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_pending = False  # an interrupt came within interruptible(), raised or not


def interrupt_once(signum: int, frame: FrameType | None) -> None:
    """A signal handler that stops a run as Ctrl-C does (the runner still writes run_meta.json, outcome
    interrupted), once: the same signal again must not cut short the end the first one asked for."""
    global _pending
    signal.signal(signum, signal.SIG_IGN)
    _pending = True
    raise KeyboardInterrupt


def raise_pending() -> None:
    """Raise the interrupt that came and was swallowed (or, had it not been, has been raised already)."""
    if _pending:
        raise KeyboardInterrupt


def _unraisable(previous: Any) -> Any:
    def hook(unraisable: Any) -> None:
        global _pending
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            _pending = True  # a finalizer's: raise_pending raises it where it can go
        else:
            previous(unraisable)

    return hook


@contextmanager
def interruptible(*signals: int) -> Iterator[None]:
    """Within: each of `signals` stops the run as Ctrl-C does (`interrupt_once`), and an interrupt a
    finalizer swallowed is kept for `raise_pending`; the handlers and the unraisable hook are put back
    after, and what was pending is dropped (a run that ended is not interrupted by it)."""
    global _pending
    _pending = False
    previous_hook = sys.unraisablehook
    previous = {signum: signal.signal(signum, interrupt_once) for signum in signals}
    sys.unraisablehook = _unraisable(previous_hook)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sys.unraisablehook = previous_hook
        _pending = False
