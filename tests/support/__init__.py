"""What the tests share that is not a test: the fixed clock, the loader of real pipeline runs
(`loader.py`, its fixtures registered in `tests/conftest.py`) and the readers of what a load
wrote (`helpers.py`)."""

# A fixed clock so ground truth is the same on every run: 2026-06-01T00:00:00Z.
FIXED_NOW = 1_780_272_000
