"""The delete of dlt's delete-insert merge, keyed by the merge key alone where it says it all.

A table with both keys (a child table: its own row's primary key, its parent's natural key as
merge key; an export without a natural key: the row's window and number, the window) has its
staged keys deleted by dlt with `EXISTS (... WHERE <primary key equal> OR <merge key equal>)`.
Every merge key here is part of its primary key, so a row whose primary key matches has a
matching merge key too: the OR selects exactly the rows of the merge key. Written with the
OR, DuckDB cannot join on a hash of the keys and compares row by row: the commit parents of the
medium self-hosted year (217,000 rows) took 60-98 ms to delete 500-50,000 staged parents'
rows with it, 14-39 ms without; in a nightly's load, 237-299 ms of its 0.8 s.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

_LOCK = threading.Lock()


def delete_by_merge_key() -> None:
    """Have dlt's SQL merges (DuckDB, Postgres and the others that keep dlt's generic merge)
    delete by the merge key alone when it is part of the primary key; otherwise dlt's clauses
    as they are. Idempotent."""
    from dlt.destinations.sql_jobs import SqlMergeFollowupJob

    with _LOCK:
        generic = SqlMergeFollowupJob.__dict__["_gen_key_table_clauses"].__func__
        if getattr(generic, "merge_key_alone", False):
            return

        def key_clauses(
            cls: type[SqlMergeFollowupJob], primary_keys: Sequence[str], merge_keys: Sequence[str]
        ) -> list[str]:
            if merge_keys and set(merge_keys) <= set(primary_keys):
                return generic(cls, (), merge_keys)  # type: ignore[no-any-return]
            return generic(cls, primary_keys, merge_keys)  # type: ignore[no-any-return]

        key_clauses.merge_key_alone = True  # type: ignore[attr-defined]
        SqlMergeFollowupJob._gen_key_table_clauses = classmethod(key_clauses)  # type: ignore[method-assign,assignment]
