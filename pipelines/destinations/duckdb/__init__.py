"""The DuckDB file: its lock while other processes read it and the published copy
(`file.py`), the memory DuckDB may take (`memory.py`), and merges that read a load's Parquet
files (`merges.py`). Nothing is imported here: the command line's parser reads the names
below without loading dlt."""

from typing import Final

DEFAULT_DUCKDB: Final = "repo-analytics.duckdb"  # the file of the commands and of Dagster
EARLIER_DEFAULT_DUCKDB: Final = "repo_analytics.duckdb"  # the default before DuckDB 2
