"""`ireneo serve --workers N`: N server processes on one port, serving one home.

One Python process is bound by its GIL well before 2 cores are (docs/reliability.md). uvicorn's
own workers lift that: a parent process holds the port and starts N workers, each listening on
it with a socket of its own (SharedPort), and starts a new one when a worker dies. Each worker
builds the app with `app()` from the environment (the parent has put the command's flags
there), so each has its own open
memories, indexer, tool slots and admission queue; what they must share lives in the home
(server/locks.py: one indexer per user at a time, each periodic job once per interval; the
inspector's sign-ins in a file), and every memory is SQLite in WAL mode, so a write by one
worker is read by the next search of another (a store's copies follow its counters:
store/kept.py). `--workers 1` is the single process it always was.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys

from ireneo.config import Settings
from ireneo.server.deadlines import ReadDeadlineProtocol

log = logging.getLogger("ireneo.server")

APP = "ireneo.server.processes:app"
STARTUP_FAILURE = 3  # uvicorn's exit status when it cannot start
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
    from uvicorn.supervisors import Multiprocess

    from ireneo.server.app import check_database, upgrade_database, uvicorn_options

    if settings.db_upgrade:
        upgrade_database(settings)
    check_database(settings)  # a worker that cannot start would be started again for ever
    os.environ.update(settings.worker_env())
    options = uvicorn_options(settings) | {"http": PROTOCOL}  # the class by its import string
    config = uvicorn.Config(APP, factory=True, host=host, port=port, workers=workers, **options)
    if SharedPort.usable():
        try:
            sock = SharedPort.claim(host, port)
        except OSError as exc:  # as uvicorn's own bind: a line, not a traceback
            log.error("cannot listen on %s:%s: %s", host, port, exc)
            raise SystemExit(STARTUP_FAILURE) from None
        log.info("serving on http://%s:%d with %d workers", host, sock.getsockname()[1], workers)
    else:
        sock = config.bind_socket()
    with contextlib.suppress(KeyboardInterrupt):
        Multiprocess(config, sockets=[sock]).run()


class SharedPort(socket.socket):
    """The port, bound by each worker anew (SO_REUSEPORT): the kernel then deals the incoming
    connections out among the workers' sockets. On one socket shared by every worker, most
    connections went to one process (96% of a core against 13% under 20 clients): they are
    kept alive, so that worker stayed the bound (docs/reliability.md). The parent's socket is
    bound, never listening, which keeps the port; a worker (and one started again after a
    death) gets it by pickling, which binds a socket of its own. Linux only: elsewhere
    SO_REUSEPORT does not deal connections out, and the workers share uvicorn's socket."""

    @staticmethod
    def usable() -> bool:
        return sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")

    @classmethod
    def claim(cls, host: str, port: int) -> socket.socket:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = cls(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))  # port 0: the one the system chose, for every worker
        return sock

    def __reduce__(self):  # how a worker receives it: a socket of its own on the same port
        host, port = self.getsockname()[:2]
        return SharedPort.claim, (host, port)
