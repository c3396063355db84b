"""Stores: where one memory's turns, passages and vectors persist."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ireneo.store.base import (
    Filters,
    PassageDraft,
    SourceState,
    Status,
    Store,
    StoreResult,
    TermStats,
)

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool


def open_store(
    home: Path | None = None,
    *,
    database: str | ConnectionPool | None = None,
    user: str | None = None,
) -> Store:
    """The store of one memory: `user`'s rows in a PostgreSQL `database` (a URL or a shared
    pool) when one is given, else the embedded SQLite store in `home`."""
    if database is not None:
        from ireneo.store.postgres import PostgresStore

        if not user:
            raise ValueError("a PostgreSQL memory needs a user")
        return PostgresStore(database, user)
    if home is None:
        raise ValueError("an embedded memory needs a home directory")
    from ireneo.store.sqlite import SQLiteStore

    return SQLiteStore(home)


__all__ = [
    "Filters",
    "PassageDraft",
    "SourceState",
    "Status",
    "Store",
    "StoreResult",
    "TermStats",
    "open_store",
]
