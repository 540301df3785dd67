"""How a registered operator picks the fastest of its plans (`fastest`): timed in turn within a
budget, then the fastest few timed again in turn, each keeping its least time. The timings and
the clock are made up here; the GPU tests time real plans."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlserve.kernels.cupy_backend._common import fastest


class Timings:
    """Each candidate's times, one per timing in order (the last repeats), and the clock that
    each timing advances by its own milliseconds."""

    def __init__(self, times: dict[str, list[float]]) -> None:
        self.times = times
        self.order: list[str] = []
        self.now = 0.0

    def __call__(self, name: str) -> float:
        seen = self.order.count(name)
        self.order.append(name)
        ms = self.times[name][min(seen, len(self.times[name]) - 1)]
        self.now += ms / 1000.0
        return ms

    def clock(self) -> float:
        return self.now


def candidates(*names: str) -> Iterator[tuple[str, str]]:
    """(choice, candidate) pairs: the choice is the candidate's name in capitals."""
    return ((name.upper(), name) for name in names)


def test_a_slowed_first_timing_does_not_decide() -> None:
    """The default's one timing came at a slow moment: timed again in turn with the runner-up,
    its least time wins."""
    timing = Timings({"a": [2.0, 1.0], "b": [1.5], "c": [3.0]})
    got = fastest(candidates("a", "b", "c"), timing, 10.0, finalists=2, rounds=2)
    assert got == "A"
    assert timing.order == ["a", "b", "c", "b", "a", "b", "a"]  # the fastest first, in turn


def test_without_the_second_timings_the_slowed_one_loses() -> None:
    """The same timings with no rounds keep the runner-up: the rounds are what decide."""
    timing = Timings({"a": [2.0, 1.0], "b": [1.5], "c": [3.0]})
    assert fastest(candidates("a", "b", "c"), timing, 10.0, finalists=2, rounds=0) == "B"


def test_only_the_finalists_are_timed_again() -> None:
    timing = Timings({"a": [4.0], "b": [1.0], "c": [3.0], "d": [2.0]})
    assert fastest(candidates("a", "b", "c", "d"), timing, 10.0, finalists=2, rounds=3) == "B"
    assert timing.order[4:] == ["b", "d"] * 3


def test_the_budget_stops_the_first_timings() -> None:
    """Past `seconds` of timing no further candidate is timed; the first always is, and one
    alone is not timed again."""
    timing = Timings({"a": [5.0], "b": [1.0], "c": [1.0]})
    assert fastest(candidates("a", "b", "c"), timing, -1.0, clock=timing.clock) == "A"
    assert timing.order == ["a"]
    timing = Timings({"a": [600.0], "b": [700.0], "c": [1.0]})  # 0.6 s, then 0.7 s
    got = fastest(candidates("a", "b", "c"), timing, 1.0, rounds=1, clock=timing.clock)
    assert got == "A" and timing.order == ["a", "b", "a", "b"]


def test_ties_go_to_the_earlier() -> None:
    timing = Timings({"a": [2.0], "b": [1.0], "c": [1.0]})
    assert fastest(candidates("a", "b", "c"), timing, 10.0) == "B"


class NoMemory(Exception):
    pass


def test_a_candidate_that_cannot_run_is_passed_over() -> None:
    """One that fails its first timing is not timed again; one that fails a later timing is
    dropped from the choice, however fast it was first."""
    order: list[str] = []

    def timing(name: str) -> float:
        order.append(name)
        if name == "a" or (name == "b" and order.count("b") > 1):
            raise NoMemory
        return {"b": 1.0, "c": 2.0, "d": 3.0}[name]

    got = fastest(candidates("a", "b", "c", "d"), timing, 10.0, passed_over=(NoMemory,))
    assert got == "C"
    assert order.count("a") == 1 and order.count("b") == 2


def test_finalists_that_all_fail_again_leave_the_rest() -> None:
    order: list[str] = []

    def timing(name: str) -> float:
        order.append(name)
        if name in "ab" and order.count(name) > 1:
            raise NoMemory
        return {"a": 1.0, "b": 2.0, "c": 4.0, "d": 3.0}[name]

    got = fastest(
        candidates("a", "b", "c", "d"), timing, 10.0, finalists=2, passed_over=(NoMemory,)
    )
    assert got == "D"


def test_the_budget_holds_while_timings_fail() -> None:
    """The first candidate is always tried; past the budget no other is, even where the first
    could not be timed."""
    order: list[str] = []

    def timing(name: str) -> float:
        order.append(name)
        raise NoMemory

    assert fastest(candidates("a", "b", "c"), timing, -1.0, passed_over=(NoMemory,)) is None
    assert order == ["a"]


def test_none_where_nothing_could_be_timed() -> None:
    def timing(name: str) -> float:
        raise NoMemory

    assert fastest(candidates("a", "b"), timing, 10.0, passed_over=(NoMemory,)) is None
    assert fastest(candidates(), timing, 10.0) is None


def test_other_errors_are_not_swallowed() -> None:
    def timing(name: str) -> float:
        raise ValueError(name)

    with pytest.raises(ValueError, match="a"):
        fastest(candidates("a", "b"), timing, 10.0, passed_over=(NoMemory,))


@given(
    st.lists(st.lists(st.floats(0.1, 100.0), min_size=1, max_size=4), min_size=1, max_size=8),
    st.integers(1, 5),
    st.integers(0, 3),
)
def test_the_choice_is_the_least_time_seen_among_the_finalists(
    times: list[list[float]], finalists: int, rounds: int
) -> None:
    """Whatever the timings: the kept choice has the least of the least times seen among the
    candidates timed again (all of them when there are no rounds), the earliest of equals; and
    no candidate is timed more than once plus `rounds`."""
    names = [f"n{i}" for i in range(len(times))]
    timing = Timings(dict(zip(names, times, strict=True)))
    got = fastest(candidates(*names), timing, 1e9, finalists=finalists, rounds=rounds)
    seen: dict[str, float] = {}
    for i, name in enumerate(timing.order):
        earlier = timing.order[:i].count(name)
        ms = times[names.index(name)][min(earlier, len(times[names.index(name)]) - 1)]
        seen[name] = min(seen.get(name, ms), ms)
    again = {n for n in names if timing.order.count(n) > 1} or set(names)
    want = min(again, key=lambda n: (seen[n], names.index(n)))
    assert got == want.upper()
    assert all(timing.order.count(n) <= 1 + rounds for n in names)
