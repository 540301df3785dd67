"""Time limits of many waits kept by one timer, and the clock they read.

A request's wait for its body, or for its batch to run, rarely reaches its time limit, yet a
timer set and cancelled per request costs more than the whole work of a small one. `Deadlines`
keeps them all with one timer, armed at the earliest deadline still pending: a wait that ends
only drops its entry (at once when it is the newest, as a wait that never waits is), and the
timer, when it fires, expires whatever is due and is armed again at the earliest still pending.
When every wait has the same time limit, as the waits of one kind do, deadlines come in the
order of their entries and the timer is armed once per time limit, not once per request.

Time comes from a `Clock`: the event loop's, or in tests one they advance by hand.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Seconds on a monotonic clock, and callbacks at given times on it."""

    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer: ...


class LoopClock:
    """The running event loop's clock."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_at(when, callback)


def _nothing() -> None:
    pass


class Deadline:
    """One wait's time limit: `on_expire` runs once it passes, unless the wait ended first."""

    __slots__ = ("when", "on_expire", "pending", "expired")

    def __init__(self, when: float, on_expire: Callable[[], object]) -> None:
        self.when, self.on_expire = when, on_expire
        self.pending, self.expired = True, False


class Deadlines:
    """The time limits of one kind of wait (see the module)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or LoopClock()
        self._entries: list[Deadline] = []  # pending ones, and ended ones not yet dropped
        self._pending = 0
        self._timer: Timer | None = None
        self._armed = math.inf  # when the timer fires
        self._loop: asyncio.AbstractEventLoop | None = None

    def add(self, delay_s: float, on_expire: Callable[[], object]) -> Deadline:
        """A wait due `delay_s` from now."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (tests): the old one's waits are gone
            if self._timer is not None:
                self._timer.cancel()
            self._loop, self._entries, self._pending = loop, [], 0
            self._timer, self._armed = None, math.inf
        deadline = Deadline(self.clock.now() + delay_s, on_expire)
        self._entries.append(deadline)
        self._pending += 1
        if deadline.when < self._armed:
            self._arm(deadline.when)
        return deadline

    def finish(self, deadline: Deadline) -> None:
        """The wait ended (its deadline will not run)."""
        if deadline.pending:
            deadline.pending, deadline.on_expire = False, _nothing
            self._pending -= 1
        entries = self._entries
        if entries and entries[-1] is deadline:
            entries.pop()
        elif len(entries) > 2 * self._pending + 32:  # ended ones in the middle: drop them
            self._entries = [d for d in entries if d.pending]

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._armed = self.clock.call_at(when, self._fire), when

    def _fire(self) -> None:
        self._timer, self._armed = None, math.inf
        now = self.clock.now()
        due = [d for d in self._entries if d.pending and d.when <= now]
        self._entries = [d for d in self._entries if d.pending and d.when > now]
        self._pending = len(self._entries)
        if self._entries:
            self._arm(min(d.when for d in self._entries))
        for deadline in due:
            on_expire = deadline.on_expire
            deadline.pending, deadline.expired, deadline.on_expire = False, True, _nothing
            on_expire()
