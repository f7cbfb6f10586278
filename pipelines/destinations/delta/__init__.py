"""Delta tables on a filesystem (`--destination parquet`): how their writes and merges are
made (`destination.py` and the modules it names) and the pruning of a parent's stale child
rows after each load (`children.py`, `pruned_through.py`)."""
