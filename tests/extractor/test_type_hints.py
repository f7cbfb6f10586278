"""dlt's schema checks read each TypedDict's type hints once (`pipelines/type_hints.py`): the
same verdicts, good and bad, from the hints read once; a real pipeline's schema checks too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dlt
import duckdb
import pytest
from dlt.common import validation
from dlt.common.exceptions import DictValidationException
from dlt.common.schema.typing import TColumnSchema, TTableSchema
from dlt.common.schema.utils import new_column, new_table

from pipelines.type_hints import cache_validation_hints
from tests.extractor.helpers import bare_duckdb_pipeline


def a_table() -> TTableSchema:
    columns = [new_column("id", "bigint", nullable=False), new_column("name", "text")]
    columns[0]["primary_key"] = True
    return new_table("items", write_disposition="merge", columns=columns, resource="items")


def test_the_same_verdicts_with_the_hints_read_once() -> None:
    cache_validation_hints()
    validation.validate_dict_ignoring_xkeys(spec=TTableSchema, doc=a_table(), path="t")
    wrong_type = a_table()
    wrong_type["columns"]["id"]["primary_key"] = "yes"  # type: ignore[typeddict-item]
    with pytest.raises(DictValidationException, match="primary_key"):
        validation.validate_dict_ignoring_xkeys(spec=TTableSchema, doc=wrong_type, path="t")
    unknown = a_table()
    unknown["columns"]["name"]["colour"] = "red"  # type: ignore[typeddict-unknown-key]
    with pytest.raises(DictValidationException, match="colour"):
        validation.validate_dict_ignoring_xkeys(spec=TTableSchema, doc=unknown, path="t")
    not_allowed = a_table()
    not_allowed["write_disposition"] = "sometimes"  # type: ignore[typeddict-item]
    with pytest.raises(DictValidationException, match="sometimes"):
        validation.validate_dict_ignoring_xkeys(spec=TTableSchema, doc=not_allowed, path="t")


def test_hints_read_once_and_handed_out_as_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed once; a TypedDict's hints are read at its first check only, and a caller
    that changes what it got does not change what the next one gets."""
    reads: list[Any] = []
    original = validation.get_type_hints

    def counted(obj: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        reads.append(obj)
        return original(obj, *args, **kwargs)

    monkeypatch.setattr(validation, "get_type_hints", counted)  # undone after the test
    cache_validation_hints()
    installed = validation.get_type_hints
    assert installed is not counted
    cache_validation_hints()
    assert validation.get_type_hints is installed
    for _ in range(3):
        validation.validate_dict_ignoring_xkeys(spec=TTableSchema, doc=a_table(), path="t")
    assert reads.count(TTableSchema) == 1 and reads.count(TColumnSchema) == 1
    first = validation.get_type_hints(TColumnSchema)
    first.clear()
    again = validation.get_type_hints(TColumnSchema)
    assert "data_type" in again and "primary_key" in again
    assert reads.count(TColumnSchema) == 1


def test_a_pipelines_tables_keep_their_hints(tmp_path: Path) -> None:
    """A merge through dlt with the hints read once: keys and types as declared, rows merged."""
    cache_validation_hints()
    pipeline, db_file = bare_duckdb_pipeline(tmp_path, "type_hints")
    hints: dict[str, Any] = {"write_disposition": "merge", "primary_key": "id"}
    hints["columns"] = {"n": {"data_type": "text"}}
    pipeline.run(dlt.resource([{"id": 1, "n": "a"}, {"id": 2, "n": "b"}], name="items", **hints))
    pipeline.run(dlt.resource([{"id": 2, "n": "c"}], name="items", **hints))
    table = pipeline.default_schema.get_table("items")
    assert table["columns"]["id"].get("primary_key") is True
    assert table["columns"]["n"]["data_type"] == "text"
    with duckdb.connect(str(db_file), read_only=True) as con:
        rows = con.sql("SELECT id, n FROM data.items ORDER BY id").fetchall()
    assert rows == [(1, "a"), (2, "c")]
