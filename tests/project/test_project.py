"""The README and the docs tell the truth about how to set up, test, and use the simulator."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.config import Conditions
from simulator.faults import FAULT_KINDS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def page(name: str) -> str:
    """A page of the docs site (docs/NAME)."""
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def quick_start_commands() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the Quick start section has no bash code block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_is_the_first_heading_and_has_two_commands() -> None:
    headings = re.findall(r"^## (.+)$", README, re.M)
    assert headings[0] == "Quick start"
    assert len(quick_start_commands()) == 2


def test_the_test_command_installs_extras_the_project_declares() -> None:
    """The extras the suite needs (`test`; `postgres`, `dagster` for tests/scaleout; `docs` for
    the strict build of the docs site)."""
    import tomllib

    extras = re.search(r'-e "\.\[([a-z,]+)\]"', quick_start_commands()[1])
    assert extras, "the test command installs no extras"
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    optional = declared["project"]["optional-dependencies"]
    assert set(extras[1].split(",")) == {"test", "postgres", "dagster", "docs"} <= set(optional)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    test_command = quick_start_commands()[1]
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command in ci_lines


def test_every_fault_kind_and_condition_is_documented() -> None:
    simulator = page("simulator.md")
    fault_table = simulator.split("| kind | what the client sees |", 1)[1].split("\n\n", 1)[0]
    documented = set(
        re.findall(
            r"`([^`]+)`",
            "".join(
                line.split("|")[1] for line in fault_table.splitlines() if line.startswith("|")
            ),
        )
    )
    assert documented == set(FAULT_KINDS)
    for field in dataclasses.fields(Conditions):
        assert f"| `{field.name}` |" in simulator, field.name


def test_secrets_file_is_ignored_and_an_example_is_committed() -> None:
    assert ".dlt/secrets.toml" in (ROOT / ".gitignore").read_text(encoding="utf-8")
    assert (ROOT / ".dlt" / "example.secrets.toml").is_file()
    assert (ROOT / ".dlt" / "config.toml").is_file()


def test_every_table_and_config_key_is_documented() -> None:
    """Every table of every edition in the resources page (and in the README's table of
    them), and every setting of the source in the configuration page."""
    import inspect

    from sources.repo_analytics import EDITION_SPECS, repo_analytics
    from sources.repo_analytics.config import setting_keys

    resources, configuration = page("resources.md"), page("configuration.md")
    for spec in EDITION_SPECS.values():
        for endpoint in spec.endpoints:
            tables = [endpoint.table, *(child.table for child in endpoint.children)]
            if endpoint.details is not None:
                tables.append(endpoint.details.table)
            for table in tables:
                assert f"`{table}`" in resources, table
                short = "`_" + table.rsplit("_", 1)[1] + "`"  # `_global`: the README's short form
                assert f"`{table}`" in README or short in README, table
    for key in setting_keys():
        assert f"`{key}`" in configuration, key
    # the settings are listed once (the config spec), not again as the source's parameters
    parameters = inspect.signature(repo_analytics.__wrapped__).parameters  # type: ignore[attr-defined]
    assert list(parameters) == ["config", "run", "settings"]


# An absolute path that only some machine has: the temp folder, a home folder, a venv, a
# per-user interpreter install. Tests and scripts must find commands from `sys.executable`
# and data from their own temp folders; a fresh clone elsewhere has none of these.
MACHINE_PATH = re.compile(
    r"""(?<![\w.<>-])(?:/tmp|/var/tmp|/root|/home/[^/\s"']+|/Users/[^/\s"']+)(?:/[^\s"'`)]*)?"""
    r"""|[^\s"'`]*/\.?venv/bin/[^\s"'`]*"""
)


def machine_paths(text: str) -> list[str]:
    return [m.group(0) for m in MACHINE_PATH.finditer(text)]


def test_machine_path_pattern_finds_what_it_must() -> None:
    # built from parts, so that this file names no such path itself
    bad = [
        "/".join(("", *parts))
        for parts in (
            ("tmp", "venv", "bin", "repo-analytics"),
            ("root", ".pyenv", "versions", "3.11.7", "lib", "python3.11", "ssl.py"),
            ("home", "ci", "project", ".venv", "bin", "python"),
            ("opt", "app", ".venv", "bin", "pytest"),
        )
    ]
    text = (
        f"CLI = \"{bad[0]}\"\nx = '{bad[1]}'\nrun {bad[2]} and {bad[3]}\n"
        "fine: tmp_path / 'tmp', ./tmp/x, http://h/tmp, <stdlib>/tmp.py\n"
    )
    assert machine_paths(text) == bad


def test_no_test_bench_or_ci_file_names_a_machine_path() -> None:
    offenders = []
    for folder in ("tests", "bench", ".ci"):
        for path in sorted((ROOT / folder).rglob("*")):
            if not path.is_file() or path.suffix in {".pyc", ".duckdb", ".parquet"}:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if path == Path(__file__).resolve():  # the pattern and its own examples
                head, rest = text.split("# An absolute path that only some machine has", 1)
                text = head + rest.split("def test_no_test_bench_or_ci_file_names", 1)[1]
            offenders += [f"{path.relative_to(ROOT)}: {hit}" for hit in machine_paths(text)]
    assert offenders == []


CODE_FOLDERS = ("sources", "pipelines", "simulator", "tests", "bench", "docs")


@pytest.mark.parametrize("tool", [("format", "--check"), ("check",)], ids=["format", "lint"])
def test_the_tree_is_formatted_and_lint_clean(tool: tuple[str, ...]) -> None:
    """`ruff format` is the tree's format (pinned in the test extra), and `ruff check` is
    clean: a change that was not formatted, or brings a lint finding, fails here."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *tool, *CODE_FOLDERS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]
