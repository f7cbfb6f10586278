"""Talking to one host: the HTTP client on requests (`api.py`) with tenacity retries, the host
gate and the TLS and redirect rules (`transport.py`), how error answers are read
(`rules.py`), and one paginator per paging scheme (`paging.py`). Knows no edition: an edition
hands it its rules and paging schemes as data."""
