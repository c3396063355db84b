"""Turns into the store, then vectors for whatever is not embedded yet.

Storing is the durable step: once `store_turns` returns, the turns are on disk and keyword
searchable. Embedding runs after, in batches that each commit, so a run killed half way leaves
the memory consistent and the next run embeds only what is missing.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ireneo.analyze import Hangul, korean_morphemes, terms
from ireneo.embed import Embedder
from ireneo.errors import FormatError
from ireneo.formats import funes_jsonl, jsonl
from ireneo.model import Turn, format_ts
from ireneo.privacy import redact_turn
from ireneo.store import PassageDraft, SourceState, Store, StoreResult

Progress = Callable[[int, int], None]  # (done, total)
EMBED_BATCH = 256
RECENT_VECTORS = 16384  # 25 MB of 384-dimension vectors: 97% of the benchmark's repeats


@dataclass
class IndexReport:
    files_indexed: int = 0
    files_unchanged: int = 0
    turns: StoreResult = field(default_factory=StoreResult)
    embedded: int = 0
    refused: list[FormatError] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "files_indexed": self.files_indexed,
            "files_unchanged": self.files_unchanged,
            "files_refused": len(self.refused),
            "turns_added": self.turns.added,
            "turns_replaced": self.turns.replaced,
            "turns_unchanged": self.turns.unchanged,
            "passages_embedded": self.embedded,
            "refused": [str(error) for error in self.refused],
        }


def find_files(paths: Iterable[str | Path]) -> list[Path]:
    """`.funes.jsonl` files named, or found below named directories, in a stable order."""
    return jsonl.find_files(paths, funes_jsonl.SUFFIX)


def texts_of(files: list[Path]) -> Iterator[str]:
    """The texts of the files' turns, file by file, each file read only when the one before
    is used up (a new memory's model is chosen from the first: Memory.settle_model); a file
    that cannot be read gives none (index_files reports it)."""
    for path in files:
        try:
            turns = funes_jsonl.read_file(path)
        except (FormatError, OSError):
            continue
        yield from (turn.text for turn in turns)


def index_files(
    store: Store, split: Callable[[str], list[str]], files: list[Path], *, redact: bool = True
) -> IndexReport:
    """Store the turns of every changed file; a refused file is reported and nothing of it written."""
    report = IndexReport()
    for path in files:
        stat = path.stat()
        known = store.source_state(str(path))
        if known and (known.size, known.mtime_ns) == (stat.st_size, stat.st_mtime_ns):
            report.files_unchanged += 1
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        source = SourceState(str(path), stat.st_size, stat.st_mtime_ns, digest)
        if known and known.sha256 == digest:
            store.write_turns([], source)  # touched, not changed: remember the new mtime only
            report.files_unchanged += 1
            continue
        try:
            turns = funes_jsonl.read_file(path)
        except FormatError as error:
            report.refused.append(error)
            continue
        report.turns += store_turns(store, split, turns, source, redact=redact)
        report.files_indexed += 1
    return report


def store_turns(
    store: Store,
    split: Callable[[str], list[str]],
    turns: list[Turn],
    source: SourceState | None = None,
    *,
    redact: bool = True,
    echo: Callable[[Turn], bool] | None = None,
) -> StoreResult:
    """Store turns (new, edited or unchanged) in one transaction; only changed ones are re-cut.

    With `redact`, secrets are replaced by markers first (ireneo.privacy): the hash is of the
    redacted turn, so a conversation posted again is unchanged, and no secret reaches the store.
    """
    stored = store.turn_hashes([(t.session_id, t.turn_uuid) for t in turns])
    hangul = remember_hangul(store)
    rows, echoes = [], set()
    for turn in turns:
        digest = content_hash(turn)
        # A turn stored as it comes held no secret: nothing to redact (the gateway posts the
        # whole conversation each time, so this is most turns). Others are redacted, then compared.
        if redact and stored.get((turn.session_id, turn.turn_uuid)) != digest:
            redacted = redact_turn(turn)
            if redacted is not turn:
                turn, digest = redacted, content_hash(redacted)
        unchanged = stored.get((turn.session_id, turn.turn_uuid)) == digest
        rows.append((turn, digest, [] if unchanged else passages(turn, split, hangul)))
        if not unchanged and echo is not None and echo(turn):
            echoes.add((turn.session_id, turn.turn_uuid))
    return store.write_turns(rows, source, frozenset(echoes))


def hangul_of(store: Store) -> Hangul:
    """How a memory reads Korean: as it records, else by bigrams if it holds anything (it was
    written before ireneo read Korean by morphemes) or Kiwi is not installed (the `ko` extra),
    else by morphemes. `remember_hangul` records it."""
    return _hangul(store, store.get_meta("hangul"))


def remember_hangul(store: Store) -> Hangul:
    """`hangul_of(store)`, recorded in the memory before its first terms are written."""
    recorded = store.get_meta("hangul")
    hangul = _hangul(store, recorded)
    if recorded is None:
        store.set_meta("hangul", hangul)
    return hangul


def _hangul(store: Store, recorded: str | None) -> Hangul:
    if recorded == "morphemes" or recorded == "bigrams":
        return recorded
    # an explicit memory records the model as it is stored, a conversation at its embedding
    written = store.get_meta("model") is not None or not store.is_empty()
    return "bigrams" if written or not korean_morphemes() else "morphemes"


def passages(
    turn: Turn, split: Callable[[str], list[str]], hangul: Hangul = "morphemes"
) -> list[PassageDraft]:
    """Every block with text, cut to the embedder's input length, with its search terms."""
    drafts = []
    for block in turn.blocks:
        if not block.text.strip():
            continue
        for piece in split(block.text):
            drafts.append(PassageDraft(block.block_type, piece, " ".join(terms(piece, hangul))))
    return drafts


def content_hash(turn: Turn) -> str:
    payload = [turn.seq, format_ts(turn.ts), turn.role, turn.harness]
    payload += [[b.block_type, b.text, b.tool_name] for b in turn.blocks]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


def embed_pending(store: Store, embedder: Embedder, progress: Progress | None = None) -> int:
    """Embed every passage that has no vector yet; returns how many were embedded.

    Batches follow passage ids. A passage stored meanwhile under an id already passed (SQLite
    hands out again the ids of the newest rows once they are deleted) waits for the next call,
    which the write that stored it asks for (server/indexer.py). The store then saves its
    in-memory copies for the next process, if enough is new (Store.save_copies).
    """
    total = store.count_pending()
    done = 0
    recent = RecentVectors(RECENT_VECTORS)
    after = 0
    while True:
        batch = store.pending_passages(EMBED_BATCH, after)
        if not batch:
            store.save_copies()
            return done
        ids = [pid for pid, _ in batch]
        after = ids[-1]
        store.put_vectors(ids, recent.embed(embedder, [text for _, text in batch]))
        done += len(batch)
        if progress:
            progress(done, max(total, done))


class RecentVectors:
    """The vectors of the last `size` texts embedded, given again to a text that repeats one.

    Chats repeat themselves word for word (thanks and greetings, a tool's boilerplate, a system
    reminder): 18% of the benchmark's passages at 10,000 conversations. A text's vector does not
    depend on the texts embedded beside it (OnnxEmbedder.minilm_q8 runs one text per call for
    that), so a repeat needs no inference.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def embed(self, embedder: Embedder, texts: list[str]) -> np.ndarray:
        new = list(dict.fromkeys(text for text in texts if text not in self._vectors))
        for text, vector in zip(new, embedder.embed_passages(new), strict=True):
            self._vectors[text] = vector.copy()  # a row alone, not a view that keeps its batch
        vectors = np.stack([self._vectors[text] for text in texts])
        for text in texts:
            self._vectors.move_to_end(text)
        while len(self._vectors) > self._size:
            self._vectors.popitem(last=False)
        return vectors
