"""The report's charts: plotly figures of the query tables (`queries.py`), one per panel.
plotly draws them in the browser from its own JavaScript, inlined once in the page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pipelines.integrations.report.queries import Table

# one palette for the whole page: merged/added green, declined/deleted red, neutral blue
COLOURS: Final = {
    "merged": "#2e7d32",
    "declined": "#c62828",
    "superseded": "#9e9e9e",
    "median": "#1565c0",
    "p90": "#ef6c00",
    "stand-ins": "#bdbdbd",
    "bars": "#1565c0",
    "added": "#2e7d32",
    "deleted": "#c62828",
}
HEIGHT: Final = 340


def styled(figure: go.Figure, height: int = HEIGHT) -> go.Figure:
    figure.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 56, "r": 24, "t": 16, "b": 48},
        legend={"orientation": "h", "y": -0.2, "traceorder": "normal"},
        font={"family": "system-ui, sans-serif", "size": 12},
        hovermode="x unified",
    )
    return figure


def outcomes(table: Table) -> go.Figure:
    figure = go.Figure()
    weeks = table.column("week")
    for state in ("merged", "declined", "superseded"):
        values = table.column(state)
        if state == "superseded" and not any(values):
            continue  # the self-hosted edition has no such state
        figure.add_bar(x=weeks, y=values, name=state, marker_color=COLOURS[state])
    figure.update_layout(barmode="stack", yaxis_title="pull requests")
    return styled(figure)


def resolution(table: Table) -> go.Figure:
    """Median and p90 lines; the stand-in resolution times as grey bars on their own axis,
    when there are any."""
    stand_ins = table.column("resolved at their last update")
    figure = make_subplots(specs=[[{"secondary_y": any(stand_ins)}]])
    weeks = table.column("week")
    if any(stand_ins):
        figure.add_bar(
            x=weeks,
            y=stand_ins,
            name="resolved at their last update (stand-ins)",
            marker_color=COLOURS["stand-ins"],
            secondary_y=True,
        )
        figure.update_yaxes(title_text="stand-ins", secondary_y=True, showgrid=False)
    for column, label, colour in (
        ("median hours", "median", COLOURS["median"]),
        ("p90 hours", "90th percentile", COLOURS["p90"]),
    ):
        figure.add_scatter(
            x=weeks,
            y=table.column(column),
            name=label,
            mode="lines+markers",
            line_color=colour,
        )
    figure.update_yaxes(title_text="hours to resolve", secondary_y=False)
    return styled(figure)


def bars(
    table: Table, x: str, y: str, axis: str, horizontal: bool = False, colour: str = "bars"
) -> go.Figure:
    labels, values = table.column(x), table.column(y)
    if horizontal:  # the largest on top
        bar = go.Bar(x=values[::-1], y=labels[::-1], orientation="h")
        figure = go.Figure(bar)
        figure.update_layout(xaxis_title=axis, hovermode="y unified")
        figure.update_yaxes(type="category", automargin=True)
    else:
        figure = go.Figure(go.Bar(x=labels, y=values))
        figure.update_layout(yaxis_title=axis)
        figure.update_xaxes(type="category")
    figure.update_traces(marker_color=COLOURS[colour], name=axis)
    return styled(figure)


def commits(table: Table) -> go.Figure:
    """Commits per week above, lines added and deleted below (deleted drawn down)."""
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    weeks = table.column("week")
    figure.add_bar(x=weeks, y=table.column("commits"), name="commits", row=1, col=1)
    figure.update_traces(marker_color=COLOURS["bars"])
    figure.add_bar(
        x=weeks,
        y=table.column("lines added"),
        name="lines added",
        marker_color=COLOURS["added"],
        row=2,
        col=1,
    )
    figure.add_bar(
        x=weeks,
        y=[-(value or 0) for value in table.column("lines deleted")],
        name="lines deleted",
        marker_color=COLOURS["deleted"],
        customdata=table.column("lines deleted"),
        hovertemplate="%{customdata}",
        row=2,
        col=1,
    )
    figure.update_layout(barmode="relative")
    figure.update_yaxes(title_text="commits", row=1, col=1)
    figure.update_yaxes(title_text="lines", row=2, col=1)
    return styled(figure, height=HEIGHT + 120)


def heatmap(table: Table) -> go.Figure:
    hours: Sequence[Any] = table.columns[1:]
    figure = go.Figure(
        go.Heatmap(
            z=[list(row[1:]) for row in table.rows],
            x=list(hours),
            y=table.column("weekday"),
            colorscale="Blues",
            hovertemplate="%{y} %{x}:00: %{z} commits<extra></extra>",
            colorbar={"title": {"text": "commits"}},
        )
    )
    figure.update_yaxes(autorange="reversed", type="category")
    figure.update_xaxes(title_text="hour", type="category")
    figure.update_layout(hovermode="closest")
    return styled(figure, height=300)
