"""The simulated host's data: the model (`model.py`), a world of them (`world.py`), generated
(`generate.py`) or read from a git repository (`fromgit.py`), and the activity that changes
it as the simulated clock moves (`activity.py`)."""
