"""The Python API: one `Memory` is everything stored for one user.

    from ireneo import Memory
    m = Memory("path/to/home")
    m.index(["dir/", "one.funes.jsonl"])
    hits = m.recall("N-11 upgrade blocker", k=8)

    # or one user's memory in a shared PostgreSQL database (see docs/postgres.md)
    m = Memory(database="postgresql://ireneo_app@db/ireneo", user="alice")

    # as the CLI opens it: where and how the environment's IRENEO_* variables say
    from ireneo.config import Settings
    m = Memory(settings=Settings.from_env())

The CLI, the MCP tools and the HTTP server are thin doors onto these methods.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ireneo import index as indexing
from ireneo import search
from ireneo.config import Settings
from ireneo.echoes import Shown, is_echo
from ireneo.embed import DEFAULT_MODEL, Embedder, load_embedder
from ireneo.embed.choose import choose_model
from ireneo.errors import ModelMismatch, NotFound, UnknownModel
from ireneo.model import ConversationSummary, Hit, Turn
from ireneo.rerank import check_name as check_reranker
from ireneo.rerank import load_reranker
from ireneo.store import Filters, Status, StoreResult, open_store
from ireneo.store.base import AuditEntry, Forgotten

if TYPE_CHECKING:
    import numpy as np
    from psycopg_pool import ConnectionPool

    from ireneo.memories import ExplicitMemories

log = logging.getLogger("ireneo.memory")

REFS_KEPT = 4096  # conversations whose public name a memory keeps once read


class Memory:
    """One memory: one user's turns, search index and vectors.

    Where it lives: `database` (a PostgreSQL URL, or a pool shared by many memories) with
    `user`, the key of its rows; else the directory `home`; with neither, the settings'
    `database_url` (and `user`) when set, else their `home`. `settings` (default: the built-in
    defaults, `Settings()`) also give the model, the reranker, redaction and the echo and saved
    memory policies; `model`, `rerank` and `redact`, when given, win over them.
    """

    def __init__(
        self,
        home: str | Path | None = None,
        *,
        settings: Settings | None = None,
        model: str | None = None,
        rerank: str | None = None,
        redact: bool | None = None,
        database: str | ConnectionPool | None = None,
        user: str | None = None,
    ):
        self.settings = settings = settings or Settings()
        if database is None and home is None:
            database = settings.database_url
            user = user or settings.user
            if database is not None and not user:
                raise ValueError(
                    "IRENEO_DATABASE_URL is set: name the memory's user with IRENEO_USER "
                    "(or pass --home to use an embedded memory)"
                )
        # Secrets become markers before anything is stored (ireneo.privacy); IRENEO_REDACT=0: off.
        self.redact = settings.redact if redact is None else redact
        self.echo_policy = settings.echo_policy
        if database is not None:
            self.home: Path | None = None
            self.location = f"PostgreSQL (user {user})"
            self.store = open_store(database=database, user=user)
        else:
            self.home = Path(home) if home is not None else settings.home
            self.location = str(self.home)
            self.store = open_store(self.home)
        stored = self.store.get_meta("model")
        self.requested = requested = model or settings.model
        if stored and requested and requested != stored:
            raise ModelMismatch(stored, requested, self.location)
        # the model: asked for, else recorded, else chosen by the language of the first turns
        # stored (until then, the default stands in: settle_model)
        self.model_name = requested or stored or DEFAULT_MODEL
        self._vectors = stored is not None  # see _has_vectors
        self._recorded = stored is not None  # whether the memory records its model (settle_model)
        # how this memory reads Korean, as it was written (a memory from before morphemes
        # keeps bigrams): the same for every term it stores and every query it is asked
        self.hangul = indexing.hangul_of(self.store)
        self._embedder: Embedder | None = None
        self._embedder_lock = threading.Lock()
        self._refs: dict[str, str] = {}  # conversation_ref's answers, kept (see there)
        self._shown = Shown()  # what recall showed, read by the echo test of each post
        self.fusion = search.Fusion.for_model(self.model_name)
        # the last stage of every recall (ireneo.rerank): `rerank`, else the settings', else none
        self.rerank = rerank or settings.rerank or None
        check_reranker(self.rerank)

    # -- the embedder is loaded on first need: reading a conversation needs none -----------
    @property
    def embedder(self) -> Embedder:
        with self._embedder_lock:
            return self._loaded()

    def _has_vectors(self) -> bool:
        """Whether the memory records its model, so has vectors or will have them at its next
        index run (a recall before it embeds the query and finds none: words decide, as
        before any vector). Read until true, then known: a model once recorded stays (reembed
        records another), and asking on every recall was one more transaction on PostgreSQL.
        A model recorded meanwhile by another process is taken up."""
        if not self._vectors:
            stored = self.store.get_meta("model")
            if stored is not None:
                with self._embedder_lock:
                    self._take_up(stored)
                self._vectors = True
        return self._vectors

    def settle_model(self, texts: Iterable[str] = ()) -> Embedder:
        """The memory's embedder, its model recorded first if it records none yet: the model
        asked for (`model`, the settings'), else one chosen by the language of `texts`, the
        first turns it stores (ireneo.embed.choose: MiniLM for what MiniLM reads, e5-small-q8
        for Russian, Korean...). Called before turns are first cut into passages, which are
        cut by the model's own splitter; `texts` is read only then, and only as far as the
        choice needs. A memory that already holds turns but records no model (written before
        models were recorded at the first store) keeps the default, which cut them."""
        if not self._recorded:
            with self._embedder_lock:
                if not self._recorded:
                    self._record(texts)
        return self.embedder

    def _record(self, texts: Iterable[str]) -> None:
        """settle_model's work, under the embedder lock."""
        stored = self.store.get_meta("model")
        if stored is None:
            name = self.requested
            if name is None:
                name = choose_model(texts) if self.store.is_empty() else DEFAULT_MODEL
                name = self._loadable(name)
            # how it reads Korean first: hangul_of takes a recorded model for a written memory
            indexing.remember_hangul(self.store)
            self._take_up(name)
            stored = self.store.add_meta("model", self._loaded().name)  # or another's, first
        if stored is not None and stored != self.model_name:
            if self.requested is not None:
                raise ModelMismatch(stored, self.requested, self.location)
            self._take_up(stored)
        self._recorded = True

    def _loadable(self, name: str) -> str:
        """`name`, or the default when its model cannot load here (e5-small-q8 without the `e5`
        extra): a memory is never refused its turns for a model it was not asked for."""
        if name == DEFAULT_MODEL:
            return name
        try:
            load_embedder(name, threads=self.settings.embed_threads)
        except UnknownModel as exc:
            why = str(exc).split(". Valid models")[0]  # what is missing and its pip command
            log.warning(
                "%s: its first turns are in good part in letters %s cannot read and %s can, but "
                "%s; it gets %s (ireneo reembed --to %s moves it later)",
                self.location, DEFAULT_MODEL, name, why, DEFAULT_MODEL, name,
            )  # fmt: skip
            return DEFAULT_MODEL
        return name

    def _take_up(self, name: str) -> None:
        """Make `name` this memory's model: its embedder (on first need) and its fusion. Call
        under the embedder lock."""
        if name != self.model_name:
            self._embedder = None
            self.model_name = name
            self.fusion = search.Fusion.for_model(name)  # its calibration and weight

    def _loaded(self) -> Embedder:
        """The embedder of `model_name`, loaded now; call under the embedder lock."""
        if self._embedder is None:
            self._embedder = load_embedder(self.model_name, threads=self.settings.embed_threads)
            self.model_name = self._embedder.name  # a path resolves to local:<dir>
        return self._embedder

    def _embed_query(self, query: str) -> np.ndarray:
        # called on recall's query worker (search.window_scores): a fresh process loads its
        # model there (~0.1 s) while this thread reads search's copies, not before them
        return self.embedder.embed_query(query)

    # -- writes ---------------------------------------------------------------------------
    def index(
        self, paths: Iterable[str | Path], progress: indexing.Progress | None = None
    ) -> indexing.IndexReport:
        """Index `.funes.jsonl` files and directories: unchanged files cost nothing."""
        files = indexing.find_files(paths)
        split = self.settle_model(indexing.texts_of(files)).split
        report = indexing.index_files(self.store, split, files, redact=self.redact)
        report.embedded = self.embed_pending(progress)
        return report

    def store_turns(self, turns: list[Turn], *, now: datetime | None = None) -> StoreResult:
        """Store turns durably (keyword-searchable on return); vectors come with embed_pending.

        An assistant turn that mostly repeats what was returned to this user within the echo
        window before `now` is flagged as a recall echo (ireneo.echoes).
        """
        split = self.settle_model(turn.text for turn in turns).split
        return indexing.store_turns(
            self.store, split, turns, redact=self.redact, echo=self._echo_test(now)
        )

    def note_returned(self, turns: Iterable[tuple[str, int]], now: datetime | None = None) -> None:
        """Remember that these turns `(session_id, seq)` were just shown to the user's agent."""
        if not self.echo_policy.enabled:
            return
        now = now or _now()
        self.store.record_returned(list(turns), now, now - self.echo_policy.window)

    def _echo_test(self, now: datetime | None) -> Callable[[Turn], bool] | None:
        if not self.echo_policy.enabled:
            return None
        since = (now or _now()) - self.echo_policy.window
        shown: str | None = None

        def test(turn: Turn) -> bool:
            nonlocal shown
            if turn.role != "assistant":
                return False
            if shown is None:  # read once, and only when an assistant turn is new
                shown = self._shown.lines(self.store, since)
            return is_echo(turn.text, shown, self.echo_policy)

        return test

    def embed_pending(self, progress: indexing.Progress | None = None) -> int:
        """Embed whatever is stored but has no vector yet."""
        if not self.store.count_pending():
            self.store.save_copies()  # a memory indexed before copies were saved gets them
            return 0
        return indexing.embed_pending(self.store, self.settle_model(), progress)

    def pending(self) -> int:
        return self.store.count_pending()

    def reembed(self, model: str, progress: indexing.Progress | None = None) -> int:
        """Replace every vector with one from `model` (the way out of a ModelMismatch)."""
        embedder = load_embedder(model, threads=self.settings.embed_threads)
        with self._embedder_lock:
            self.store.drop_vectors()
            self.store.set_meta("model", embedder.name)
            self._take_up(embedder.name)
            self._embedder, self._recorded, self._vectors = embedder, True, True
        return indexing.embed_pending(self.store, embedder, progress)

    # -- reads ------------------------------------------------------------------------------
    def recall(
        self,
        query: str,
        k: int = 8,
        *,
        since: date | datetime | str | None = None,
        until: date | datetime | str | None = None,
        role: str | None = None,
        session_id: str | None = None,
        block_types: Iterable[str] | None = None,
        radius: int = 1,
        reranker: search.Reranker | None = None,
        include_echoes: bool = False,
        fits: Callable[[list[Hit]], bool] | None = None,
    ) -> list[Hit]:
        """The `k` turns that best match `query`, best first, each with its neighbours.
        Recall echoes (ireneo.echoes) are left out unless `include_echoes`. `reranker`, when
        given, is the last stage instead of the memory's own (`rerank`, ireneo.rerank).
        `fits`, when given, says whether an answer made of these hits fits where it is shown
        (render.within: the MCP tool's text within its characters); the next best hits then
        follow the k while they fit, and each hit's context grows, nearest turn first, while it
        does (search.widen). Ranking is the same: the first k are the k asked for."""
        filters = Filters(
            include_echoes=include_echoes,
            since=_instant(since, end_of_day=False),
            until=_instant(until, end_of_day=True),
            role=role,
            session_id=session_id,
            block_types=tuple(block_types) if block_types else None,
        )
        embed = None
        if self._has_vectors():
            embed = self._embed_query
            if self.rerank and not reranker:
                reranker = load_reranker(self.rerank, self.embedder)
        further = 0 if fits is None else search.FURTHER  # the next hits, shown while they fit
        ranking = (filters, radius, self.fusion, reranker, self.hangul)
        reads = search.Reads(self.store)  # the turns read, for widen to read none twice
        hits = search.recall(self.store, embed, query, k, *ranking, further, reads)
        if fits is None:
            return hits
        return search.widen(
            self.store, hits[:k], fits, further=hits[k:], include_echoes=include_echoes, reads=reads
        )

    def get(
        self, session_id: str, from_seq: int | None = None, to_seq: int | None = None
    ) -> list[Turn]:
        """A conversation (or a range of it) as it was written."""
        turns = self.store.get_turns(session_id, from_seq, to_seq)
        if not turns and not self.store.get_turns(session_id, None, None):
            raise NotFound(
                f"no conversation {session_id!r} in {self.location} (see: ireneo sessions)"
            )
        return turns

    def scan(self, session_id: str, needle: str) -> list[Turn]:
        """Turns of one conversation that contain `needle` exactly (case-sensitive)."""
        return [turn for turn in self.get(session_id) if needle in turn.text]

    def sessions(
        self, since: date | datetime | str | None = None, until: date | datetime | str | None = None
    ) -> list[ConversationSummary]:
        return self.store.sessions(
            _instant(since, end_of_day=False), _instant(until, end_of_day=True)
        )

    def status(self) -> Status:
        return self.store.status()

    def resident_bytes(self) -> int:
        """Roughly the RAM this memory holds: search's copies (Store.resident_bytes) and the
        shown turns' words kept for the echo test (echoes.Shown)."""
        return self.store.resident_bytes() + self._shown.size

    # -- forgetting: immediate, whole, audited (docs/privacy.md) ------------------------------
    def forget(
        self, session_id: str, *, actor: str = "api", now: datetime | None = None
    ) -> Forgotten:
        """Forget one conversation: its turns, search entries and vectors, at once."""
        self._refs.clear()
        try:
            return self.store.forget_conversation(session_id, actor=actor, now=now or _now())
        finally:
            self._shown.clear()  # after: a post meanwhile may have read what went

    def forget_all(self, *, actor: str = "api", now: datetime | None = None) -> Forgotten:
        """Forget every conversation and explicit memory; the audit log stays."""
        self._refs.clear()
        try:
            return self.store.forget_all(actor=actor, now=now or _now())
        finally:
            self._shown.clear()

    def forget_older_than(
        self, days: float, *, actor: str = "api", now: datetime | None = None
    ) -> Forgotten:
        """Forget the conversations whose last turn is more than `days` days old."""
        if days <= 0:
            raise ValueError(f"the age must be more than 0 days, not {days}")
        now = now or _now()
        self._refs.clear()
        try:
            return self.store.forget_before(now - timedelta(days=days), actor=actor, now=now)
        finally:
            self._shown.clear()

    def audit_log(self) -> list[AuditEntry]:
        """Every forget done in this memory, oldest first (no text, no conversation ids)."""
        return self.store.audit_log()

    def is_empty(self) -> bool:
        return self.store.is_empty()

    def conversation_ref(self, session_id: str) -> str:
        """The conversation's public name. It never changes (a hash of the memory's salt and the
        id), so it is kept once read, up to REFS_KEPT: recall names each hit's conversation,
        which on PostgreSQL is a round trip each. A forget through this memory drops them."""
        ref = self._refs.get(session_id)
        if ref is None:
            ref = self.store.conversation_ref(session_id)
            if ref is None:
                raise NotFound(f"no conversation {session_id!r}")
            if len(self._refs) >= REFS_KEPT:
                self._refs.clear()
            self._refs[session_id] = ref
        return ref

    def resolve_ref(self, ref: str) -> str | None:
        return self.store.resolve_ref(ref)

    @functools.cached_property
    def memories(self) -> ExplicitMemories:
        """The explicit memories kept beside the conversations (ireneo.memories)."""
        from ireneo.memories import ExplicitMemories

        return ExplicitMemories(self)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _now() -> datetime:
    return datetime.now(UTC)


def _instant(value: date | datetime | str | None, *, end_of_day: bool) -> datetime | None:
    """A filter bound: a date means the whole day (since: its start, until: its end), in UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = date.fromisoformat(value) if len(value) == 10 else _parse_time(value)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a date (YYYY-MM-DD) or an RFC 3339 time") from exc
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    start = datetime.combine(value, time(), tzinfo=UTC)
    return start + timedelta(days=1, seconds=-1) if end_of_day else start


def _parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
