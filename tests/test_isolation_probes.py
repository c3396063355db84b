"""Isolation under attack: alice (and made-up users) try every door into bob's memory.

bob holds conversations and an explicit memory full of marker strings found nowhere else. A probe
leaks if any of bob's markers appears in an answer to someone else, if a refused credential is
let in, or if bob's memory changes. The probes are counted; the count of leaks must be 0.
Everything goes through the real HTTP routes and a real MCP client.
"""

from __future__ import annotations

import base64
import hashlib
import json
import string
import time

import jwt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ireneo.server.memories import user_key
from ireneo.server.tools import UNKNOWN_MEMORY, UNKNOWN_REF
from tests.conftest_hostile import McpSession, ProbeLedger, memory_snapshot
from tests.conftest_server import (
    ISSUER,
    JWT_SECRET,
    RunningServer,
    conversation,
    good_claims,
    make_settings,
    raw_token,
    refs_in,
)

BOB_MARKERS = ["BOBSECRET-7731", "MT-5120", "zebrafinch", "Tomasz", "BOBMEM-4242", "quokkaroo"]
BOB_TEXTS = [
    "Shift handover: motor P-7 logged as ticket MT-5120, code word BOBSECRET-7731.",
    "Noted. MT-5120 blocks the South hub upgrade; zebrafinch is the site nickname.",
    "Owner of the follow-up is Tomasz, due Friday.",
]
ALICE_TEXTS = [
    "Shift handover: motor K-2 logged as ticket MT-4471.",
    "Noted. MT-4471 blocks the N-11 upgrade.",
    "Owner of the follow-up is Priya, due Thursday.",
]
INJECTIONS = [
    '"',
    '""',
    "*",
    "MT*",
    "NEAR(",
    "NEAR(MT-5120 BOBSECRET-7731)",
    "OR",
    "AND",
    "NOT",
    "MT-4471 OR 1=1",
    "MT-4471' OR '1'='1",
    "'; DROP TABLE turns; --",
    "'); DELETE FROM passages; --",
    '" OR "" = "',
    'MT-4471" OR "MT-5120',
    "terms:MT",
    "{terms}: zebrafinch",
    "^MT",
    "passages_fts MATCH '*'",
    "1 UNION SELECT text FROM passages",
    "\\",
    "%",
    "_",
    "\x00",
    "MT-5120",
    "BOBSECRET-7731 zebrafinch Tomasz quokkaroo",
    "bob",
    "../" + user_key("bob"),
    user_key("bob"),
    "x" * 5000,
]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    srv = RunningServer(make_settings(tmp_path_factory.mktemp("isolation")))
    for user, texts in (("bob", BOB_TEXTS), ("alice", ALICE_TEXTS)):
        assert srv.post(conversation("handover-1", texts, user=user)).status_code == 202
    srv.wait_indexed()
    bob = McpSession(f"{srv.url}/mcp", srv.token("bob"))
    stored = bob.text(
        "store_memory", content="Bob keeps the spare key BOBMEM-4242 under the quokkaroo mat."
    )
    bob_memory_id = stored.split()[-1].rstrip(".")
    assert bob_memory_id.startswith("mem-")
    bob_ref = refs_in(bob.text("recall_my_conversations", query="MT-5120"))[0]
    alice = McpSession(f"{srv.url}/mcp", srv.token("alice"))
    ledger = ProbeLedger()
    before = memory_snapshot(srv, user_key("bob"))
    yield {
        "server": srv,
        "alice": alice,
        "bob": bob,
        "bob_ref": bob_ref,
        "bob_memory_id": bob_memory_id,
        "ledger": ledger,
    }
    # the module's verdict: bob's memory is as it was, and nothing leaked
    after = memory_snapshot(srv, user_key("bob"))
    ledger.record("bob's memory unchanged", after != before)
    print(f"\nisolation probes: {ledger.total} ({dict(ledger.probes)}), leaks: {len(ledger.leaks)}")
    alice.close()
    bob.close()
    srv.close()
    assert ledger.leaks == []


def assert_no_leak(world, kind: str, answer: str) -> None:
    world["ledger"].check(kind, answer, BOB_MARKERS)
    assert not any(marker in answer for marker in BOB_MARKERS), (kind, answer[:300])


# -- queries that try to break out of the caller's memory -----------------------------------


