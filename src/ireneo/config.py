"""The server's configuration: environment variables, overridden by command-line flags.

`Settings.from_env()` reads the environment; `Settings.problems()` says, in words fit for an
operator, why the server must not start with them. Secrets are kept out of `repr`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from ireneo.memories import MemoryPolicy
from ireneo.rerank import check_name as check_reranker

MIN_INGEST_KEY_CHARS = 16
MIN_ADMIN_KEY_CHARS = 16
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
    database_owner_url: str | None = field(default=None, repr=False)  # for db upgrades only
    database_app_role: str = "ireneo_app"
    db_upgrade: bool = False  # apply missing migrations at start (IRENEO_DB_UPGRADE=1)
    model: str | None = None
    rerank: str | None = None  # the last stage of every recall (ireneo.rerank)
    max_body_bytes: int = 1024 * 1024
    max_mcp_body_bytes: int = 64 * 1024  # one /mcp request (IRENEO_MAX_MCP_BODY_BYTES)
    max_token_lifetime: float = 86400.0  # longest a bearer token may live, in seconds
    index_debounce: float = 1.0
    recall_k: int = 3
    max_result_chars: int = 4000
    max_query_chars: int = 500
    recall_concurrency: int = 4
    recall_timeout: float = 10.0
    index_concurrency: int = 1
    ingest_concurrency: int = 4  # stores running at once (worker threads)
    ingest_queue: int = 64  # ingest requests admitted at once, running or waiting; then 429
    read_timeout: float = 10.0  # seconds to send a request's head, then its body
    # open memories: at most this many, holding at most this much RAM (server/memories.py)
    max_open_memories: int = 2048
    max_open_mb: int = 256
    # explicit memories (ireneo.memories) and the chat loop (ireneo.server.chat)
    memory_tools: bool = True  # store/search/delete_memory on /mcp (IRENEO_MEMORY_TOOLS=0: off)
    memory_policy: MemoryPolicy = field(default_factory=MemoryPolicy)
    memory_expiry_interval: float = 3600.0
    # privacy (ireneo.server.forget, ireneo.privacy)
    retention_days: float | None = None  # IRENEO_RETENTION_DAYS; None: keep conversations
    retention_interval: float = 3600.0
    admin_key: str | None = field(default=None, repr=False)
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    llm_timeout: float = 30.0
    chat_memories: int = 5
    chat_conversations: int = 3
    chat_max_message_chars: int = 4000
    chat_max_context_chars: int = 6000

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
            "database_owner_url": text("IRENEO_DATABASE_OWNER_URL"),
            "database_app_role": text("IRENEO_DATABASE_APP_ROLE") or cls.database_app_role,
            "db_upgrade": (text("IRENEO_DB_UPGRADE") or "0").lower() in ("1", "true", "yes", "on"),
            "model": text("IRENEO_MODEL"),
            "rerank": text("IRENEO_RERANK"),
            "max_body_bytes": number("IRENEO_MAX_BODY_BYTES", int, cls.max_body_bytes),
            "max_mcp_body_bytes": number("IRENEO_MAX_MCP_BODY_BYTES", int, cls.max_mcp_body_bytes),
            "max_token_lifetime": number(
                "IRENEO_MAX_TOKEN_LIFETIME", float, cls.max_token_lifetime
            ),
            "index_debounce": number("IRENEO_INDEX_DEBOUNCE", float, cls.index_debounce),
            "recall_k": number("IRENEO_RECALL_K", int, cls.recall_k),
            "max_result_chars": number("IRENEO_MAX_RESULT_CHARS", int, cls.max_result_chars),
            "recall_concurrency": number("IRENEO_RECALL_CONCURRENCY", int, cls.recall_concurrency),
            "recall_timeout": number("IRENEO_RECALL_TIMEOUT", float, cls.recall_timeout),
            "index_concurrency": number("IRENEO_INDEX_CONCURRENCY", int, cls.index_concurrency),
            "ingest_concurrency": number("IRENEO_INGEST_CONCURRENCY", int, cls.ingest_concurrency),
            "ingest_queue": number("IRENEO_INGEST_QUEUE", int, cls.ingest_queue),
            "read_timeout": number("IRENEO_READ_TIMEOUT", float, cls.read_timeout),
            "max_open_memories": number("IRENEO_MAX_OPEN_MEMORIES", int, cls.max_open_memories),
            "max_open_mb": number("IRENEO_MAX_OPEN_MB", int, cls.max_open_mb),
            "memory_expiry_interval": number(
                "IRENEO_MEMORY_EXPIRY_INTERVAL", float, cls.memory_expiry_interval
            ),
            "retention_days": (
                number("IRENEO_RETENTION_DAYS", float, 1.0)
                if text("IRENEO_RETENTION_DAYS")
                else None
            ),
            "retention_interval": number(
                "IRENEO_RETENTION_INTERVAL", float, cls.retention_interval
            ),
            "memory_tools": (text("IRENEO_MEMORY_TOOLS") or "1").lower()
            not in ("0", "false", "no", "off"),
            "admin_key": text("IRENEO_ADMIN_KEY"),
            "llm_base_url": text("IRENEO_LLM_BASE_URL"),
            "llm_model": text("IRENEO_LLM_MODEL"),
            "llm_api_key": text("IRENEO_LLM_API_KEY"),
            "llm_timeout": number("IRENEO_LLM_TIMEOUT", float, cls.llm_timeout),
            "chat_memories": number("IRENEO_CHAT_MEMORIES", int, cls.chat_memories),
            "chat_conversations": number("IRENEO_CHAT_CONVERSATIONS", int, cls.chat_conversations),
            "chat_max_message_chars": number(
                "IRENEO_CHAT_MAX_MESSAGE_CHARS", int, cls.chat_max_message_chars
            ),
            "chat_max_context_chars": number(
                "IRENEO_CHAT_MAX_CONTEXT_CHARS", int, cls.chat_max_context_chars
            ),
        }
        try:
            values["memory_policy"] = MemoryPolicy.from_env(env)
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
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
        url = self.database_url or ""
        if "://" in url and not url.startswith(("postgresql://", "postgres://")):
            out.append("IRENEO_DATABASE_URL must be a postgresql:// URL (or libpq key=value)")
        try:
            check_reranker(self.rerank)
        except ValueError as exc:
            out.append(f"IRENEO_RERANK: {exc}")
        if self.db_upgrade and not self.database_url:
            out.append("IRENEO_DB_UPGRADE is set without IRENEO_DATABASE_URL: nothing to upgrade")
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
        if self.admin_key:
            if len(self.admin_key) < MIN_ADMIN_KEY_CHARS and not self.dev:
                out.append(
                    f"IRENEO_ADMIN_KEY is too short: use at least {MIN_ADMIN_KEY_CHARS} random "
                    "characters"
                )
            if self.admin_key == self.ingest_key:
                out.append(
                    "IRENEO_ADMIN_KEY equals IRENEO_INGEST_KEY: the audit route needs a key of "
                    "its own, which the chat gateway does not hold"
                )
        if self.llm_base_url and not self.llm_base_url.startswith(("http://", "https://")):
            out.append(
                "IRENEO_LLM_BASE_URL must be an http:// or https:// URL, "
                "e.g. https://api.openai.com/v1"
            )
        return out

    @property
    def chat_model_problem(self) -> str | None:
        """Why `/chat` cannot call a model (it answers 503 with this), or None."""
        missing = [
            name
            for name, value in (
                ("IRENEO_LLM_BASE_URL", self.llm_base_url),
                ("IRENEO_LLM_MODEL", self.llm_model),
            )
            if not value
        ]
        if not missing:
            return None
        return (
            "no chat model configured: set "
            + " and ".join(missing)
            + " (an OpenAI-compatible chat completions endpoint, e.g. https://api.openai.com/v1)"
        )


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
