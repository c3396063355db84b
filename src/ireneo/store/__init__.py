"""Stores: where one memory's turns, passages and vectors persist."""

from __future__ import annotations

from pathlib import Path

from ireneo.store.base import Filters, PassageDraft, SourceState, Status, Store, StoreResult


def open_store(home: Path) -> Store:
    """The store of one memory. Today the embedded SQLite store; PostgreSQL joins here."""
    from ireneo.store.sqlite import SQLiteStore

    return SQLiteStore(home)


__all__ = ["Filters", "PassageDraft", "SourceState", "Status", "Store", "StoreResult", "open_store"]