@pytest.mark.parametrize("query", INJECTIONS)
def test_injected_queries_find_nothing_of_bobs(world, query):
    alice = world["alice"]
    answer = alice.text("recall_my_conversations", query=query)
    assert_no_leak(world, "recall query", answer)
    answer = alice.text("search_memories", query=query)
    assert_no_leak(world, "search_memories query", answer)


def test_injected_queries_still_find_alices_own_turns(world):
    answer = world["alice"].text("recall_my_conversations", query="MT-4471 OR 1=1")
    assert "MT-4471" in answer
    answer = world["alice"].text("recall_my_conversations", query='MT-4471" OR "MT-5120')
    assert "MT-4471" in answer
    assert_no_leak(world, "recall query", answer)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    query=st.one_of(
        st.text(max_size=60),
        st.lists(
            st.sampled_from([*INJECTIONS[:24], "MT", "5120", "P-7", "South", "hub", "Friday"]),
            min_size=1,
            max_size=5,
        ).map(" ".join),
    )
)
def test_generated_queries_find_nothing_of_bobs(world, query):
    answer = world["alice"].text("recall_my_conversations", query=query)
    assert_no_leak(world, "generated recall query", answer)


# -- another user's references and ids ---------------------------------------------------------


def ref_variants(ref: str) -> list[str]:
    return [
        ref,
        ref.upper(),
        f" {ref} ",
        ref[:6],
        ref + "%",
        ref[:-1] + "*",
        f"{ref}' OR '1'='1",
        f"' OR ref = '{ref}",
        "%",
        "*",
        "handover-1",
        f"../{user_key('bob')}/{ref}",
    ]


@pytest.mark.parametrize("span", [(None, None), (0, 2), (-1, 10**9), (2, 0)])
def test_bobs_ref_reads_nothing_for_alice(world, span):
    alice = world["alice"]
    for ref in ref_variants(world["bob_ref"]):
        arguments: dict = {"ref": ref}
        if span[0] is not None:
            arguments.update(from_turn=span[0], to_turn=span[1])
        answer = alice.text("read_conversation", **arguments)
        assert_no_leak(world, "read_conversation with bob's ref", answer)
        assert answer == UNKNOWN_REF or "MT-4471" in answer or "no turns" in answer


def test_bobs_memory_id_cannot_be_deleted_or_read_by_alice(world):
    alice, bob_id = world["alice"], world["bob_memory_id"]
    for memory_id in (bob_id, bob_id.upper(), f" {bob_id} ", f"{bob_id}' OR '1'='1", "%", "*"):
        answer = alice.text("delete_memory", id=memory_id)
        assert answer == UNKNOWN_MEMORY
        assert_no_leak(world, "delete_memory with bob's id", answer)
    answer = world["bob"].text("search_memories", query="spare key BOBMEM-4242")
    assert bob_id in answer  # still there


def test_alice_storing_bobs_words_writes_only_to_alice(world):
    answer = world["alice"].text(
        "store_memory", content="Bob keeps the spare key BOBMEM-4242 under the quokkaroo mat!"
    )
    world["ledger"].record("store_memory of bob's words", world["bob_memory_id"] in answer, answer)
    assert world["bob_memory_id"] not in answer


# -- who the caller is: crafted user ids, forged tokens ---------------------------------------


def prefix_twin(user: str, hex_chars: int = 5) -> str:
    """Another user id whose memory key starts with the same hex characters as `user`'s."""
    want = user_key(user)[:hex_chars]
    for n in range(50_000_000):
        candidate = f"twin-{n}"
        if hashlib.sha256(candidate.encode()).hexdigest()[:hex_chars] == want:
            return candidate
    raise AssertionError("no twin found")


CRAFTED_USERS = [
    "../bob",
    "bob/../bob",
    "./bob",
    "bob/",
    "bob ",
    " bob",
    "Bob",
    "BOB",
    "b\u043eb",  # Cyrillic o
    "\uff42\uff4f\uff42",  # full-width bob
    "b\u200bob",  # zero-width space
    "bo\u0301b",  # combining accent
    "bob" + " " * 250,
    "b" * 256,
    user_key("bob"),
    "users/" + user_key("bob"),
    "*",
    "%",
    "bob' OR '1'='1",
]


@pytest.fixture(scope="module")
def crafted_users(world):
    return [*CRAFTED_USERS, prefix_twin("bob")]


