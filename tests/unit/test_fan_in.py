"""Several scopes read at once, their items handed to one consumer (`fanin.fan_in`): real
threads, real queues; the end-to-end tests run every load through it against the simulators.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from sources.repo_analytics.reading.fanin import fan_in

TASKS, ITEMS = 4, 3


class Tally:
    """How many threads are inside a section at once, at most."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = 0

    def __enter__(self) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def __exit__(self, *_: object) -> None:
        with self.lock:
            self.now -= 1


def test_every_item_comes_once_in_its_task_order_while_the_waits_overlap() -> None:
    waiting = Tally()

    def task(number: int) -> Iterator[tuple[int, int]]:
        for item in range(ITEMS):
            with waiting:
                time.sleep(0.05)  # the host answers
            yield number, item

    items = list(fan_in([lambda n=n: task(n) for n in range(TASKS)], TASKS))

    assert sorted(items) == [(n, i) for n in range(TASKS) for i in range(ITEMS)]
    for number in range(TASKS):
        assert [i for n, i in items if n == number] == list(range(ITEMS))
    assert waiting.most >= 2


def test_two_readings_with_full_queues_taken_in_turn_finish() -> None:
    """Two fan-ins, their items taken alternately as dlt takes its resources' (round robin),
    through hand-over queues of one item: both finish with every item."""

    def task(base: int) -> Iterator[int]:
        yield from range(base, base + 20)

    got: list[int] = []

    def consume() -> None:
        first = fan_in([lambda: task(0), lambda: task(100)], 2, buffer=1)
        second = fan_in([lambda: task(1000), lambda: task(1100)], 2, buffer=1)
        for pair in zip(first, second, strict=True):
            got.extend(pair)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    consumer.join(60)
    assert not consumer.is_alive(), "the readings did not finish"
    assert sorted(got) == sorted([b + i for b in (0, 100, 1000, 1100) for i in range(20)])


def test_a_task_that_fails_ends_the_reading_with_its_error_and_stops_the_others() -> None:
    stopped = threading.Event()

    def failing() -> Iterator[int]:
        yield 1
        raise ValueError("the host refused")

    def endless() -> Iterator[int]:
        try:
            while True:
                time.sleep(0.01)
                yield 0
        finally:
            stopped.set()

    with pytest.raises(ValueError, match="the host refused"):
        list(fan_in([failing, endless], 2, buffer=1))
    assert stopped.wait(5)
