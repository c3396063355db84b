"""Stores: where one memory's turns, passages and vectors persist."""

from __future__ import annotations

from pathlib import Path

from ireneo.store.base import (
    Filters,
    NearPassage,
    PassageDraft,
    SourceState,
    Status,
    Store,
    StoreResult,
    TermStats,
)


def open_store(home: Path) -> Store:
    """The store of one memory. Today the embedded SQLite store; PostgreSQL joins here."""
    from ireneo.store.sqlite import SQLiteStore

    return SQLiteStore(home)


__all__ = [
    "Filters",
    "NearPassage",
    "PassageDraft",
    "SourceState",
    "Status",
    "Store",
    "StoreResult",
    "TermStats",
    "open_store",
]