def test_crafted_user_ids_in_tokens_see_nothing_of_bobs(world, crafted_users):
    srv = world["server"]
    for user in crafted_users:
        session = McpSession(f"{srv.url}/mcp", srv.token(user))
        try:
            for query in ("MT-5120 BOBSECRET-7731", "zebrafinch Tomasz"):
                assert_no_leak(
                    world,
                    "crafted sub: recall",
                    session.text("recall_my_conversations", query=query),
                )
            answer = session.text("read_conversation", ref=world["bob_ref"])
            assert_no_leak(world, "crafted sub: read_conversation", answer)
            answer = session.text("search_memories", query="BOBMEM-4242 quokkaroo")
            assert_no_leak(world, "crafted sub: search_memories", answer)
            answer = session.text("delete_memory", id=world["bob_memory_id"])
            assert answer == UNKNOWN_MEMORY
            world["ledger"].record("crafted sub: delete_memory", answer != UNKNOWN_MEMORY)
        finally:
            session.close()


def test_crafted_user_ids_in_ingest_write_apart_from_bob(world, crafted_users):
    srv = world["server"]
    before = memory_snapshot(srv, user_key("bob"))
    for n, user in enumerate(crafted_users):
        body = conversation(
            "handover-1", [f"Crafted write CRAFTED-{n} into handover-1."], user=user
        )
        response = srv.post(body)
        assert response.status_code == 202, (user, response.text)
        assert memory_snapshot(srv, user_key("bob")) == before
        world["ledger"].record(
            "crafted user: ingest", memory_snapshot(srv, user_key("bob")) != before
        )
    bob_answer = world["bob"].text("recall_my_conversations", query="Crafted write CRAFTED")
    leaked = [n for n in range(len(crafted_users)) if f"CRAFTED-{n}" in bob_answer]
    world["ledger"].record("crafted writes reach bob", bool(leaked), bob_answer[:200])
    assert not leaked
    # each crafted user has a memory of its own, named by the hash, inside the users directory
    users_dir = srv.settings.users_dir.resolve()
    for user in crafted_users:
        path = srv.memory_dir(user).resolve()
        assert path.parent == users_dir and path.name == user_key(user)


@pytest.mark.parametrize(
    "user",
    ["", " ", "\x00", "bob\x00", "bob\x00evil", "b" * 257, "bob\n", "\ud800"],
    ids=["empty", "blank", "nul", "bob-nul", "nul-inside", "too-long", "newline", "surrogate"],
)
def test_impossible_user_ids_in_ingest_are_refused(world, user):
    body = json.dumps(conversation("handover-1", ["Refused write."], user=user)).encode()
    response = world["server"].post(content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["field"] == "user"
    world["ledger"].record("impossible user: ingest", response.status_code != 400)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged_tokens() -> dict[str, str]:
    bob = good_claims("bob")
    payload = b64(json.dumps(bob).encode())
    return {
        "wrong key": raw_token(bob, secret="wrong-secret-" + "0" * 40),
        "alg none": jwt.encode(bob, None, algorithm="none"),
        "alg none, empty signature": b64(b'{"alg":"none","typ":"JWT"}') + f".{payload}.",
        "alg None spelled": b64(b'{"alg":"None"}') + f".{payload}.",
        "alg none, good signature kept": b64(b'{"alg":"none"}')
        + "."
        + payload
        + "."
        + raw_token(bob).split(".")[2],
        "HS512 with the secret": raw_token(bob, algorithm="HS512"),
        "expired": raw_token(good_claims("bob", exp=int(time.time()) - 5)),
        "not yet valid": raw_token(good_claims("bob", nbf=int(time.time()) + 3600)),
        "other issuer": raw_token(good_claims("bob", iss=ISSUER + ".evil")),
        "other audience": raw_token(good_claims("bob", aud="other")),
        "sub as a list": raw_token(good_claims(sub=["bob"])),
        "sub as a number": raw_token(good_claims(sub=7)),
        "empty sub": raw_token(good_claims(sub="")),
        "secret as a prefix": raw_token(bob, secret=JWT_SECRET[:-1]),
        "bare payload": payload,
        "garbage": "".join(string.ascii_letters),
    }


@pytest.mark.parametrize("name", list(forged_tokens()))
def test_forged_tokens_are_refused(world, name):
    token = forged_tokens()[name]
    srv = world["server"]
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "authorization": f"Bearer {token}",
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "recall_my_conversations", "arguments": {"query": "MT-5120"}},
    }
    response = srv.http.post("/mcp", headers=headers, json=body)
    world["ledger"].record("forged token", response.status_code != 401, name)
    assert response.status_code == 401, name
    assert_no_leak(world, "forged token answer", response.text)
