"""Start a graceful stop as soon as the process is told to stop.

uvicorn (also as gunicorn's worker) turns SIGTERM and SIGINT into a graceful shutdown: it stops
accepting connections, waits for the open requests to finish, and only then runs the lifespan's
shutdown. Some requests stay open as long as a turn runs — a ``?wait=true`` answer, an event
stream — so a stop that began only at lifespan shutdown would wait for them (a minute, or until
the orchestrator kills the process and leaves its turns to lease expiry). ``on_stop_signal``
puts a callback in front of the server's own handler, so the turns end, and those requests are
answered, right when the signal arrives; the server then shuts down as before.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from types import FrameType

__all__ = ["on_stop_signal"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

_Handler = Callable[[int, FrameType | None], object]


def on_stop_signal(callback: Callable[[], object]) -> Callable[[], None]:
    """Call ``callback`` on the running event loop when SIGTERM or SIGINT arrives, then the
    handler that was installed before (the server's); returns what undoes it.

    Installs nothing off the main thread (signals reach only the main thread's handlers) nor
    over a default disposition: no server that stops gracefully is listening there, and
    chaining onto "terminate the process" would turn a stop into a crash."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    installed: dict[int, tuple[_Handler, _Handler]] = {}
    for signum in STOP_SIGNALS:
        previous = signal.getsignal(signum)
        if not callable(previous) or previous is signal.default_int_handler:
            continue

        def handler(received: int, frame: FrameType | None, previous: _Handler = previous) -> None:
            loop.call_soon_threadsafe(callback)
            previous(received, frame)

        signal.signal(signum, handler)
        installed[signum] = (handler, previous)

    def restore() -> None:
        for signum, (handler, previous) in installed.items():
            if signal.getsignal(signum) is handler:  # nobody replaced it meanwhile
                signal.signal(signum, previous)

    return restore
