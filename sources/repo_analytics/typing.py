"""Protocols shared across the package's folders: what one folder needs of another's objects,
named here so that neither imports the other (an edition's endpoint table names a paging
scheme; Arrow's page decoding reads the fields the scheme's paginator reads)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import pyarrow as pa


class Paginator(Protocol):
    def init_request(self, params: dict[str, Any]) -> None: ...
    def update_state(self, body: Any) -> None: ...
    def update_request(self, params: dict[str, Any]) -> str | None: ...
    def items(self, body: Any) -> Sequence[Any]: ...
    @property
    def has_next(self) -> bool: ...


class Paging(Protocol):
    """A paging scheme with an edition's names: what an endpoint table names."""

    @property
    def page_size_param(self) -> str: ...
    @property
    def items_key(self) -> str: ...
    @property
    def head(self) -> tuple[tuple[str, pa.DataType], ...]:
        """The page's top-level fields the paginator reads, with their types (`arrow.pages`)."""

    @property
    def required(self) -> tuple[str, ...]:
        """Those of them whose absence the paginator reads otherwise than a null."""

    def paginator(self, page_size: int, api_base: str) -> Paginator: ...
    def __hash__(self) -> int: ...
