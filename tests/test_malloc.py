"""The CLI caps glibc's malloc arenas (`pipelines/malloc.py`); the environment's own
`MALLOC_ARENA_MAX` wins."""

from __future__ import annotations

import platform
import sys

import pytest

from pipelines.malloc import limit_malloc_arenas

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt only")
def test_the_cap_is_set_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_malloc_arenas() is True


def test_the_environment_variable_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    assert limit_malloc_arenas() is False


def test_nothing_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(sys, "platform", "darwin")
    assert limit_malloc_arenas() is False
