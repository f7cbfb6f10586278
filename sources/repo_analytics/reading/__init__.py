"""One run's reading: the settings checked into a plan (`plan.py`), the scopes to read
(`scopes.py`, `planned.py`), the readers of each endpoint kind (`readers.py` with the one
paging loop, `csv_exports.py`, `details.py`), what they share (`context.py`), and what the
resources hand to dlt (`items.py`, `fanin.py`)."""
