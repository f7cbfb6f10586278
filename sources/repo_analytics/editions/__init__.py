"""The registry of editions: the built-in ones, and those an installed package adds.

An edition is one module holding its `EditionSpec`. A package adds one without changing this
package, with an entry point in the `repo_analytics.editions` group naming that spec:

    [project.entry-points."repo_analytics.editions"]
    acme = "acme_analytics.edition:ACME"

Everything that needs to know an edition (the source, the CLI, reconciliation, the canonical
views, the demo) asks this registry, never an edition's name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from typing import Any, Final

from dlt.common import logger

from ..errors import ConfigError
from .cloud import CLOUD
from .selfhosted import SELFHOSTED
from .spec import EditionSpec

BUILT_IN: Final = (CLOUD, SELFHOSTED)
ENTRY_POINT_GROUP: Final = "repo_analytics.editions"


def installed() -> dict[str, EditionSpec]:
    """Every edition, by name: the built-in ones first, then those of entry points (read on
    every call: nothing is kept between calls, and nothing happens at import time)."""
    specs = {spec.name: spec for spec in BUILT_IN}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in specs:
            continue
        spec = point.load()
        if not isinstance(spec, EditionSpec) or spec.name != point.name:
            logger.warning(
                f"ignored the edition entry point `{point.name}` ({point.value}): "
                "it must name an EditionSpec of the same name"
            )
            continue
        specs[spec.name] = spec
    return specs


class EditionRegistry(Mapping[str, EditionSpec]):
    """The editions as a read-only mapping from name to `EditionSpec`."""

    def __getitem__(self, name: str) -> EditionSpec:
        for spec in BUILT_IN:  # without reading the entry points
            if spec.name == name:
                return spec
        return installed()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(installed())

    def __len__(self) -> int:
        return len(installed())


EDITION_SPECS: Final[Mapping[str, EditionSpec]] = EditionRegistry()


def edition_spec(name: Any) -> EditionSpec:
    """The edition called `name`; a `ConfigError` listing the editions when there is none."""
    spec = EDITION_SPECS.get(str(name))
    if spec is None:
        raise ConfigError("edition", name, "one of " + ", ".join(EDITION_SPECS))
    return spec
