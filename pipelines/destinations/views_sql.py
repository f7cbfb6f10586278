"""The canonical layer's SQL in the destination's dialect: written once as DuckDB SQL, run
as it is on DuckDB and transpiled by sqlglot for any other SQL destination (Postgres, the
one tested beside DuckDB; the dialect is the one dlt names for the destination).

sqlglot translates almost all of it. The DuckDB forms it keeps as they are, which other
dialects lack, are rewritten here before generating: `GROUP BY ALL` and `ORDER BY ALL` (the
columns listed by position), `to_seconds(n)` (`n * INTERVAL '1' SECOND`) and, for Postgres,
`arg_max`/`max_by` (the first of the values ordered by the key, NULL keys left out, as
DuckDB does). docs/decisions/canonical-views-sqlglot.md says why sqlglot rather than dbt.
"""

from __future__ import annotations

from typing import Any, Final

import sqlglot
from sqlglot import exp

SOURCE_DIALECT: Final = "duckdb"  # the dialect the views and the report's queries are written in


def dialect_of(pipeline: Any) -> str:
    """The sqlglot dialect of `pipeline`'s destination, as dlt declares it (DuckDB's when a
    destination declares none)."""
    return str(pipeline.destination.capabilities().sqlglot_dialect or SOURCE_DIALECT)


def in_dialect(sql: str, dialect: str) -> str:
    """`sql` (DuckDB SQL, one statement) as `dialect` runs it; DuckDB's unchanged."""
    if dialect == SOURCE_DIALECT:
        return sql
    tree = sqlglot.parse_one(sql, read=SOURCE_DIALECT)
    tree = tree.transform(portable, dialect=dialect)
    return tree.sql(dialect=dialect, comments=False)


def portable(node: exp.Expression, dialect: str) -> Any:
    """One node with the DuckDB forms that `dialect` lacks rewritten (see the module)."""
    if isinstance(node, exp.Select):
        group = node.args.get("group")
        if group is not None and group.args.get("all"):
            node.set("group", exp.Group(expressions=positions(node, aggregates=False)))
        if ordered_by_all(node):
            node.set("order", exp.Order(expressions=positions(node, aggregates=True)))
        return node
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "to_seconds":
        interval = exp.Interval(this=exp.Literal.string("1"), unit=exp.var("SECOND"))
        return exp.Mul(this=exp.paren(node.expressions[0], copy=True), expression=interval)
    if dialect == "postgres" and isinstance(node, exp.ArgMax):
        value, key = node.this.sql("postgres"), node.expression.sql("postgres")
        return sqlglot.parse_one(
            f"(ARRAY_AGG({value} ORDER BY {key} DESC) FILTER (WHERE {key} IS NOT NULL))[1]",
            read="postgres",
        )
    return node


def ordered_by_all(select: exp.Select) -> bool:
    """`ORDER BY ALL` over projections that can be counted (no `*`)."""
    order = select.args.get("order")
    keys = order.expressions if order else []
    return (
        len(keys) == 1
        and isinstance(keys[0].this, exp.Var)
        and keys[0].this.name.upper() == "ALL"
        and not any(p.is_star for p in select.expressions)
    )


def positions(select: exp.Select, aggregates: bool) -> list[exp.Expression]:
    """The positions of `select`'s projections (`aggregates=False`: those without one)."""
    return [
        exp.Literal.number(index)
        for index, projection in enumerate(select.expressions, start=1)
        if aggregates or not projection.find(exp.AggFunc)
    ]
