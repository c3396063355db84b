"""Settings: every `IRENEO_*` variable, read in this one module into one typed object.

`Settings.from_env()` is called by the doors (the CLI, the server's start, the demo) and the
result passed down; nothing else reads `IRENEO_*`. Each kind of value has one reader here
(`_Environment`: text, path, on/off, number, whole number, list of numbers), with one rule and
one wording for a value it refuses. `Settings.problems()` says, in words fit for an operator,
why the server must not start. Secrets are kept out of `repr`. This module imports nothing
from ireneo at load, so any layer may import it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from pathlib import Path

MIN_INGEST_KEY_CHARS = 16
MIN_ADMIN_KEY_CHARS = 16
MIN_JWT_SECRET_CHARS = 32

ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")


class SettingsError(ValueError):
    """A variable whose value cannot be read; the message names it, its value and what to give."""


def default_home() -> Path:
    """Where embedded memories live when IRENEO_HOME is not set."""
    return Path("~/.local/share/ireneo").expanduser()


def default_model_cache(env: Mapping[str, str] | None = None) -> Path:
    """ireneo/models under $XDG_CACHE_HOME, else under ~/.cache."""
    base = (os.environ if env is None else env).get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ireneo" / "models"


def model_cache(env: Mapping[str, str] | None = None) -> Path:
    """Where models built at first use are kept: $IRENEO_MODEL_CACHE, else the default.
    Read when asked (a model is built long after start), from `env` or os.environ."""
    env = os.environ if env is None else env
    return _Environment(env).path("IRENEO_MODEL_CACHE", default_model_cache(env))


class _Environment:
    """The readers, one per kind of value. Blank counts as unset; every name read is kept in
    `names` (the documented table of variables is checked against it)."""

    def __init__(self, env: Mapping[str, str]):
        self.env = env
        self.names: list[str] = []

    def text(self, name: str) -> str | None:
        self.names.append(name)
        value = self.env.get(name, "").strip()
        return value or None

    def path(self, name: str, default: Path) -> Path:
        raw = self.text(name)
        return Path(raw).expanduser() if raw else default

    def on_off(self, name: str, default: bool) -> bool:
        raw = self.text(name)
        if raw is None:
            return default
        if raw.lower() in ON or raw.lower() in OFF:
            return raw.lower() in ON
        raise _refused(name, raw, "give 1 or 0 (also true/false, yes/no, on/off)")

    def number(
        self, name: str, default: float, *, positive: bool = True, most: float | None = None
    ) -> float:
        """A finite number, greater than 0 (`positive`) or at least 0, at most `most`."""
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not _within(value, positive, most):
            raise _refused(name, raw, _number_rule(positive, most))
        return value

    def whole(self, name: str, default: int, *, least: int = 1, most: int | None = None) -> int:
        """A whole number from `least` to `most`."""
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            value = least - 1
        if value < least or (most is not None and value > most):
            rule = f"from {least} to {most}" if most is not None else f"of at least {least}"
            raise _refused(name, raw, f"give a whole number {rule}")
        return value

    def numbers(self, name: str, default: tuple[float, ...], *, what: str) -> tuple[float, ...]:
        """As many numbers greater than 0 as `default` holds, separated by commas."""
        raw = self.text(name)
        if raw is None:
            return default
        try:
            values = tuple(float(part) for part in raw.split(","))
        except ValueError:
            values = ()
        if len(values) != len(default) or not all(_within(v, True, None) for v in values):
            example = ",".join(f"{v:g}" for v in default)
            raise _refused(
                name,
                raw,
                f"give {len(default)} numbers greater than 0, separated by commas, "
                f"{what}, e.g. {example}",
            )
        return values


def _within(value: float, positive: bool, most: float | None) -> bool:
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        return False
    return most is None or value <= most


def _number_rule(positive: bool, most: float | None) -> str:
    rule = "give a number greater than 0" if positive else "give a number of at least 0"
    return rule if most is None else f"{rule} and at most {most:g}"


def _refused(name: str, raw: str, rule: str) -> SettingsError:
    return SettingsError(f"{name}={raw!r}: {rule}")


@dataclass(frozen=True)
class MemoryPolicy:
    """How explicit memories are deduplicated, ranked and expired (IRENEO_MEMORY_*).

    dedup: cosine at or above which a new memory updates the nearest stored one (a value above 1
      turns deduplication off). IRENEO_MEMORY_DEDUP.
    half_life_days: recency factor 0.5 ** (days since the last update / half life); 0 turns it
      off. IRENEO_MEMORY_HALF_LIFE_DAYS.
    importance_weights: factor for low, medium and high. IRENEO_MEMORY_IMPORTANCE_WEIGHTS="l,m,h".
    use_weight: factor 1 + use_weight * log2(1 + uses); 0 turns it off. IRENEO_MEMORY_USE_WEIGHT.
    low_max_age_days: low-importance memories not updated for this long expire; 0: never.
      IRENEO_MEMORY_LOW_MAX_AGE_DAYS.

    The defaults were measured on the benchmark's facts stored as memories (docs/memories.md).
    """

    dedup: float = 0.95
    half_life_days: float = 0.0
    importance_weights: tuple[float, float, float] = (1.0, 1.0, 1.0)
    use_weight: float = 0.0
    low_max_age_days: float = 30.0


@dataclass(frozen=True)
class EchoPolicy:
    """When a stored assistant turn counts as a recall echo (ireneo.echoes): it repeats, by at
    least `overlap` of its word trigrams, what recall returned within `window`. IRENEO_ECHO_*."""

    window: timedelta = timedelta(hours=24)
    overlap: float = 0.5

    @property
    def enabled(self) -> bool:
        return self.overlap > 0


@dataclass(frozen=True)
class Settings:
    """Everything ireneo can be configured with; `Settings()` holds the built-in defaults and
    `from_env()` the environment's values (docs/install.md lists each variable)."""

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
    # one memory: its PostgreSQL user when no home is named (the CLI), model, last stage, privacy
    user: str | None = None
    model: str | None = None  # None: the memory's own, else chosen by its first turns' language
    rerank: str | None = None  # the last stage of every recall (ireneo.rerank)
    redact: bool = True  # secrets become markers before they are stored (ireneo.privacy)
    echo_policy: EchoPolicy = field(default_factory=EchoPolicy)
    # the embedding models: inference threads (None: every usable core) and built models
    embed_threads: int | None = None
    model_cache: Path = field(default_factory=default_model_cache)
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
    index_nice: int = 10  # nice steps the indexer runs below the server (Linux; 0: none)
    ingest_concurrency: int = 4  # stores running at once (worker threads)
    ingest_nice: int = 10  # nice steps the stores run below the server (Linux; 0: none)
    ingest_queue: int = 64  # ingest requests admitted at once, running or waiting; then 429
    read_timeout: float = 10.0  # seconds to send a request's head, then its body
    # seconds a connection may wait idle for its next request: past the idle expiry of clients'
    # pools (httpx 5 s, aiohttp 15 s) and of load balancers' (60 s), so they close it first
    keep_alive: float = 75.0
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
        """Settings from `env` (default: os.environ); a keyword that is not None wins.

        SettingsError names the first variable whose value cannot be read."""
        values = _read(_Environment(os.environ if env is None else env))
        names = {f.name for f in fields(cls)}
        for key, value in overrides.items():
            if key not in names:
                raise TypeError(f"unknown setting {key!r}")
            if value is not None:
                values[key] = Path(value) if key in ("home", "model_cache") else value  # type: ignore[arg-type]
        return cls(**values)  # type: ignore[arg-type]

    @staticmethod
    def variables() -> list[str]:
        """Every variable `from_env` reads, in the order it reads them."""
        env = _Environment({})
        _read(env)
        return list(dict.fromkeys(env.names))

    def worker_env(self) -> dict[str, str]:
        """The variables under which `from_env` in a worker process (`ireneo serve --workers`)
        gives these settings' command-line choices: the home and dev mode; the schema upgrade
        is the parent's, done before any worker starts."""
        return {
            "IRENEO_HOME": str(self.home),
            "IRENEO_DEV": "1" if self.dev else "0",
            "IRENEO_DB_UPGRADE": "0",
        }

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
        from ireneo.rerank import check_name as check_reranker  # it loads the embedding layer

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


