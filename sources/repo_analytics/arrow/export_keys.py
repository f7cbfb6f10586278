"""The keys of a CSV export read so far, held as 16-byte digests in Arrow arrays.

A host's faulty export can repeat a row; the run drops the repeat so that every table's
staged rows hold each key once (the merges insert them as they are: `context.table_hints`).
A year's global export of the large self-hosted host has a million rows: these arrays hold
16 bytes a key, a fraction of what the Python sets of digests held before. The digests are
the MD5 of each row's key text (`context.key_texts`): DuckDB's `md5_number`, worked out of
Python's lock, for a batch of more than `SMALL_DIGEST_ROWS` rows; Python's `hashlib` for a
smaller one, the same 16 bytes; two different keys share one with a chance of about
n^2 / 2^129. Each batch is looked up in the batches before it: a scan of the export's digests
per batch of `reading.csv_exports.BATCH_ROWS` rows, out of Python's lock too. The figures:
`docs/decisions/csv-exports.md`.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any, Final

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

DIGEST: pa.DataType = pa.binary(16)
HELD_ARRAYS: Final = 16  # arrays of digests held apart before they are joined into one
# Up to this many keys a batch is digested in Python: a DuckDB query's fixed cost of binding,
# most of it holding Python's lock, outweighs hashlib's for a small batch, and a self-hosted
# nightly digests hundreds of exports of a few rows (`docs/decisions/csv-exports.md`).
SMALL_DIGEST_ROWS = 1000


@dataclass
class KeyDigester:
    """Digests of key texts: a small batch's in Python, a larger one's by an in-memory DuckDB
    of the run's own, opened at first use, a cursor per call (reading threads share it)."""

    _connection: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def digests(self, texts: pa.Array) -> pa.Array:
        """Each key text's 16-byte digest."""
        if len(texts) <= SMALL_DIGEST_ROWS and texts.null_count == 0:
            md5 = hashlib.md5
            return pa.array(
                [md5(t.encode(), usedforsecurity=False).digest() for t in texts.to_pylist()],
                DIGEST,
            )
        keys = pa.table({"key": texts})  # noqa: F841 (read by DuckDB's query, by name)
        with self._cursor() as cursor:
            numbers = cursor.sql("SELECT md5_number(key) FROM keys").to_arrow_table()
        column = numbers.column(0).combine_chunks()
        # a 128-bit integer's 16 bytes, read as they are
        return pa.Array.from_buffers(DIGEST, len(column), column.buffers(), offset=column.offset)

    def _cursor(self) -> Any:
        with self._lock:
            if self._connection is None:
                self._connection = duckdb.connect(config={"threads": 1})
            return self._connection.cursor()


@dataclass
class ExportKeys:
    """The digests of the keys one scope's export yielded so far."""

    digester: KeyDigester
    seen: list[pa.Array] = field(default_factory=list)

    def fresh(self, texts: pa.Array) -> pa.Array | None:
        """Which rows, by their key texts (`context.key_texts`), hold a key not yielded
        before (the first of each); None when all do."""
        digests = self.digester.digests(texts)
        keep = first_of_each(digests)
        hits = [s.filter(pc.is_in(s, value_set=digests)) for s in self.seen]
        hits = [found for found in hits if len(found)]
        if hits:
            again = pc.invert(pc.is_in(digests, value_set=pa.concat_arrays(hits)))
            keep = again if keep is None else pc.and_(keep, again)
        self.seen.append(digests if keep is None else digests.filter(keep))
        if len(self.seen) > HELD_ARRAYS:  # fewer, longer arrays scan faster
            self.seen = [pa.concat_arrays(self.seen)]
        return keep


def first_of_each(digests: pa.Array) -> pa.Array | None:
    """Which entries are the first of their value; None when no value repeats."""
    if len(pc.unique(digests)) == len(digests):
        return None
    rows = pa.table({"digest": digests, "row": pa.array(range(len(digests)), pa.int64())})
    firsts = rows.group_by("digest", use_threads=False).aggregate([("row", "min")])
    return pc.is_in(rows.column("row").combine_chunks(), value_set=firsts.column("row_min"))
