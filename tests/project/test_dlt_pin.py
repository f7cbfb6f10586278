"""dlt is pinned to the minor release the project was verified with: the private names of dlt
it uses (`pipelines/runs/dlt_internals.py`) were checked against that release, and another minor
may change them without notice."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

from pipelines.runs.dlt_internals import VERIFIED_DLT

ROOT = Path(__file__).resolve().parents[2]


def minor(release: str) -> str:
    """`1.31` of `1.31.0`, `1.31.2rc1` and the like."""
    found = re.match(r"(\d+)\.(\d+)", release)
    assert found, release
    return f"{found.group(1)}.{found.group(2)}"


def test_the_installed_dlt_is_the_verified_minor() -> None:
    installed = version("dlt")
    assert minor(installed) == VERIFIED_DLT, (
        f"dlt {installed} is installed; the project is verified with dlt {VERIFIED_DLT}.x: check "
        "the names in pipelines/runs/dlt_internals.py against it before moving the pin"
    )


def test_every_requirement_of_dlt_pins_the_verified_minor() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [
        r
        for r in [
            *project["dependencies"],
            *(r for extra in project["optional-dependencies"].values() for r in extra),
        ]
        if re.match(r"dlt\b(?!-)", r)
    ]
    major, minor_number = (int(part) for part in VERIFIED_DLT.split("."))
    pin = f">={VERIFIED_DLT},<{major}.{minor_number + 1}"
    assert len(requirements) >= 2  # the dependency and the postgres extra
    for requirement in requirements:
        assert requirement.split("]", 1)[-1].replace(" ", "") == pin, requirement


def test_minor_of_a_release() -> None:
    assert [minor(r) for r in ("1.31.0", "1.31.12", "1.32.0rc1", "2.0.0")] == [
        "1.31",
        "1.31",
        "1.32",
        "2.0",
    ]
