"""From decoded answers to Arrow tables: list pages read by Arrow's JSON reader
(`pages.py`), the one mapper from items to table rows and child rows (`mapping.py`), and the
keys of CSV exports held as digests (`export_keys.py`)."""
