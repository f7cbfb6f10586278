"""The reading threads take turns at their Python work and wait on the network at once
(`fanin.CpuTurn`, issue 11): real threads, real queues; the end-to-end tests run every load
through it against the simulators.

Measured on the medium self-hosted host: the first nightly 14.2 -> 12.3 s, a year's default
backfill 81.1 -> 74.2 s (README, A year against the fetch limit).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from sources.repo_analytics.fanin import CpuTurn, fan_in

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


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def readers(turn: CpuTurn | None, working: Tally, waiting: Tally) -> list[object]:
    def task(number: int) -> Iterator[tuple[int, int]]:
        for item in range(ITEMS):
            with waiting, turn.released() if turn is not None else _nothing():
                time.sleep(0.05)  # the host answers
            with working:
                spin(0.03)  # the answer made into tables
            yield number, item

    tasks = [lambda n=n: task(n) for n in range(TASKS)]
    return sorted(fan_in(tasks, TASKS, turn=turn))


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


def test_one_reader_works_at_a_time_while_the_waits_overlap() -> None:
    working, waiting = Tally(), Tally()
    items = readers(CpuTurn(), working, waiting)
    assert items == [(n, i) for n in range(TASKS) for i in range(ITEMS)]
    assert working.most == 1
    assert waiting.most >= 2


def test_without_turns_readers_work_at_once() -> None:
    """The control: the same readers without turns are inside their work together."""
    working, waiting = Tally(), Tally()
    readers(None, working, waiting)
    assert working.most >= 2


def test_a_full_queue_and_two_readings_sharing_turns_finish() -> None:
    """Two fan-ins with one turn, their items taken alternately as dlt takes its resources'
    (round robin), through hand-over queues of one item: each thread waiting on a full queue
    gives the turn up, so both finish."""
    turn = CpuTurn()

    def task(base: int) -> Iterator[int]:
        for item in range(20):
            spin(0.001)
            yield base + item

    got: list[int] = []

    def consume() -> None:
        first = fan_in([lambda: task(0), lambda: task(100)], 2, buffer=1, turn=turn)
        second = fan_in([lambda: task(1000), lambda: task(1100)], 2, buffer=1, turn=turn)
        for pair in zip(first, second, strict=True):
            got.extend(pair)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    consumer.join(60)
    assert not consumer.is_alive(), "the readings did not finish: a turn was never given up"
    assert sorted(got) == sorted([b + i for b in (0, 100, 1000, 1100) for i in range(20)])


def test_released_gives_the_turn_to_another_thread() -> None:
    """Inside `released` another thread takes the turn; outside a turn `released` does
    nothing (the main thread, a detail pool's threads)."""
    turn = CpuTurn()
    with turn.released():
        pass
    taken = threading.Event()

    def take() -> None:
        with turn.held():
            taken.set()

    with turn.held():
        other = threading.Thread(target=take, daemon=True)
        other.start()
        other.join(0.2)
        assert not taken.is_set()  # held here
        with turn.released():
            other.join(10)
            assert taken.is_set()
