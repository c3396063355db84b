"""The server's configuration: environment variables, overridden by command-line flags.

`Settings.from_env()` reads the environment; `Settings.problems()` says, in words fit for an
operator, why the server must not start with them. Secrets are kept out of `repr`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

MIN_INGEST_KEY_CHARS = 16
MIN_JWT_SECRET_CHARS = 32


class SettingsError(ValueError):
    """A setting that cannot be read (not a number, …)."""


def default_home() -> Path:
    return Path(os.path.expanduser("~/.local/share/ireneo"))


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=default_home)
    dev: bool = False
    ingest_key: str | None = field(default=None, repr=False)
    jwt_secret: str | None = field(default=None, repr=False)
    jwt_public_key: str | None = None
    jwks_url: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    database_url: str | None = field(default=None, repr=False)
    model: str | None = None
    max_body_bytes: int = 1024 * 1024
    index_debounce: float = 1.0
    recall_k: int = 3
    max_result_chars: int = 4000
    max_query_chars: int = 500
    recall_concurrency: int = 4
    recall_timeout: float = 10.0
    index_concurrency: int = 1
    max_open_memories: int = 64

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Settings from `env` (default: os.environ); a keyword that is not None wins."""
        env = os.environ if env is None else env

        def text(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        def number(name: str, kind: type, default: float) -> float:
            raw = text(name)
            if raw is None:
                return default
            try:
                value = kind(raw)
            except ValueError:
                raise SettingsError(f"{name}={raw!r} is not a number") from None
            if value <= 0:
                raise SettingsError(f"{name} must be greater than 0, not {raw}")
            return value

        home = text("IRENEO_HOME")
        values: dict[str, object] = {
            "home": Path(home).expanduser() if home else default_home(),
            "dev": (text("IRENEO_DEV") or "0").lower() in ("1", "true", "yes", "on"),
            "ingest_key": text("IRENEO_INGEST_KEY"),
            "jwt_secret": text("IRENEO_JWT_SECRET"),
            "jwt_public_key": _public_key(text("IRENEO_JWT_PUBLIC_KEY")),
            "jwks_url": text("IRENEO_JWKS_URL"),
            "jwt_issuer": text("IRENEO_JWT_ISSUER"),
            "jwt_audience": text("IRENEO_JWT_AUDIENCE"),
            "database_url": text("IRENEO_DATABASE_URL"),
            "model": text("IRENEO_MODEL"),
            "max_body_bytes": number("IRENEO_MAX_BODY_BYTES", int, cls.max_body_bytes),
            "index_debounce": number("IRENEO_INDEX_DEBOUNCE", float, cls.index_debounce),
            "recall_k": number("IRENEO_RECALL_K", int, cls.recall_k),
            "max_result_chars": number("IRENEO_MAX_RESULT_CHARS", int, cls.max_result_chars),
            "recall_concurrency": number("IRENEO_RECALL_CONCURRENCY", int, cls.recall_concurrency),
            "recall_timeout": number("IRENEO_RECALL_TIMEOUT", float, cls.recall_timeout),
            "index_concurrency": number("IRENEO_INDEX_CONCURRENCY", int, cls.index_concurrency),
            "max_open_memories": number("IRENEO_MAX_OPEN_MEMORIES", int, cls.max_open_memories),
        }
        names = {f.name for f in fields(cls)}
        for key, value in overrides.items():
            if key not in names:
                raise TypeError(f"unknown setting {key!r}")
            if value is not None:
                values[key] = Path(value) if key == "home" else value
        return cls(**values)  # type: ignore[arg-type]

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    @property
    def users_dir(self) -> Path:
        return self.home / "users"

    @property
    def jwt_algorithm(self) -> str:
        return "HS256" if self.jwt_secret else "RS256"

    def problems(self) -> list[str]:
        """Why the HTTP server must not start with these settings (empty: it may)."""
        out: list[str] = []
        if self.database_url:
            out.append(
                "IRENEO_DATABASE_URL is set, but this server serves embedded memories "
                "(IRENEO_HOME) only so far; unset it"
            )
        if not self.ingest_key:
            if not self.dev:
                out.append(
                    "IRENEO_INGEST_KEY is not set: set a random key of at least "
                    f"{MIN_INGEST_KEY_CHARS} characters (or run with --dev on your own machine)"
                )
        elif len(self.ingest_key) < MIN_INGEST_KEY_CHARS and not self.dev:
            out.append(
                f"IRENEO_INGEST_KEY is too short: use at least {MIN_INGEST_KEY_CHARS} random "
                "characters, e.g. from: "
                "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
            )
        sources = [
            name
            for name, value in (
                ("IRENEO_JWT_SECRET", self.jwt_secret),
                ("IRENEO_JWT_PUBLIC_KEY", self.jwt_public_key),
                ("IRENEO_JWKS_URL", self.jwks_url),
            )
            if value
        ]
        if not sources:
            out.append(
                "no token key: set IRENEO_JWKS_URL or IRENEO_JWT_PUBLIC_KEY (RS256), or "
                "IRENEO_JWT_SECRET (HS256, for development)"
            )
        elif len(sources) > 1:
            out.append(f"set only one of {', '.join(sources)}")
        if self.jwt_secret and len(self.jwt_secret) < MIN_JWT_SECRET_CHARS and not self.dev:
            out.append(
                f"IRENEO_JWT_SECRET is too short: "
                f"use at least {MIN_JWT_SECRET_CHARS} random characters"
            )
        if not self.dev:
            for name, value in (
                ("IRENEO_JWT_ISSUER", self.jwt_issuer),
                ("IRENEO_JWT_AUDIENCE", self.jwt_audience),
            ):
                if not value:
                    out.append(f"{name} is not set: tokens must name who issued them and for whom")
        return out


def _public_key(value: str | None) -> str | None:
    """IRENEO_JWT_PUBLIC_KEY holds a PEM key, or the path of a file holding one."""
    if value is None or "-----BEGIN" in value:
        return value
    path = Path(value).expanduser()
    try:
        return path.read_text()
    except OSError as exc:
        raise SettingsError(
            f"IRENEO_JWT_PUBLIC_KEY is neither a PEM key nor a readable file: {exc.strerror}"
        ) from None
