"""Running client work that a signal may cancel: Ctrl-C during one session command, SIGTERM or SIGHUP for the
whole client. Cancelling (rather than the signal's default action) lets the work end through its own cleanup,
such as the SDK's, which stops a stdio server the client started."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import anyio

_T = TypeVar("_T")


class Interrupted(Exception):
    """The work was cancelled by `signal`."""

    def __init__(self, number: signal.Signals) -> None:
        super().__init__(number.name)
        self.signal = number


async def cancelled_by(signals: Sequence[signal.Signals], work: Callable[[], Awaitable[_T]]) -> _T:
    """`work()`, cancelled when one of `signals` arrives.

    Raises:
        Interrupted: a signal arrived (whatever the cancelled work ended in).
    """
    received: list[signal.Signals] = []
    try:
        with anyio.open_signal_receiver(*signals) as incoming:
            async with anyio.create_task_group() as group:

                async def cancel_on_signal() -> None:
                    async for number in incoming:
                        received.append(signal.Signals(number))
                        group.cancel_scope.cancel()

                group.start_soon(cancel_on_signal)
                result = await work()
                group.cancel_scope.cancel()
    except Exception:
        if not received:
            raise
    if received:
        raise Interrupted(received[0])
    return result
