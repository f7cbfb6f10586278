"""Self-reconciliation: what landed compared with the API's own statistics. `check.py` runs
it, `model.py` says what is compared and holds the verdict, `windows.py` compares per
repository and window, `prefetch.py` asks the API while a backfill's last window loads."""
