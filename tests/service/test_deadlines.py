"""`Deadlines`: many time limits with one timer, each expiring exactly when due (time driven by
hand), none after its wait has ended, and the list of them bounded by the waits pending."""

from __future__ import annotations

import asyncio

from dmlserve.service.deadlines import Deadlines
from tests.service.batching_helpers import ManualClock


async def test_each_expires_when_due_and_not_before() -> None:
    clock = ManualClock()
    deadlines = Deadlines(clock)
    expired: list[str] = []
    deadlines.add(5.0, lambda: expired.append("a"))
    clock.advance(1.0)
    deadlines.add(5.0, lambda: expired.append("b"))
    early = deadlines.add(2.0, lambda: expired.append("c"))  # earlier than the armed timer
    clock.advance(1.999)
    assert expired == []
    clock.advance(0.001)
    assert expired == ["c"] and early.expired
    clock.advance(2.0)  # t = 5: a is due, b (t = 6) not yet
    assert expired == ["c", "a"]
    clock.advance(10.0)
    assert expired == ["c", "a", "b"]
    assert deadlines._entries == [] and clock.timers == []  # nothing left armed


async def test_a_wait_that_ended_never_expires() -> None:
    clock = ManualClock()
    deadlines = Deadlines(clock)
    expired: list[int] = []
    ended = deadlines.add(1.0, lambda: expired.append(1))
    kept = deadlines.add(1.0, lambda: expired.append(2))
    deadlines.finish(ended)
    clock.advance(1.0)
    assert expired == [2] and not ended.expired and kept.expired
    deadlines.finish(kept)  # after it expired: nothing happens
    assert expired == [2]


async def test_waits_ending_out_of_order_leave_a_bounded_list() -> None:
    clock = ManualClock()
    deadlines = Deadlines(clock)
    slow = deadlines.add(60.0, lambda: None)  # pending throughout
    for _ in range(1000):  # first in, first out: never the newest when it ends
        a = deadlines.add(60.0, lambda: None)
        b = deadlines.add(60.0, lambda: None)
        deadlines.finish(a)
        deadlines.finish(b)
        assert len(deadlines._entries) <= 2 * 1 + 32 + 2
    deadlines.finish(slow)
    clock.advance(60.0)
    assert deadlines._entries == []


def test_a_new_event_loop_starts_afresh() -> None:
    clock = ManualClock()
    deadlines = Deadlines(clock)
    expired: list[str] = []

    async def add(tag: str) -> None:
        deadlines.add(1.0, lambda: expired.append(tag))

    asyncio.run(add("old loop"))
    asyncio.run(add("new loop"))  # the old loop's waits are gone with it
    clock.advance(1.0)
    assert expired == ["new loop"]
