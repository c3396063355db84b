"""The server's command-line verbs: `ireneo serve`, `ireneo mcp`, `ireneo token`.

Register them on the main group with `main.add_command(...)` (`serve`, `mcp`, `token`). The
server stack (FastMCP, uvicorn) is imported only when a verb runs, so the CLI starts fast.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from pathlib import Path

import click

HOME_HELP = "Memory directory [env IRENEO_HOME; default ~/.local/share/ireneo]."


def _settings(**overrides: object):
    from ireneo.config import Settings, SettingsError

    try:
        return Settings.from_env(**overrides)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--home", type=click.Path(file_okay=False, path_type=Path), help=HOME_HELP)
@click.option(
    "--dev",
    is_flag=True,
    default=False,
    help="Local development: allow a missing or short ingest key and a short token secret "
    "[env IRENEO_DEV=1].",
)
@click.option(
    "--upgrade-db",
    is_flag=True,
    default=False,
    help="With IRENEO_DATABASE_URL: apply missing schema migrations before serving, as "
    "IRENEO_DATABASE_OWNER_URL's role when set [env IRENEO_DB_UPGRADE=1].",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Server processes on this port and home (one Python process is bound by its GIL: "
    "about one per core; docs/reliability.md).",
)
def serve(
    host: str, port: int, home: Path | None, dev: bool, upgrade_db: bool, workers: int
) -> None:
    """Run the HTTP server: POST /turns, /mcp (bearer token), GET /health.

    Memories are kept under --home, or, with IRENEO_DATABASE_URL, in a PostgreSQL database
    that many replicas of this server can share (docs/postgres.md). With --workers N, N
    processes serve the port and the home together (docs/reliability.md)."""
    settings = _settings(home=home, dev=True if dev else None, db_upgrade=upgrade_db or None)
    problems = settings.problems()
    if problems:
        raise click.ClickException("refusing to start:\n  - " + "\n  - ".join(problems))

    import uvicorn

    from ireneo.server.app import create_app
    from ireneo.server.logs import configure_logging, log_event

    configure_logging()
    log = logging.getLogger("ireneo.server")
    if settings.dev:
        log_event(log, "dev_mode", level=logging.WARNING, ingest_key_set=bool(settings.ingest_key))
        if not _is_loopback(host):
            log_event(log, "dev_mode_public_address", level=logging.WARNING, host=host)
    from ireneo.server.app import ConfigError, uvicorn_options

    if workers > 1:
        from ireneo.server.processes import serve as serve_workers

        try:  # what a worker would refuse is refused here, once, before any starts
            serve_workers(settings, host=host, port=port, workers=workers)
        except ConfigError as exc:
            raise click.ClickException(f"refusing to start: {exc}") from None
        return
    try:
        app = create_app(settings)
    except ConfigError as exc:
        raise click.ClickException(f"refusing to start: {exc}") from None
    uvicorn.run(app, host=host, port=port, **uvicorn_options(settings))


@click.command("mcp")
@click.option("--home", type=click.Path(file_okay=False, path_type=Path), help=HOME_HELP)
def mcp(home: Path | None) -> None:
    """Serve one memory over MCP on stdio, for a desktop client (no auth: your own memory)."""
    import asyncio

    from ireneo.server.logs import configure_logging
    from ireneo.server.stdio import create_stdio_server

    settings = _settings(home=home)
    configure_logging(logging.WARNING)  # stderr only: stdout carries the protocol
    server = create_stdio_server(settings)
    asyncio.run(server.run_stdio_async(show_banner=False))


@click.command("token")
@click.option("--user", required=True, help="The user the token speaks for (its sub claim).")
@click.option(
    "--ttl",
    default=3600,
    show_default=True,
    type=click.IntRange(min=1),
    help="Seconds until the token expires.",
)
@click.option("--json", "as_json", is_flag=True, help='Print {"token", "user", "expires_in"}.')
def token(user: str, ttl: int, as_json: bool) -> None:
    """Print a development token for USER, signed with IRENEO_JWT_SECRET (HS256), with
    IRENEO_JWT_ISSUER and IRENEO_JWT_AUDIENCE as its issuer and audience."""
    from ireneo.server.auth import mint_token

    settings = _settings()
    try:
        minted = mint_token(settings, user, ttl)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        json.dumps({"token": minted, "user": user, "expires_in": ttl}) if as_json else minted
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


COMMANDS = (serve, mcp, token)
