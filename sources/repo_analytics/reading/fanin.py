"""Several iterators read at once in threads, their items handed over to one consumer.

One dlt resource reads an endpoint for all of its scopes (per endpoint, not per scope: dlt's
set-up cost is per resource). The scopes are read `workers` at once here, and their items
reach dlt through one bounded queue, so memory stays flat whatever the number of scopes.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
Task = Callable[[], Iterator[T]]

_DONE = object()  # a task's iterator is exhausted
_POLL_SECONDS = 0.05  # how often a blocked producer looks whether the consumer has gone


class _Failed:
    """A task's exception, carried to the consumer."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def fan_in(tasks: Sequence[Task[T]], workers: int, buffer: int = 8) -> Iterator[T]:
    """The items of every task's iterator, as they come, read by up to `workers` threads.

    A task's exception ends the whole iteration with that exception (the other tasks are
    stopped at their next item); so does closing this iterator. Items of one task keep their
    order. With one worker or one task, the tasks run here, one after another.
    """
    if workers <= 1 or len(tasks) <= 1:
        for task in tasks:
            yield from task()
        return
    handover: queue.Queue[Any] = queue.Queue(maxsize=buffer)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                handover.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def run(task: Task[T]) -> None:
        if stop.is_set():
            return
        items = task()
        try:
            for item in items:
                if not put(item):
                    return
        except BaseException as error:  # noqa: BLE001 - handed to the consumer, raised there
            put(_Failed(error))
            return
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
        put(_DONE)

    pool = ThreadPoolExecutor(
        max_workers=min(workers, len(tasks)), thread_name_prefix="repo_analytics"
    )
    try:
        for task in tasks:
            pool.submit(run, task)
        remaining = len(tasks)
        while remaining:
            item = handover.get()
            if item is _DONE:
                remaining -= 1
            elif isinstance(item, _Failed):
                raise item.error
            else:
                yield item
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
