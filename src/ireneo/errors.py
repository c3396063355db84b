"""The exceptions ireneo raises on purpose. Each message says what to do next."""

from __future__ import annotations


class IreneoError(Exception):
    """Base class: anything ireneo refuses to do, with a message fit for a person."""


class FormatError(IreneoError):
    """An input file (or request body) is not in the expected format. Nothing of it was written."""

    def __init__(self, where: str, reason: str):
        self.where = where
        self.reason = reason
        super().__init__(f"{where}: {reason}")


class ModelMismatch(IreneoError):
    """The memory records another embedding model than the one asked for (recorded at its
    first turns, before any vector)."""

    def __init__(self, stored: str, requested: str, home: str):
        self.stored = stored
        self.requested = requested
        super().__init__(
            f"this memory's model is {stored!r}, not {requested!r}. "
            f"Use --model {stored}, or re-embed it with: ireneo reembed --home {home} --to {requested}"
        )


class NotFound(IreneoError):
    """A conversation, turn or memory that is not there (or not the caller's)."""


class UnknownModel(IreneoError):
    """An embedding model name or directory that ireneo cannot load."""


class StorageFull(IreneoError):
    """The disk (or the database's quota) is full: the write was rolled back, nothing of it is
    stored. Free space, then send it again."""
