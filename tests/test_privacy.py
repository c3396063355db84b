"""Secret redaction (ireneo.privacy): every real-looking secret of the fixture set becomes its
marker, no ordinary identifier is touched, and no secret reaches the store by any door (server
ingest, indexed files, explicit memories); IRENEO_REDACT=0 turns it off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ireneo import Memory
from ireneo.config import Settings
from ireneo.privacy import redact
from tests.conftest import conversation

FIXTURES = json.loads(
    (Path(__file__).parent / "fixtures" / "secrets.json").read_text(encoding="utf-8")
)
SECRETS = FIXTURES["secrets"]
ORDINARY = FIXTURES["ordinary"]
AWS = "AKIAIOSFODNN7EXAMPLE"
GITHUB = "ghp_R2d9Xk3LmQ7vT0pZ8sWcY1nB4aE6fH5jK2uI"


def secret_part(text: str) -> str:
    """The longest run of non-space characters: in each fixture, the secret or a part of it."""
    return max(text.replace("'", " ").replace('"', " ").split(), key=len)


@pytest.mark.parametrize(
    ("kind", "text"), SECRETS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(SECRETS)]
)
def test_every_kind_of_secret_is_redacted_with_its_marker(kind, text):
    redacted = redact(text)
    assert f"[redacted:{kind}]" in redacted
    # nothing of the secret is left: no run of 8 of its characters survives
    secret = secret_part(text.split("=", 1)[-1]) if "=" in text else secret_part(text)
    tail = secret.rsplit("@", 1)[0].rsplit(":", 1)[-1]
    for start in range(0, max(len(tail) - 8, 0) + 1, 4):
        piece = tail[start : start + 8]
        if len(piece) == 8 and not piece.startswith(("http", "-----", "[redact")):
            assert piece not in redacted, (piece, redacted)


def test_the_fixture_set_covers_many_kinds():
    assert len({kind for kind, _ in SECRETS}) >= 20
    assert len(SECRETS) >= 30


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_identifiers_are_never_redacted(text):
    assert redact(text) == text


def test_the_words_around_a_secret_stay():
    assert redact(f"The key {AWS} opens the backup bucket for MT-4471.") == (
        "The key [redacted:aws-key] opens the backup bucket for MT-4471."
    )
    assert redact("postgres://admin:Tr0ub4dor3x@db.internal:5432/app") == (
        "postgres://admin:[redacted:password]@db.internal:5432/app"
    )


def on_disk(home: Path, needle: str) -> bool:
    return any(
        needle.encode() in p.read_bytes() for p in home.iterdir() if p.name.startswith("memory.db")
    )


def test_indexed_files_and_explicit_memories_are_stored_redacted(tmp_path, home):
    src = conversation(
        tmp_path / "src",
        "keys",
        [f"Here is the CI token {GITHUB} and the key {AWS}.", "Thanks, MT-4471 noted."],
    ).parent
    with Memory(home) as memory:
        memory.index([src])
        memory.memories.store(f"Deploy key for N-11 is {GITHUB}.")
        text = memory.get("keys")[0].text
        assert (
            text == "Here is the CI token [redacted:github-token] and the key [redacted:aws-key]."
        )
        assert "[redacted:github-token]" in memory.memories.all()[0].content
        hits = memory.recall("CI token key", k=1)
        assert "[redacted:github-token]" in hits[0].text
        assert memory.recall("MT-4471", k=1)[0].text == "Thanks, MT-4471 noted."
    assert not on_disk(home, GITHUB) and not on_disk(home, AWS)


def test_redaction_can_be_turned_off(tmp_path, home):
    settings = Settings.from_env({"IRENEO_REDACT": "0"})
    src = conversation(tmp_path / "src", "keys", [f"the key {AWS}"]).parent
    with Memory(home, settings=settings) as memory:
        assert memory.redact is False
        memory.index([src])
        assert memory.get("keys")[0].text == f"the key {AWS}"
    with Memory(home, settings=settings, redact=True) as memory:  # the argument wins
        assert memory.redact is True


def test_the_server_stores_ingested_turns_redacted(tmp_path):
    from tests.conftest_server import RunningServer, make_settings
    from tests.conftest_server import conversation as gateway_conversation

    srv = RunningServer(make_settings(tmp_path / "home"))
    try:
        body = gateway_conversation(
            "with-secret", [f"My AWS key is {AWS}, ticket MT-4471.", "Please rotate it."]
        )
        assert srv.post(body).status_code == 202
        assert srv.post(body).json()["unchanged"] == 2  # posted again: the same redacted turns
        turns = srv.stored_turns("alice", "with-secret")
        assert turns[0].text == "My AWS key is [redacted:aws-key], ticket MT-4471."
        srv.wait_indexed()
        assert "[redacted:aws-key]" in srv.recall("alice", "AWS key MT-4471")
        assert not on_disk(srv.memory_dir("alice"), AWS)
    finally:
        srv.close()


def test_a_server_with_redaction_off_stores_turns_as_sent(tmp_path):
    """IRENEO_REDACT=0 reaches the server's memories through its settings."""
    from tests.conftest_server import RunningServer, make_settings
    from tests.conftest_server import conversation as gateway_conversation

    srv = RunningServer(make_settings(tmp_path / "home", redact=False))
    try:
        body = gateway_conversation("with-secret", [f"My AWS key is {AWS}.", "Rotating it."])
        assert srv.post(body).status_code == 202
        assert srv.stored_turns("alice", "with-secret")[0].text == f"My AWS key is {AWS}."
    finally:
        srv.close()


def test_the_server_compiles_the_detectors_at_start_not_at_the_first_post(tmp_path):
    """Importing detect-secrets and compiling its patterns takes ~0.2 s: the server does it
    while it starts, with the model, so the first conversation posted does not wait for it."""
    from ireneo import privacy
    from tests.conftest_server import RunningServer, make_settings, wait_for

    privacy._patterns.cache_clear()
    srv = RunningServer(make_settings(tmp_path / "home"))
    try:
        wait_for(lambda: privacy._patterns.cache_info().currsize == 1, what="the detectors")
    finally:
        srv.close()
