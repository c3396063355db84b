"""`ireneo serve --workers N`: N server processes on one port, serving one home.

One Python process is bound by its GIL well before 2 cores are (docs/reliability.md). uvicorn's
own workers lift that: a parent process binds the port and starts N workers, which accept on it
in turn, and starts a new one when a worker dies. Each worker builds the app with `app()` from
the environment (the parent has put the command's flags there), so each has its own open
memories, indexer, tool slots and admission queue; what they must share lives in the home
(server/locks.py: one indexer per user at a time, each periodic job once per interval; the
inspector's sign-ins in a file), and every memory is SQLite in WAL mode, so a write by one
worker is read by the next search of another (a store's copies follow its counters:
store/kept.py). `--workers 1` is the single process it always was.
"""

from __future__ import annotations

import os

from ireneo.config import Settings
from ireneo.server.deadlines import ReadDeadlineProtocol

APP = "ireneo.server.processes:app"
PROTOCOL = "ireneo.server.processes:WorkerProtocol"


class WorkerProtocol(ReadDeadlineProtocol):
    """uvicorn's `http=` class in a worker, named by import string: uvicorn hands its options
    to each worker by pickling them, which a class made at run time cannot be. `app()` sets its
    `read_timeout` from the settings before the first connection."""


def app():
    """The app of one worker, built from the environment (uvicorn's factory)."""
    from ireneo.server.app import create_app
    from ireneo.server.logs import configure_logging

    configure_logging()
    settings = Settings.from_env()
    WorkerProtocol.read_timeout = settings.read_timeout
    return create_app(settings)


def serve(settings: Settings, *, host: str, port: int, workers: int) -> None:
    """Run `workers` processes on `host:port` with `settings` (checked by the caller); blocks
    until stopped. The schema upgrade, if asked, is done once here, before any worker starts, and
    what the workers would refuse of the database (ConfigError) is refused here."""
    import uvicorn

    from ireneo.server.app import check_database, upgrade_database, uvicorn_options

    if settings.db_upgrade:
        upgrade_database(settings)
    check_database(settings)  # a worker that cannot start would be started again for ever
    os.environ.update(settings.worker_env())
    options = uvicorn_options(settings) | {"http": PROTOCOL}  # the class by its import string
    uvicorn.run(APP, factory=True, host=host, port=port, workers=workers, **options)
