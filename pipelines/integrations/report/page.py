"""The report as one HTML file that opens with no network: the page's style and plotly's
JavaScript inline, each chart a plotly figure with its numbers as a table beside it (in a
`<details>` block, closed: what a screen reader reads and what the tests compare), and a
note in place of any chart without data."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Final

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from pipelines.integrations.report.queries import Table

STYLE: Final = """
:root { color-scheme: light; --ink: #1f2933; --muted: #52606d; --line: #d9e2ec; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif;
       color: var(--ink); background: #f5f7fa; }
header { padding: 20px 32px 12px; background: #fff; border-bottom: 1px solid var(--line); }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 2px 0; color: var(--muted); }
main { padding: 16px 32px 32px; }
h2.group { font-size: 17px; margin: 24px 0 8px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(480px, 1fr)); gap: 16px; }
section.panel { background: #fff; border: 1px solid var(--line); border-radius: 8px;
                padding: 14px 16px; min-width: 0; }
section.panel.wide { grid-column: 1 / -1; }
section.panel h3 { margin: 0 0 2px; font-size: 15px; }
p.caption { margin: 0 0 6px; color: var(--muted); font-size: 12.5px; }
p.note { margin: 8px 0; padding: 10px 12px; background: #fffbea; border-left: 4px solid #f0b429;
         border-radius: 4px; }
ul.notes { margin: 8px 0 0; padding-left: 20px; }
details { margin-top: 6px; }
summary { cursor: pointer; color: var(--muted); font-size: 12.5px; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; margin-top: 6px; font-size: 12.5px;
        font-variant-numeric: tabular-nums; }
th, td { padding: 3px 8px; border-bottom: 1px solid var(--line); text-align: right;
         white-space: nowrap; }
th:first-child, td:first-child, td.text { text-align: left; }
thead th { background: #f0f4f8; }
.verdict-PASSED { color: #2e7d32; font-weight: 600; }
.verdict-FAILED { color: #c62828; font-weight: 600; }
.status-running { color: #b7791f; font-weight: 600; }
"""
RESIZE: Final = (
    "window.addEventListener('load', function () {"
    " document.querySelectorAll('.js-plotly-plot').forEach(function (chart) {"
    " Plotly.Plots.resize(chart); }); });"
)
PLOTLY_CONFIG: Final = {"displaylogo": False, "responsive": True}


@dataclass
class Panel:
    """One chart (or a note in its place, or neither: a table only) and its table."""

    key: str
    title: str
    caption: str
    table: Table
    figure: go.Figure | None = None
    note: str | None = None  # shown instead of the chart
    wide: bool = False


@dataclass
class Page:
    title: str
    lines: list[str]  # under the title: dataset, filters, when
    notes: list[str] = field(default_factory=list)  # partial data, shown first
    groups: list[tuple[str, list[Panel]]] = field(default_factory=list)


def render(page: Page) -> str:
    """The whole HTML document."""
    body = "".join(group(title, panels) for title, panels in page.groups)
    notes = (
        '<p class="note" id="notes">'
        + "<br>".join(html.escape(note) for note in page.notes)
        + "</p>"
        if page.notes
        else ""
    )
    lines = "".join(f"<p>{html.escape(line)}</p>" for line in page.lines)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(page.title)}</title>"
        f"<style>{STYLE}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script>'
        "</head><body>"
        f"<header><h1>{html.escape(page.title)}</h1>{lines}</header>"
        f"<main>{notes}{body}</main>"
        # each chart drawn as the page was read: sized again to its card once laid out
        f"<script>{RESIZE}</script></body></html>\n"
    )


def group(title: str, panels: list[Panel]) -> str:
    return (
        f'<h2 class="group">{html.escape(title)}</h2><div class="grid">'
        + "".join(panel_html(panel) for panel in panels)
        + "</div>"
    )


def panel_html(panel: Panel) -> str:
    """A chart with its table closed beneath; a note in place of a chart without data; or,
    for a panel with neither (the sources), its table open."""
    table = f'<div class="table-wrap">{table_html(panel.table, panel.key)}</div>'
    numbers = f"<details><summary>The numbers</summary>{table}</details>"
    if panel.note is not None:
        shown = f'<p class="note">{html.escape(panel.note)}</p>' + (
            numbers if panel.table.rows else ""
        )
    elif panel.figure is not None:
        chart = panel.figure.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"chart-{panel.key}",
            config=PLOTLY_CONFIG,
        )
        label = html.escape(panel.title)
        shown = f'<div class="chart" role="img" aria-label="{label}">{chart}</div>{numbers}'
    else:
        shown = table
    classes = "panel wide" if panel.wide else "panel"
    return (
        f'<section class="{classes}" id="panel-{panel.key}" data-panel="{panel.key}">'
        f"<h3>{html.escape(panel.title)}</h3>"
        f'<p class="caption">{html.escape(panel.caption)}</p>{shown}</section>'
    )


def table_html(table: Table, key: str) -> str:
    head = "".join(f'<th scope="col">{html.escape(c)}</th>' for c in table.columns)
    body = "".join(
        "<tr>" + "".join(cell(value, first=i == 0) for i, value in enumerate(row)) + "</tr>"
        for row in table.rows
    )
    return f'<table data-table="{key}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def cell(value: Any, first: bool = False) -> str:
    text = shown(value)
    classes = []
    if isinstance(value, str) and not first:
        classes.append("text")
        if value in ("PASSED", "FAILED"):
            classes.append(f"verdict-{value}")
        if value == "running":
            classes.append("status-running")
    attribute = f' class="{" ".join(classes)}"' if classes else ""
    tag = 'th scope="row"' if first else "td"
    end = "th" if first else "td"
    return f"<{tag}{attribute}>{html.escape(text)}</{end}>"


def shown(value: Any) -> str:
    """A value as the tables print it: integers with thousands separators, other numbers to
    one decimal, days as ISO dates, instants in UTC to the minute, nothing as a dash."""
    if value is None:
        return "–"
    if isinstance(value, Decimal):
        value = int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.strftime("%Y-%m-%d %H:%M") + " (local)"
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)
