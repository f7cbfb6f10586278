"""No edition is tested by its name outside its own module: pipelines ask the edition table.

`cloud.py` and `server.py` hold what differs between the editions (ARCHITECTURE.md, "Where an
edition differs"); anywhere else in `sources/` and `pipelines/`, a comparison with an edition's
name, a `case` on it, or a dict keyed by it is the `if edition == ...` smell the tables
replace.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EDITION_MODULES = {
    ROOT / "sources" / "repo_analytics" / "cloud.py",
    ROOT / "sources" / "repo_analytics" / "server.py",
}
NAMES = ("cloud", "server")


def name_tests(name: str) -> re.Pattern[str]:
    """`== "cloud"`, `"cloud" !=`, `in ("cloud", ...)`, `case "cloud"`, `{"cloud": ...}`."""
    quoted = rf"""['"]{name}['"]"""
    return re.compile(
        rf"""(==|!=)\s*{quoted}"""
        rf"""|{quoted}\s*(==|!=|:(?!\S))"""
        rf"""|\bin\s*[(\[{{][^)\]}}]*{quoted}"""
        rf"""|\bcase\s+{quoted}"""
    )


def offending_lines(text: str) -> list[str]:
    return [
        line.strip()
        for line in text.splitlines()
        if any(name_tests(name).search(line) for name in NAMES)
    ]


def python_files() -> list[Path]:
    return sorted(
        path
        for folder in ("sources", "pipelines")
        for path in (ROOT / folder).rglob("*.py")
        if path not in EDITION_MODULES
    )


@pytest.mark.parametrize("path", python_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_edition_name_is_tested_outside_the_edition_modules(path: Path) -> None:
    assert offending_lines(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "line",
    [
        'if edition == "cloud":',
        "if spec.name != 'server':",
        'if "cloud" == edition:',
        'DEMO_LEVELS = {"cloud": ["workspace"], "server": ["global"]}',
        'if edition in ("cloud", "server"):',
        '    case "server":',
    ],
)
def test_the_check_finds_each_form(line: str) -> None:
    assert offending_lines(line) == [line.strip()]


@pytest.mark.parametrize(
    "line",
    [
        'demo.add_argument("--edition", choices=tuple(EDITION_SPECS), default="cloud")',
        "# the cloud edition's commit date has no zone",
        'cloud_commits = "cloud_commits"',
    ],
)
def test_the_check_leaves_other_mentions(line: str) -> None:
    assert offending_lines(line) == []
