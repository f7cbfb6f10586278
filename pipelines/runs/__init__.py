"""Runs of the source on a dlt pipeline: the nightly load (`load.py`), the backfill in windows
(`backfill.py`) with each window's load beside the next read (`background_load.py`), the
commands that look at and adjust state (`maintenance.py`), crash recovery (`interrupted.py`,
`upgrade.py`), progress on the terminal (`progress.py`) and the run records (`records.py`)."""
