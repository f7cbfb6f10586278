"""Where the rows land: DuckDB (`duckdb/`), Delta tables of Parquet files (`delta/`), a
warehouse with a server such as Postgres (`warehouse.py`), and the canonical views made on
every SQL destination (`views.py`, `views_sql.py`)."""