def _read(env: _Environment) -> dict[str, object]:
    """Every setting's value from the environment, by field name."""
    d = Settings  # the defaults
    number, whole, text, on_off = env.number, env.whole, env.text, env.on_off
    return {
        "home": env.path("IRENEO_HOME", default_home()),
        "dev": on_off("IRENEO_DEV", d.dev),
        "ingest_key": text("IRENEO_INGEST_KEY"),
        "jwt_secret": text("IRENEO_JWT_SECRET"),
        "jwt_public_key": _public_key(text("IRENEO_JWT_PUBLIC_KEY")),
        "jwks_url": text("IRENEO_JWKS_URL"),
        "jwt_issuer": text("IRENEO_JWT_ISSUER"),
        "jwt_audience": text("IRENEO_JWT_AUDIENCE"),
        "database_url": text("IRENEO_DATABASE_URL"),
        "database_owner_url": text("IRENEO_DATABASE_OWNER_URL"),
        "database_app_role": text("IRENEO_DATABASE_APP_ROLE") or d.database_app_role,
        "db_upgrade": on_off("IRENEO_DB_UPGRADE", d.db_upgrade),
        "user": text("IRENEO_USER"),
        "model": text("IRENEO_MODEL"),
        "rerank": text("IRENEO_RERANK"),
        "redact": on_off("IRENEO_REDACT", d.redact),
        "echo_policy": EchoPolicy(
            window=timedelta(
                hours=number("IRENEO_ECHO_WINDOW_HOURS", _hours(EchoPolicy.window), positive=False)
            ),
            overlap=number("IRENEO_ECHO_OVERLAP", EchoPolicy.overlap, positive=False, most=1),
        ),
        "embed_threads": whole("IRENEO_EMBED_THREADS", 0) or None,
        "model_cache": env.path("IRENEO_MODEL_CACHE", default_model_cache(env.env)),
        "max_body_bytes": whole("IRENEO_MAX_BODY_BYTES", d.max_body_bytes),
        "max_mcp_body_bytes": whole("IRENEO_MAX_MCP_BODY_BYTES", d.max_mcp_body_bytes),
        "max_token_lifetime": number("IRENEO_MAX_TOKEN_LIFETIME", d.max_token_lifetime),
        "index_debounce": number("IRENEO_INDEX_DEBOUNCE", d.index_debounce),
        "recall_k": whole("IRENEO_RECALL_K", d.recall_k),
        "max_result_chars": whole("IRENEO_MAX_RESULT_CHARS", d.max_result_chars),
        "max_query_chars": whole("IRENEO_MAX_QUERY_CHARS", d.max_query_chars),
        "recall_concurrency": whole("IRENEO_RECALL_CONCURRENCY", d.recall_concurrency),
        "recall_timeout": number("IRENEO_RECALL_TIMEOUT", d.recall_timeout),
        "index_concurrency": whole("IRENEO_INDEX_CONCURRENCY", d.index_concurrency),
        "index_nice": whole("IRENEO_INDEX_NICE", d.index_nice, least=0, most=19),
        "ingest_concurrency": whole("IRENEO_INGEST_CONCURRENCY", d.ingest_concurrency),
        "ingest_queue": whole("IRENEO_INGEST_QUEUE", d.ingest_queue),
        "ingest_nice": whole("IRENEO_INGEST_NICE", d.ingest_nice, least=0, most=19),
        "read_timeout": number("IRENEO_READ_TIMEOUT", d.read_timeout),
        "keep_alive": number("IRENEO_KEEP_ALIVE", d.keep_alive, most=3600.0),
        "max_open_memories": whole("IRENEO_MAX_OPEN_MEMORIES", d.max_open_memories),
        "max_open_mb": whole("IRENEO_MAX_OPEN_MB", d.max_open_mb),
        "memory_tools": on_off("IRENEO_MEMORY_TOOLS", d.memory_tools),
        "memory_policy": _memory_policy(env),
        "memory_expiry_interval": number("IRENEO_MEMORY_EXPIRY_INTERVAL", d.memory_expiry_interval),
        "retention_days": number("IRENEO_RETENTION_DAYS", 0.0) or None,
        "retention_interval": number("IRENEO_RETENTION_INTERVAL", d.retention_interval),
        "admin_key": text("IRENEO_ADMIN_KEY"),
        "llm_base_url": text("IRENEO_LLM_BASE_URL"),
        "llm_model": text("IRENEO_LLM_MODEL"),
        "llm_api_key": text("IRENEO_LLM_API_KEY"),
        "llm_timeout": number("IRENEO_LLM_TIMEOUT", d.llm_timeout),
        "chat_memories": whole("IRENEO_CHAT_MEMORIES", d.chat_memories),
        "chat_conversations": whole("IRENEO_CHAT_CONVERSATIONS", d.chat_conversations),
        "chat_max_message_chars": whole("IRENEO_CHAT_MAX_MESSAGE_CHARS", d.chat_max_message_chars),
        "chat_max_context_chars": whole("IRENEO_CHAT_MAX_CONTEXT_CHARS", d.chat_max_context_chars),
    }


def _memory_policy(env: _Environment) -> MemoryPolicy:
    d = MemoryPolicy
    weights = env.numbers(
        "IRENEO_MEMORY_IMPORTANCE_WEIGHTS", d.importance_weights, what="for low, medium and high"
    )
    return MemoryPolicy(
        dedup=env.number("IRENEO_MEMORY_DEDUP", d.dedup, positive=False),
        half_life_days=env.number("IRENEO_MEMORY_HALF_LIFE_DAYS", d.half_life_days, positive=False),
        importance_weights=weights,  # type: ignore[arg-type]
        use_weight=env.number("IRENEO_MEMORY_USE_WEIGHT", d.use_weight, positive=False),
        low_max_age_days=env.number(
            "IRENEO_MEMORY_LOW_MAX_AGE_DAYS", d.low_max_age_days, positive=False
        ),
    )


def _hours(span: timedelta) -> float:
    return span.total_seconds() / 3600


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
