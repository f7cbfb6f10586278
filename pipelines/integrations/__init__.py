"""What runs on top of the loaded data or around the runs: the Dagster code location
(`dagster_assets.py`) and the HTML dashboard of the canonical views (`report/`)."""
