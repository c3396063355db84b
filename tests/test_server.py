"""The recall server over real HTTP on 127.0.0.1: ingest, isolation, auth, fail-soft tools, logs.

One server is shared by the module (every test uses its own user names); tests that need other
settings start their own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

import httpx2
import jwt
import pytest
from fastmcp import Client
from fastmcp.server.auth.providers.jwt import RSAKeyPair
from mcp.shared.exceptions import MCPError

from ireneo.config import Settings
from ireneo.server.app import ConfigError, create_app
from ireneo.server.logs import JsonFormatter
from ireneo.server.memories import user_key
from ireneo.server.tools import EMPTY_RANGE, NO_MEMORY, NOTHING_RELEVANT, UNAVAILABLE, UNKNOWN_REF
from tests.conftest_server import (
    AUDIENCE,
    INGEST_KEY,
    ISSUER,
    JWT_SECRET,
    RunningServer,
    conversation,
    good_claims,
    make_settings,
    raw_token,
    refs_in,
)

ALICE_TEXTS = [
    "Shift handover: the pump bearing noise on motor K-2 is logged as ticket MT-4471.",
    "Noted. MT-4471 must be closed before the N-11 upgrade can be scheduled.",
    "We decided to go ahead with the N-11 upgrade at 91% load.",
    "Owner of the follow-up is Priya, due Thursday.",
]
BOB_TEXTS = [
    "Shift handover: the pump bearing noise on motor P-7 is logged as ticket MT-5120.",
    "Noted. MT-5120 must be closed before the South hub upgrade can be scheduled.",
    "We decided to go ahead with the South hub upgrade at 88% load.",
    "Owner of the follow-up is Tomas, due Friday.",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = RunningServer(make_settings(tmp_path_factory.mktemp("server-home")))
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def alice_and_bob(server):
    """alice's and bob's conversations, same words, different identifiers, same conversation id."""
    for user, texts in (("alice", ALICE_TEXTS), ("bob", BOB_TEXTS)):
        response = server.post(conversation("handover-1", texts, user=user))
        assert response.status_code == 202, response.text
    server.wait_indexed()
    return server


def mcp_status(server: RunningServer, token: str | None) -> int:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    return server.http.post("/mcp", headers=headers, json=body).status_code


async def call_tool_result(server: RunningServer, token: str, tool: str, **arguments):
    async with Client(f"{server.url}/mcp", auth=token, timeout=30) as client:
        return await client.call_tool(tool, arguments, raise_on_error=False)


# -- isolation ------------------------------------------------------------------------------


def test_alice_never_sees_bobs_conversations(alice_and_bob):
    srv = alice_and_bob
    text = srv.recall("alice", "motor P-7 ticket MT-5120 South hub Tomas")
    assert "P-7" not in text and "MT-5120" not in text and "Tomas" not in text
    assert "K-2" in text or "MT-4471" in text or text == NOTHING_RELEVANT


def test_bob_never_sees_alices_conversations(alice_and_bob):
    srv = alice_and_bob
    text = srv.recall("bob", "motor K-2 ticket MT-4471 N-11 Priya")
    assert (
        "K-2" not in text and "MT-4471" not in text and "N-11" not in text and "Priya" not in text
    )
    assert "P-7" in text or "MT-5120" in text or text == NOTHING_RELEVANT


def test_each_user_finds_their_own_identifiers(alice_and_bob):
    srv = alice_and_bob
    alice = srv.recall("alice", "MT-4471 K-2")
    assert "MT-4471" in alice
    assert alice.startswith("[1] 2026-10-08")
    bob = srv.recall("bob", "MT-5120 P-7")
    assert "MT-5120" in bob


def test_recall_shows_refs_not_session_ids_or_paths(alice_and_bob):
    srv = alice_and_bob
    text = srv.recall("alice", "N-11 upgrade decision")
    assert refs_in(text)
    assert "handover-1" not in text
    assert str(srv.settings.home) not in text
    assert user_key("alice") not in text


def test_a_ref_of_bob_reads_like_an_unknown_ref_for_alice(alice_and_bob):
    srv = alice_and_bob
    bob_ref = refs_in(srv.recall("bob", "MT-5120"))[0]
    alice_ref = refs_in(srv.recall("alice", "MT-4471"))[0]
    assert bob_ref != alice_ref  # same conversation id, different memories
    alice = srv.token("alice")
    assert srv.call(alice, "read_conversation", ref=bob_ref) == UNKNOWN_REF
    assert srv.call(alice, "read_conversation", ref="0123456789ab") == UNKNOWN_REF
    assert srv.call(alice, "read_conversation", ref=bob_ref, from_turn=0, to_turn=3) == UNKNOWN_REF
    bob_text = srv.call(srv.token("bob"), "read_conversation", ref=bob_ref)
    assert "MT-5120" in bob_text and "MT-4471" not in bob_text


def test_read_conversation_reads_around_a_hit(alice_and_bob):
    srv = alice_and_bob
    alice = srv.token("alice")
    ref = refs_in(srv.recall("alice", "MT-4471"))[0]
    whole = srv.call(alice, "read_conversation", ref=ref)
    for text in ALICE_TEXTS:
        assert text in whole
    part = srv.call(alice, "read_conversation", ref=ref, from_turn=1, to_turn=2)
    assert ALICE_TEXTS[1] in part and ALICE_TEXTS[2] in part
    assert ALICE_TEXTS[0] not in part and ALICE_TEXTS[3] not in part
    assert "handover-1" not in whole
    assert srv.call(alice, "read_conversation", ref=ref, from_turn=40, to_turn=50) == EMPTY_RANGE


def test_read_conversation_cuts_long_conversations_and_says_where_to_go_on(tmp_path):
    srv = RunningServer(make_settings(tmp_path, max_result_chars=600))
    try:
        texts = [f"Turn {i}: " + "the compressor log says nothing new. " * 5 for i in range(12)]
        assert srv.post(conversation("long-1", texts, user="dora")).status_code == 202
        dora = srv.token("dora")
        ref = refs_in(srv.recall("dora", "compressor"))[0]
        text = srv.call(dora, "read_conversation", ref=ref)
        assert len(text) <= 600
        assert f"read_conversation with ref={ref} from_turn=" in text
        next_turn = int(text.rsplit("from_turn=", 1)[1].rstrip("]"))
        more = srv.call(dora, "read_conversation", ref=ref, from_turn=next_turn)
        assert f"Turn {next_turn}:" in more
    finally:
        srv.close()


# -- ingest ---------------------------------------------------------------------------------


def test_ingest_answers_202_once_stored(server):
    body = conversation(
        "c-stored", ["Budget case: hyperbolic, q0 1,500 units/d, Di 0.25/yr."], user="erin"
    )
    response = server.post(body)
    assert response.status_code == 202
    assert response.json()["stored"] == "c-stored"
    assert [t.text for t in server.stored_turns("erin", "c-stored")] == [body["turns"][0]["text"]]
    # keyword-searchable at once, before any index run
    assert "hyperbolic" in server.recall("erin", "hyperbolic q0")


def test_reposting_is_harmless_and_a_longer_post_adds_only_new_turns(server):
    texts = ["First message about line L-3.", "Answer about L-3.", "Follow-up on L-3."]
    first = server.post(conversation("c-repost", texts[:2], user="frank"))
    assert first.json() | {} == {"stored": "c-repost", "added": 2, "replaced": 0, "unchanged": 0}
    server.wait_indexed()
    runs = server.state.indexer.runs[user_key("frank")]
    again = server.post(conversation("c-repost", texts[:2], user="frank"))
    assert again.status_code == 202
    assert again.json() == {"stored": "c-repost", "added": 0, "replaced": 0, "unchanged": 2}
    server.wait_indexed()
    assert server.state.indexer.runs[user_key("frank")] == runs  # nothing new, no index run
    longer = server.post(conversation("c-repost", texts, user="frank"))
    assert longer.json() == {"stored": "c-repost", "added": 1, "replaced": 0, "unchanged": 2}
    assert [t.text for t in server.stored_turns("frank", "c-repost")] == texts


def test_a_bad_ingest_key_gets_401_and_stores_nothing(server):
    body = conversation("c-401", ["secret plans"], user="mallory")
    for key in (
        None,
        "",
        "wrong-key-wrong-key-wrong",
        INGEST_KEY + "x",
        INGEST_KEY[:-1],
        "ключ".encode(),
    ):
        response = server.post(body, key=key)
        assert response.status_code == 401, key
        assert "error" in response.json()
    assert not server.memory_dir("mallory").exists()


def test_the_ingest_key_is_checked_before_the_body_is_read(server):
    response = server.post(key="nope", content=b"x" * (2 * 1024 * 1024))
    assert response.status_code == 401


BAD_BODIES = [
    (
        "user",
        {
            "conversation_id": "c-400",
            "turns": [{"ts": "2026-10-08T09:00:00Z", "role": "user", "text": "hi"}],
        },
    ),
    (
        "user",
        {
            "user": " ",
            "conversation_id": "c-400",
            "turns": [{"ts": "2026-10-08T09:00:00Z", "role": "user", "text": "hi"}],
        },
    ),
    (
        "conversation_id",
        {
            "user": "gina",
            "conversation_id": "../../etc",
            "turns": [{"ts": "2026-10-08T09:00:00Z", "role": "user", "text": "hi"}],
        },
    ),
    (
        "conversation_id",
        {"user": "gina", "turns": [{"ts": "2026-10-08T09:00:00Z", "role": "user", "text": "hi"}]},
    ),
    ("turns", {"user": "gina", "conversation_id": "c-400", "turns": "hi"}),
    ("turns", {"user": "gina", "conversation_id": "c-400"}),
    (
        "turns[0].ts",
        {
            "user": "gina",
            "conversation_id": "c-400",
            "turns": [{"ts": "monday", "role": "user", "text": "hi"}],
        },
    ),
    (
        "turns[0].ts",
        {"user": "gina", "conversation_id": "c-400", "turns": [{"role": "user", "text": "hi"}]},
    ),
    (
        "turns[0].role",
        {
            "user": "gina",
            "conversation_id": "c-400",
            "turns": [{"ts": "2026-10-08T09:00:00Z", "text": "hi"}],
        },
    ),
    (
        "turns[0].text",
        {
            "user": "gina",
            "conversation_id": "c-400",
            "turns": [{"ts": "2026-10-08T09:00:00Z", "role": "user", "text": ""}],
        },
    ),
    (
        "turns[0].text",
        {
            "user": "gina",
            "conversation_id": "c-400",
            "turns": [{"ts": "2026-10-08T09:00:00Z", "role": "user", "text": 5}],
        },
    ),
    (
        "turns[0].body",
        {
            "user": "gina",
            "conversation_id": "c-400",
            "turns": [{"ts": "2026-10-08T09:00:00Z", "role": "user", "body": "hi"}],
        },
    ),
    (
        "turns[1]",
        {
            "user": "gina",
            "conversation_id": "c-400",
            "turns": [{"ts": "2026-10-08T09:00:00Z", "role": "user", "text": "hi"}, "oops"],
        },
    ),
    (
        "turns[1].id",
        {
            "user": "gina",
            "conversation_id": "c-400",
            "turns": [
                {"id": "a", "ts": "2026-10-08T09:00:00Z", "role": "user", "text": "hi"},
                {"id": "a", "ts": "2026-10-08T09:01:00Z", "role": "assistant", "text": "hello"},
            ],
        },
    ),
    (
        "turns[2].ts",
        {
            "user": "gina",
            "conversation_id": "c-400",
            "turns": [
                {"ts": "2026-10-08T09:00:00Z", "role": "user", "text": "good one"},
                {"ts": "2026-10-08T09:01:00Z", "role": "assistant", "text": "good two"},
                {"ts": "2026-10-08T09:02:00", "role": "user", "text": "naive time"},
            ],
        },
    ),
]


@pytest.mark.parametrize(
    ("where", "body"), BAD_BODIES, ids=[f"{i}-{w}" for i, (w, _) in enumerate(BAD_BODIES)]
)
def test_a_bad_body_gets_400_naming_the_field_and_stores_nothing(server, where, body):
    response = server.post(body)
    assert response.status_code == 400, response.text
    answer = response.json()
    assert answer["field"] == where
    assert answer["error"].startswith(where)
    assert not server.memory_dir("gina").exists()


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe", b"[1, 2]", b""])
def test_a_body_that_is_not_a_json_object_gets_400(server, content):
    response = server.post(content=content, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["field"] == "body"


def test_a_bad_turn_in_an_existing_conversation_changes_nothing(server):
    good = conversation("c-partial", ["Ticket MT-7001 opened.", "Noted MT-7001."], user="hank")
    assert server.post(good).status_code == 202
    bad = conversation(
        "c-partial", ["Ticket MT-7001 opened.", "Edited MT-7001.", "new"], user="hank"
    )
    bad["turns"][2]["ts"] = "not a time"
    assert server.post(bad).status_code == 400
    assert [t.text for t in server.stored_turns("hank", "c-partial")] == [
        t["text"] for t in good["turns"]
    ]


def test_a_body_past_the_limit_gets_413_and_stores_nothing(server):
    big = conversation("c-413", ["x" * (1024 * 1024 + 10)], user="ivan")
    response = server.post(big)
    assert response.status_code == 413
    assert not server.memory_dir("ivan").exists()


def test_the_limit_holds_without_content_length(server):
    def chunks():
        payload = json.dumps(
            conversation("c-413b", ["y" * (1024 * 1024 + 10)], user="ivan")
        ).encode()
        for start in range(0, len(payload), 64 * 1024):
            yield payload[start : start + 64 * 1024]

    response = server.post(content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert not server.memory_dir("ivan").exists()


def test_a_body_just_under_the_limit_is_accepted(tmp_path):
    srv = RunningServer(make_settings(tmp_path, max_body_bytes=4096))
    try:
        body = conversation("c-size", ["z" * 3000], user="jane")
        size = len(json.dumps(body).encode())
        assert size < 4096
        assert srv.post(body).status_code == 202
        body = conversation("c-size2", ["z" * 4100], user="jane")
        assert srv.post(body).status_code == 413
    finally:
        srv.close()


def test_memory_directories_are_named_by_a_hash_of_the_user(server):
    user = "kate@example.com"
    assert server.post(conversation("c-hash", ["hello K-9"], user=user)).status_code == 202
    names = [p.name for p in server.settings.users_dir.iterdir()]
    assert user_key(user) in names
    assert not any("kate" in name for name in names)
    for path in server.settings.home.rglob("*"):
        assert "kate" not in path.name


# -- auth -----------------------------------------------------------------------------------


def test_a_good_token_lists_the_tools(server):
    assert mcp_status(server, raw_token(good_claims())) == 200


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(None, id="missing"),
        pytest.param("not-a-jwt", id="garbage"),
        pytest.param(raw_token(good_claims(exp=int(time.time()) - 60)), id="expired"),
        pytest.param(raw_token(good_claims(aud="someone-else")), id="wrong-audience"),
        pytest.param(raw_token(good_claims(aud=None)), id="no-audience"),
        pytest.param(raw_token(good_claims(iss="https://evil.test")), id="wrong-issuer"),
        pytest.param(raw_token(good_claims(iss=None)), id="no-issuer"),
        pytest.param(raw_token(good_claims(sub=None)), id="no-subject"),
        pytest.param(raw_token(good_claims(sub="")), id="blank-subject"),
        pytest.param(raw_token(good_claims(exp=None)), id="no-expiry"),
        pytest.param(
            raw_token(good_claims(), secret="another-secret-0123456789abcdef01"), id="wrong-key"
        ),
        pytest.param(raw_token(good_claims(), algorithm="HS512"), id="wrong-algorithm"),
        pytest.param(jwt.encode(good_claims(), None, algorithm="none"), id="alg-none"),
    ],
)
def test_a_bad_token_is_refused(server, token):
    assert mcp_status(server, token) == 401


def test_a_tampered_token_is_refused(server):
    token = raw_token(good_claims("alice"))
    header, payload, signature = token.split(".")
    import base64

    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = "bob"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert mcp_status(server, f"{header}.{forged}.{signature}") == 401
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    assert mcp_status(server, f"{header}.{payload}.{flipped}") == 401


def test_the_official_client_is_refused_with_a_bad_token(server):
    with pytest.raises(MCPError):
        server.call(
            raw_token(good_claims(exp=int(time.time()) - 5)), "recall_my_conversations", query="x"
        )


def test_the_user_comes_from_the_token_not_an_argument(alice_and_bob):
    srv = alice_and_bob
    # an extra argument naming another user is refused, never used
    result = asyncio.run(
        call_tool_result(
            srv, srv.token("alice"), "recall_my_conversations", query="MT-5120", user="bob"
        )
    )
    assert result.is_error
    assert "MT-5120" not in result.content[0].text


def test_ingest_is_not_opened_by_a_bearer_token(server):
    body = conversation("c-bearer", ["hello"], user="leo")
    token = raw_token(good_claims("leo"))
    response = server.post(body, key=None, headers={"authorization": f"Bearer {token}"})
    assert response.status_code == 401


def test_rs256_tokens_with_a_public_key(tmp_path):
    keys = RSAKeyPair.generate()
    settings = make_settings(tmp_path, jwt_secret=None, jwt_public_key=keys.public_key)
    srv = RunningServer(settings)
    try:
        good = keys.create_token(subject="alice", issuer=ISSUER, audience=AUDIENCE)
        assert mcp_status(srv, good) == 200
        assert srv.call(good, "recall_my_conversations", query="anything") == NO_MEMORY
        other = RSAKeyPair.generate().create_token(
            subject="alice", issuer=ISSUER, audience=AUDIENCE
        )
        assert mcp_status(srv, other) == 401
        assert mcp_status(srv, raw_token(good_claims())) == 401  # HS256 is not accepted
        wrong_aud = keys.create_token(subject="alice", issuer=ISSUER, audience="other")
        assert mcp_status(srv, wrong_aud) == 401
    finally:
        srv.close()


def test_rs256_tokens_with_a_jwks_url(tmp_path):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from joserfc import jwk

    keys = RSAKeyPair.generate()
    public = jwk.import_key(keys.public_key, "RSA").as_dict(private=False)
    public.update({"kid": "k1", "use": "sig", "alg": "RS256"})
    payload = json.dumps({"keys": [public]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    jwks = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=jwks.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{jwks.server_address[1]}/.well-known/jwks.json"
    srv = RunningServer(make_settings(tmp_path, jwt_secret=None, jwks_url=url))
    try:
        good = keys.create_token(subject="alice", issuer=ISSUER, audience=AUDIENCE, kid="k1")
        assert mcp_status(srv, good) == 200
        forged = RSAKeyPair.generate().create_token(
            subject="alice", issuer=ISSUER, audience=AUDIENCE, kid="k1"
        )
        assert mcp_status(srv, forged) == 401
    finally:
        srv.close()
        jwks.shutdown()


# -- fail soft ------------------------------------------------------------------------------


def test_no_memory_yet(server):
    assert server.recall("newcomer", "what did we decide") == NO_MEMORY
    assert not server.memory_dir("newcomer").exists()  # asking creates nothing


def test_nothing_relevant(tmp_path):
    # before the first index run search is lexical only: a query of unknown words finds nothing
    srv = RunningServer(make_settings(tmp_path, index_debounce=300))
    try:
        assert (
            srv.post(
                conversation("c-nr", ["The K-2 compressor was serviced."], user="nina")
            ).status_code
            == 202
        )
        assert srv.recall("nina", "xylophone zebra") == NOTHING_RELEVANT
        assert srv.recall("nina", "   ") == NOTHING_RELEVANT
        assert "K-2" in srv.recall("nina", "compressor")
    finally:
        srv.close()


def test_memory_unavailable_when_the_users_memory_cannot_be_opened(server):
    path = server.memory_dir("oscar")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("this is not a memory directory")
    assert server.recall("oscar", "anything at all") == UNAVAILABLE
    token = server.token("oscar")
    assert server.call(token, "read_conversation", ref="0123456789ab") == UNAVAILABLE


def test_memory_unavailable_when_the_database_is_corrupt(server):
    assert (
        server.post(conversation("c-corrupt", ["Motor M-3 check."], user="olga")).status_code == 202
    )
    server.wait_indexed()
    server.state.registry.close_all()
    for path in server.memory_dir("olga").iterdir():
        path.write_bytes(b"garbage, not SQLite" * 100)
    assert server.recall("olga", "M-3") == UNAVAILABLE


def test_recall_is_bounded_in_time_and_in_number(tmp_path):
    srv = RunningServer(make_settings(tmp_path, recall_timeout=0.5, recall_concurrency=2))
    try:
        assert srv.post(conversation("c-slow", ["Pump P-1 report."], user="pat")).status_code == 202
        srv.wait_indexed()
        # warm, without a deadline: a memory's first recall reads its copies, which on a busy
        # machine can take much of the 0.5 s below (in one CI run every call timed out); the
        # bounds tested are the slots' and the deadline's
        with srv.state.registry.lease(user_key("pat"), create=False) as memory:
            assert memory is not None and memory.recall("P-1", k=1)
        recaller = srv.state.recaller
        real = recaller._recall_sync

        def slow(lease, query):
            time.sleep(1.0 if query.startswith("slow") else 0.05)
            return real(lease, query)

        recaller._recall_sync = slow
        started = time.monotonic()
        assert srv.recall("pat", "slow P-1") == UNAVAILABLE
        assert time.monotonic() - started < 0.95

        results: list[str] = []
        threads = [
            threading.Thread(target=lambda: results.append(srv.recall("pat", "P-1")))
            for _ in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert srv.state.calls.peak <= 2
        assert all("P-1" in r or r == UNAVAILABLE for r in results)
        assert any("P-1" in r for r in results)
    finally:
        srv.close()


def test_long_queries_are_refused_with_their_bound(server):
    assert (
        server.post(conversation("c-q", ["Valve V-12 replaced."], user="quinn")).status_code == 202
    )
    text = server.recall("quinn", "V-12 " + "padding " * 500)
    assert text == ("No recall: query holds at most 500 characters; use a few key words instead.")
    server.wait_indexed()
    assert "V-12" in server.recall("quinn", "V-12 " + "padding " * 60)


def test_results_are_capped(tmp_path):
    srv = RunningServer(make_settings(tmp_path, max_result_chars=700, recall_k=3))
    try:
        texts = [
            f"Report R-5 part {i}: " + "the reject rate stayed at four percent. " * 8
            for i in range(6)
        ]
        for n in range(3):
            assert srv.post(conversation(f"c-cap-{n}", texts, user="rosa")).status_code == 202
        text = srv.recall("rosa", "R-5 reject rate")
        assert len(text) <= 700
        assert text.startswith("[1] ")
        assert "more passages cut]" in text
    finally:
        srv.close()


# -- indexing -------------------------------------------------------------------------------


def test_one_index_run_at_a_time_and_exactly_one_more_for_posts_during_a_run(tmp_path):
    srv = RunningServer(make_settings(tmp_path, index_debounce=0.3))
    try:
        indexer = srv.state.indexer
        key = user_key("sam")
        running = threading.Event()
        real = indexer.embed

        def slow_embed(k):
            running.set()
            time.sleep(0.8)
            return real(k)

        # warm up: the first post of the process loads the model
        assert srv.post(conversation("c-0", ["warm up W-0"], user="sam")).status_code == 202
        srv.wait_indexed()
        assert indexer.runs[key] == 1

        # a burst of concurrent posts gives one run
        def post(n):
            assert (
                srv.post(conversation(f"c-burst-{n}", [f"burst B-{n}"], user="sam")).status_code
                == 202
            )

        threads = [threading.Thread(target=post, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        srv.wait_indexed()
        assert indexer.runs[key] == 2

        # posts during a run earn exactly one more run
        indexer.embed = slow_embed
        running.clear()
        post("during-0")
        assert running.wait(10)
        threads = [threading.Thread(target=post, args=(f"during-{n}",)) for n in range(1, 6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        srv.wait_indexed()
        assert indexer.runs[key] == 4
        assert indexer.overlaps == 0
        depth = 0
        for event_key, kind, _ in indexer.events:
            if event_key == key:
                depth += 1 if kind == "start" else -1
                assert depth in (0, 1)
        # and everything posted got its vectors
        with srv.state.registry.lease(key, create=False) as memory:
            assert memory.pending() == 0
    finally:
        srv.close()


def test_recall_never_waits_for_indexing(tmp_path):
    srv = RunningServer(make_settings(tmp_path, index_debounce=0.01))
    try:
        indexer = srv.state.indexer
        running = threading.Event()
        real = indexer.embed

        def slow_embed(k):
            running.set()
            time.sleep(2.0)
            return real(k)

        indexer.embed = slow_embed
        assert (
            srv.post(
                conversation("c-nowait", ["Forecast F-204 gap found."], user="tina")
            ).status_code
            == 202
        )
        assert running.wait(10)
        started = time.monotonic()
        text = srv.recall("tina", "F-204")
        assert time.monotonic() - started < 1.5
        assert "F-204" in text
    finally:
        srv.close()


def test_users_with_pending_vectors_are_indexed_on_start(tmp_path):
    from ireneo import Memory

    # a crash between store and embed: turns stored, no vectors
    from ireneo.formats.gateway import parse_gateway_body

    _, _, turns = parse_gateway_body(
        conversation("c-crash", ["Crash C-1 left this unembedded."], user="uma")
    )
    settings = make_settings(tmp_path)
    with Memory(settings.users_dir / user_key("uma")) as memory:
        memory.store_turns(turns)
        assert memory.pending() > 0
    srv = RunningServer(settings)
    try:
        deadline = time.monotonic() + 30
        while srv.state.indexer.runs[user_key("uma")] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        srv.wait_indexed()
        with srv.state.registry.lease(user_key("uma"), create=False) as memory:
            assert memory.pending() == 0
    finally:
        srv.close()


# -- health, logs, configuration ------------------------------------------------------------


def test_health(server):
    response = server.http.get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_health_is_unavailable_when_the_home_is_broken(tmp_path):
    home = tmp_path / "home"
    srv = RunningServer(make_settings(home))
    try:
        users = srv.settings.users_dir
        users.rmdir()
        users.write_text("not a directory")
        assert srv.http.get("/health").status_code == 503
    finally:
        srv.close()


def test_logs_never_hold_text_queries_users_or_tokens(server, caplog):
    """At INFO, the level `ireneo serve` logs at, formatted as `ireneo serve` formats them."""
    secret_text = "Confidential Z-999 salary figure 123456"
    query = "Z-999 salary figure"
    user = "victor@example.com"
    token = server.token(user)
    bad_body = conversation("c-logs", [secret_text], user=user)
    bad_body["turns"][0]["ts"] = "x"
    with caplog.at_level(logging.INFO):
        assert server.post(conversation("c-logs", [secret_text], user=user)).status_code == 202
        assert server.post(bad_body).status_code == 400
        server.call(token, "recall_my_conversations", query=query)
        server.wait_indexed()
        mcp_status(server, token + "x")
        mcp_status(server, raw_token(good_claims(user, exp=int(time.time()) - 60)))
        mcp_status(server, raw_token(good_claims(user, iss="https://other.test")))
    formatter = JsonFormatter()
    lines = [formatter.format(record) for record in caplog.records]
    everything = "\n".join(lines)
    events = [json.loads(line) for line in lines]
    assert {"ingest", "recall", "request", "index_run"} <= {e.get("event") for e in events}
    for forbidden in ("Z-999", "salary", "123456", "victor", token, INGEST_KEY, JWT_SECRET):
        assert forbidden not in everything
    recall_events = [e for e in events if e.get("event") == "recall"]
    assert recall_events[-1]["user_key"] == user_key(user)


def test_settings_refuse_unsafe_configurations(tmp_path):
    base = make_settings(tmp_path)
    assert base.problems() == []
    assert any("IRENEO_INGEST_KEY" in p for p in base.with_(ingest_key=None).problems())
    assert any("too short" in p for p in base.with_(ingest_key="short").problems())
    assert any("token key" in p for p in base.with_(jwt_secret=None).problems())
    assert any("too short" in p for p in base.with_(jwt_secret="short").problems())
    assert any("only one" in p for p in base.with_(jwks_url="http://127.0.0.1:1/jwks").problems())
    assert any("AUDIENCE" in p for p in base.with_(jwt_audience=None).problems())
    assert any("ISSUER" in p for p in base.with_(jwt_issuer=None).problems())
    assert any("DATABASE_URL" in p for p in base.with_(database_url="mysql://x").problems())
    assert base.with_(database_url="postgresql://x").problems() == []
    assert any("DB_UPGRADE" in p for p in base.with_(db_upgrade=True).problems())
    dev = base.with_(
        dev=True, ingest_key=None, jwt_secret="short", jwt_issuer=None, jwt_audience=None
    )
    assert dev.problems() == []
    with pytest.raises(ConfigError):
        create_app(base.with_(ingest_key="short"))


def test_settings_from_the_environment(tmp_path):
    env = {
        "IRENEO_HOME": str(tmp_path),
        "IRENEO_INGEST_KEY": INGEST_KEY,
        "IRENEO_JWT_SECRET": JWT_SECRET,
        "IRENEO_JWT_ISSUER": ISSUER,
        "IRENEO_JWT_AUDIENCE": AUDIENCE,
        "IRENEO_MAX_BODY_BYTES": "2048",
        "IRENEO_INDEX_DEBOUNCE": "0.5",
        "IRENEO_RECALL_K": "5",
        "IRENEO_MAX_RESULT_CHARS": "1000",
        "IRENEO_RECALL_CONCURRENCY": "2",
        "IRENEO_RECALL_TIMEOUT": "3",
    }
    s = Settings.from_env(env)
    assert (s.home, s.max_body_bytes, s.index_debounce, s.recall_k) == (tmp_path, 2048, 0.5, 5)
    assert (s.max_result_chars, s.recall_concurrency, s.recall_timeout) == (1000, 2, 3.0)
    assert s.problems() == []
    assert JWT_SECRET not in repr(s) and INGEST_KEY not in repr(s)
    assert Settings.from_env(env, home=tmp_path / "x", dev=True).home == tmp_path / "x"
    assert Settings.from_env({**env, "IRENEO_DEV": "1"}).dev
    from ireneo.config import SettingsError

    with pytest.raises(SettingsError):
        Settings.from_env({**env, "IRENEO_RECALL_K": "many"})


def test_dev_mode_without_an_ingest_key_accepts_posts(tmp_path):
    srv = RunningServer(make_settings(tmp_path, dev=True, ingest_key=None))
    try:
        assert (
            srv.post(conversation("c-dev", ["dev mode D-1"], user="wade"), key=None).status_code
            == 202
        )
    finally:
        srv.close()


def test_ingest_reports_storage_failure_as_503(server):
    path = server.memory_dir("xena")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a directory")
    response = server.post(conversation("c-503", ["anything"], user="xena"))
    assert response.status_code == 503
    assert "error" in response.json()


def test_the_mcp_sdk_client_works_too(alice_and_bob):
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    srv = alice_and_bob

    async def run():
        headers = {"authorization": f"Bearer {srv.token('alice')}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(f"{srv.url}/mcp", http_client=http) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            await session.initialize()
            result = await session.call_tool("recall_my_conversations", {"query": "MT-4471"})
            return result.content[0].text

    text = asyncio.run(run())
    assert "MT-4471" in text and "MT-5120" not in text
