"""The docs site builds, its generated references are current, and the front page stays short.

`mkdocs build --strict` (with the link, anchor and nav validation of `mkdocs.yml`) turns a broken
link, a missing anchor, a missing page or a page left out of the nav into a failure here.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def generator() -> ModuleType:
    """`docs/generate.py`, the one module that names the spec and the parser it reads."""
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_site_builds_strict(tmp_path: Path) -> None:
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for page in ("index.html", "configuration/index.html", "decisions/index.html"):
        assert (tmp_path / "site" / page).is_file(), page


@pytest.mark.parametrize(
    "breakage",
    ["a link to a missing page", "a link to a missing anchor", "a page left out of the nav"],
)
def test_a_broken_site_fails_the_build(tmp_path: Path, breakage: str) -> None:
    """The strict build above can fail: each breakage, made in a copy, stops it."""
    copy = tmp_path / "copy"
    shutil.copytree(DOCS, copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    page = copy / "docs" / "index.md"
    if breakage == "a link to a missing page":
        page.write_text(page.read_text(encoding="utf-8") + "\n[x](no-such-page.md)\n")
    elif breakage == "a link to a missing anchor":
        page.write_text(page.read_text(encoding="utf-8") + "\n[x](commands.md#no-such-part)\n")
    else:
        (copy / "docs" / "orphan.md").write_text("# An orphan\n", encoding="utf-8")
    done = build(copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0, breakage


def test_the_generated_references_are_current() -> None:
    """The configuration and command references equal what `docs/generate.py` makes from the
    code now (run `python docs/generate.py` after changing a setting or a flag)."""
    gen = generator()
    for page in gen.PAGES:
        text = (DOCS / page).read_text(encoding="utf-8")
        assert gen.current(page, text) == text, f"docs/{page}: run python docs/generate.py"


def test_a_stale_reference_is_found() -> None:
    gen = generator()
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `page_size` |"))
    stale = text.replace(row + "\n", "")
    assert gen.current("configuration.md", stale) == text != stale


def test_the_commands_reference_names_every_command_and_option() -> None:
    """Every command and every option of the parser (help hidden ones aside) is on the page."""
    gen = generator()
    page = (DOCS / "commands.md").read_text(encoding="utf-8")
    parser = gen.build_parser(["sim"])
    for name, command in gen.subcommands(parser).items():
        assert f"## repo-analytics {name}\n" in page, name
        for action in command._actions:
            if gen.shown(action):
                assert f"`{action.option_strings[0]}`" in page, (name, action.option_strings)


def nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1]
    return re.findall(r"([\w/.-]+\.md)\s*$", nav, re.M)


def test_every_decision_record_is_in_the_nav_and_the_index() -> None:
    index = (DOCS / "decisions" / "index.md").read_text(encoding="utf-8")
    nav = nav_pages()
    for record in sorted((DOCS / "decisions").glob("*.md")):
        assert f"decisions/{record.name}" in nav, f"add decisions/{record.name} to mkdocs.yml nav"
        if record.name != "index.md":
            assert f"]({record.name})" in index, f"list {record.name} in docs/decisions/index.md"


def test_the_readme_is_a_front_page() -> None:
    """At most 250 lines, none over 300 characters, and its links into docs/ lead to pages."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    assert [n for n, line in enumerate(lines, 1) if len(line) > 300] == []
    links = re.findall(r"\]\((docs/[^)#\s]+)", "\n".join(lines))
    assert links, "the README links into the docs"
    for link in links:
        assert (ROOT / link).is_file(), link


def test_history_is_out_of_the_way() -> None:
    """bench/results keeps the results of record (git keeps the rest); no HISTORY file is a
    journal of more than 300 lines."""
    results = [p for p in (ROOT / "bench" / "results").iterdir() if p.is_file()]
    kept = [p for p in results if not p.name.startswith(".") and p.suffix != ".tmp"]
    assert len(kept) <= 30, sorted(p.name for p in kept)
    histories = [*ROOT.glob("HISTORY*"), *ROOT.glob("bench/**/HISTORY*"), *DOCS.rglob("HISTORY*")]
    assert histories, "bench/results/HISTORY.md says where the history went"
    for history in histories:
        assert len(history.read_text(encoding="utf-8").splitlines()) <= 300, history


# the folders the architecture page's tables name relative to a package
PACKAGES = (
    "sources/repo_analytics",
    "pipelines",
    "pipelines/destinations",
    "pipelines/integrations",
)


def named_paths(text: str) -> list[str]:
    """Every backticked file or folder name of a page: `a/`, `a/b.py`, `b.py`."""
    return re.findall(r"`([\w./-]*/|[\w/-]+\.py)`", text)


def test_every_folder_and_module_the_architecture_page_names_exists() -> None:
    """The module map stays true: a folder or module renamed or gone fails here, with its
    name. A name of the tree's top (`pipelines/cli/`) is a path; a short one (`editions/`,
    `check.py`) exists in one of the packages or, for a module, somewhere in the tree."""
    text = (DOCS / "architecture.md").read_text()
    names = named_paths(text)
    assert "pipelines/reconcile/" in names and "editions/" in names and "paging.py" in names
    every_module = {p.name for p in ROOT.glob("[ps]*/**/*.py")} | {"generate.py"}
    missing = []
    for name in names:
        if name == "./":
            continue
        if (ROOT / name).exists():
            continue
        if name.endswith("/") and any((ROOT / p / name).is_dir() for p in PACKAGES):
            continue
        if name.endswith(".py") and "/" not in name and name in every_module:
            continue
        missing.append(name)
    assert missing == []
