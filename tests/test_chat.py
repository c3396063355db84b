"""The chat loop over real HTTP: `POST /chat` against a fake OpenAI-compatible model that runs as
a real local HTTP server and answers from its prompt; `GET /memories/{customer_id}`; the memory
expiry job on a controllable clock."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime, timedelta

import pytest

from ireneo.memories import ExplicitMemories
from ireneo.server import chat as chat_module
from ireneo.server.chat import FALLBACK_REPLY, SYSTEM_PROMPT
from ireneo.server.logs import JsonFormatter
from ireneo.server.memories import user_key
from tests.conftest_chat import ADMIN_KEY, FakeModel
from tests.conftest_server import INGEST_KEY, RunningServer, conversation, make_settings

LLM_KEY = "sk-test-llm-key"
RAHUL_MEMORY = "Payment failed with UPI; paying by card worked last time."
ASK = "My payment isn't going through again."


class Clock:
    def __init__(self):
        self.now = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(scope="module")
def model():
    fake = FakeModel()
    yield fake
    fake.close()


@pytest.fixture(autouse=True)
def reset_model(request):
    if "model" in request.fixturenames:
        fake = request.getfixturevalue("model")
        fake.mode, fake.delay = "echo", 3.0
        fake.requests.clear()


def start(home, model: FakeModel | None, *, clock=None, **changes):
    values = {
        "admin_key": ADMIN_KEY,
        "llm_base_url": model.base_url if model else None,
        "llm_model": "fake-model" if model else None,
        "llm_api_key": LLM_KEY,
        "llm_timeout": 1.0,
    }
    settings = make_settings(home, **(values | changes))
    return RunningServer(settings, clock=clock)


@pytest.fixture(scope="module")
def desk(tmp_path_factory, model):
    srv = start(tmp_path_factory.mktemp("desk-home"), model)
    yield srv
    srv.close()


def chat(srv: RunningServer, customer: str, message: str, *, key=INGEST_KEY, **kwargs):
    headers = {"x-ingest-key": key} if key is not None else {}
    headers.update(kwargs.pop("headers", {}))
    return srv.http.post(
        "/chat", json={"customer_id": customer, "message": message}, headers=headers, **kwargs
    )


def audit(srv: RunningServer, customer: str, key: str | None = ADMIN_KEY):
    headers = {"x-admin-key": key} if key is not None else {}
    return srv.http.get(f"/memories/{customer}", headers=headers)


def remember(srv: RunningServer, user: str, text: str, **kwargs) -> str:
    """A explicit memory of `user`, as store_memory would keep it."""
    with srv.state.registry.lease(user_key(user), create=True) as memory:
        return ExplicitMemories(memory).store(text, **kwargs).memory_id


# -- the loop -------------------------------------------------------------------------------------


def test_rahul_is_answered_from_his_memory_and_priya_from_nothing(desk, model):
    remember(desk, "rahul", RAHUL_MEMORY, tags=["billing"], importance="high")

    rahul = chat(desk, "rahul", ASK)
    assert rahul.status_code == 200, rahul.text
    answer = rahul.json()
    assert set(answer) == {"reply", "memories_used"}
    assert answer["memories_used"] >= 1
    assert "paying by card worked last time" in answer["reply"]
    assert "paying by card worked last time" in model.prompts()[-1]

    priya = chat(desk, "priya", ASK)
    assert priya.status_code == 200
    assert priya.json() == {
        "reply": "I'm sorry to hear that. Please retry, and check with your bank.",
        "memories_used": 0,
    }
    prompt = model.prompts()[-1]
    assert prompt.endswith("Previous relevant memories:\n(none)")
    for word in ("UPI", "card", "rahul", "Rahul", ASK):
        assert word not in prompt.replace("Previous relevant", "")


def test_the_prompt_allows_memories_and_forbids_inventing_them(desk, model):
    chat(desk, "anna", "Hello there")
    request = model.requests[-1]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == f"Bearer {LLM_KEY}"
    assert request["body"]["model"] == "fake-model"
    system, user = request["body"]["messages"]
    assert system["role"] == "system" and user == {"role": "user", "content": "Hello there"}
    assert "Use previous customer memories when they are relevant." in system["content"]
    assert "Do not invent memories." in system["content"]
    assert system["content"] == SYSTEM_PROMPT.format(memories="(none)")


def test_the_exchange_is_retained_and_recalled_next_time(desk, model):
    first = chat(desk, "ravi", "My UPI payment for order O-7781 failed twice.")
    assert first.status_code == 200 and first.json()["memories_used"] == 0
    stored = [t for c in audit(desk, "ravi").json()["conversations"] for t in c["turns"]]
    assert [(t["role"], t["text"]) for t in stored] == [
        ("user", "My UPI payment for order O-7781 failed twice."),
        ("assistant", first.json()["reply"]),
    ]
    # durable and keyword-searchable at once: the next chat recalls it
    second = chat(desk, "ravi", "Is order O-7781 paid now?")
    assert second.json()["memories_used"] >= 1
    assert "O-7781 failed twice" in model.prompts()[-1]
    # and nothing of it reaches another customer asking the same
    other = chat(desk, "rita", "Is order O-7781 paid now?")
    assert other.json()["memories_used"] == 0
    assert "O-7781 failed" not in model.prompts()[-1]


def test_memories_and_conversations_posted_by_the_gateway_are_both_recalled(desk, model):
    body = conversation(
        "c-gw", ["The parcel with tracking TRK-4410 was lost.", "A refund was issued."], user="omar"
    )
    assert desk.post(body).status_code == 202
    remember(desk, "omar", "Omar prefers refunds to replacements.")
    answer = chat(desk, "omar", "What happened with TRK-4410 and my refund?").json()
    assert answer["memories_used"] >= 2
    prompt = model.prompts()[-1]
    assert "Saved memories:\n[1] mem-" in prompt and "Earlier conversations:\n[1] " in prompt
    assert "TRK-4410 was lost" in prompt and "prefers refunds" in prompt


def test_one_scope_is_computed_per_request_and_used_to_read_and_write(desk, monkeypatch):
    scopes, leases = [], []
    real_scope, real_lease = chat_module.customer_scope, desk.state.registry.lease

    def counting_scope(customer_id):
        scopes.append(customer_id)
        return real_scope(customer_id)

    def recording_lease(key, *, create):
        leases.append((key, create))
        return real_lease(key, create=create)

    monkeypatch.setattr(chat_module, "customer_scope", counting_scope)
    monkeypatch.setattr(desk.state.registry, "lease", recording_lease)
    assert chat(desk, "sara", "Where is my invoice?").status_code == 200
    assert scopes == ["sara"]
    # read, then write, the same memory (the indexer may lease it afterwards, and others)
    assert [create for key, create in leases if key == user_key("sara")][:2] == [False, True]


# -- failures: graceful, and never anyone else's data ------------------------------------------------


@pytest.mark.parametrize("mode", ["slow", "error", "garbage", "empty"])
def test_a_failing_model_gets_a_graceful_answer_and_nothing_is_retained(desk, model, mode):
    customer = f"fail-{mode}"
    remember(desk, "rahul", RAHUL_MEMORY, tags=["billing"], importance="high")
    remember(desk, customer, f"{customer} asked about invoice INV-{len(mode)}.")
    model.mode = mode
    started = time.monotonic()
    response = chat(desk, customer, ASK)
    assert time.monotonic() - started < 2.5  # the 1 s model timeout, not the model's 3 s
    assert response.status_code == 200
    answer = response.json()
    assert answer["reply"] == FALLBACK_REPLY
    assert answer["degraded"] is True and answer["memories_used"] >= 1
    for secret in ("UPI", "card", "INV-", "rahul", customer):
        assert secret not in answer["reply"]
    model.mode = "echo"
    assert audit(desk, customer).json()["conversations"] == []  # no exchange retained


def test_an_unreachable_model_gets_a_graceful_answer(tmp_path):
    srv = start(tmp_path, None, llm_base_url="http://127.0.0.1:9/v1", llm_model="m")
    try:
        response = chat(srv, "zoe", ASK)
        assert response.status_code == 200
        assert response.json() == {"reply": FALLBACK_REPLY, "memories_used": 0, "degraded": True}
    finally:
        srv.close()


def test_chat_without_a_model_answers_503_with_a_clear_message(tmp_path):
    srv = start(tmp_path, None)
    try:
        response = chat(srv, "zoe", ASK)
        assert response.status_code == 503
        error = response.json()["error"]
        assert "no chat model configured" in error
        assert "IRENEO_LLM_BASE_URL" in error and "IRENEO_LLM_MODEL" in error
        assert chat(srv, "zoe", ASK, key="wrong-key-wrong-key").status_code == 401
        assert not srv.memory_dir("zoe").exists()
    finally:
        srv.close()


# -- credentials and bodies ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", [None, "", "wrong-key-wrong-key-wrong", INGEST_KEY + "x", ADMIN_KEY]
)
def test_chat_requires_the_ingest_key(desk, model, key):
    response = chat(desk, "mallory", ASK, key=key)
    assert response.status_code == 401
    assert model.requests == []
    assert not desk.memory_dir("mallory").exists()


def test_a_bearer_token_does_not_open_chat(desk):
    token = desk.token("mallory")
    response = chat(desk, "mallory", ASK, key=None, headers={"authorization": f"Bearer {token}"})
    assert response.status_code == 401


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"message": "hi"}, "customer_id"),
        ({"customer_id": " ", "message": "hi"}, "customer_id"),
        ({"customer_id": 7, "message": "hi"}, "customer_id"),
        ({"customer_id": "c" * 257, "message": "hi"}, "customer_id"),
        ({"customer_id": "gina"}, "message"),
        ({"customer_id": "gina", "message": "  "}, "message"),
        ({"customer_id": "gina", "message": "m" * 4001}, "message"),
        ({"customer_id": "gina", "message": "hi", "user": "bob"}, "user"),
        (["gina", "hi"], "body"),
    ],
)
def test_a_bad_chat_body_gets_400_naming_the_field(desk, model, body, field):
    response = desk.http.post("/chat", json=body, headers={"x-ingest-key": INGEST_KEY})
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    assert model.requests == []


def test_a_chat_body_that_is_too_large_gets_413(desk):
    response = chat(desk, "gina", "x" * (1024 * 1024 + 10))
    assert response.status_code == 413
    bad = desk.http.post(
        "/chat",
        content=b"{not json",
        headers={"x-ingest-key": INGEST_KEY, "content-type": "application/json"},
    )
    assert bad.status_code == 400 and bad.json()["field"] == "body"


# -- the audit route ---------------------------------------------------------------------------------


def test_audit_shows_what_is_retained_about_one_customer(desk):
    memory_id = remember(desk, "hugo", "Hugo's account number is AC-9911.", tags=["account"])
    assert chat(desk, "hugo", "Can you change my delivery address?").status_code == 200
    remember(desk, "ines", "Ines's account number is AC-1234.")
    response = audit(desk, "hugo")
    assert response.status_code == 200
    found = response.json()
    assert found["customer_id"] == "hugo"
    assert found["memory_count"] == 1
    [saved] = found["memories"]
    assert saved["id"] == memory_id and saved["text"] == "Hugo's account number is AC-9911."
    assert saved["tags"] == ["account"] and saved["importance"] == "medium"
    assert set(saved) == {
        "id",
        "created",
        "updated",
        "tags",
        "importance",
        "source",
        "text",
        "updates",
        "uses",
    }
    assert found["conversation_count"] == 1
    assert found["conversations"][0]["turns"][0]["text"] == "Can you change my delivery address?"
    assert "AC-1234" not in response.text


def test_audit_of_an_unknown_customer_is_empty_and_creates_nothing(desk):
    response = audit(desk, "nobody-here")
    assert response.json() == {
        "customer_id": "nobody-here",
        "memory_count": 0,
        "memories": [],
        "conversation_count": 0,
        "conversations": [],
    }
    assert not desk.memory_dir("nobody-here").exists()


@pytest.mark.parametrize(
    ("customer", "why"),
    [
        ("a%0Ab", "holds a control character (U+000A)"),
        ("a%0A%0Ab%2Fc", "holds a control character (U+000A)"),
        ("x%7F", "holds a control character (U+007F)"),
        ("%0A", "is blank"),
    ],
)
def test_audit_of_an_id_that_cannot_be_a_user_says_why(desk, customer, why):
    # a line break in the path: the route's own answer, not a 404 from no route matching it
    response = audit(desk, customer)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == f"customer_id: {why}"


@pytest.mark.parametrize("key", [None, "", "wrong-admin-key-0000000", INGEST_KEY, ADMIN_KEY + "x"])
def test_audit_requires_the_admin_key(desk, key):
    remember(desk, "hugo", "Hugo's account number is AC-9911.")
    response = audit(desk, "hugo", key=key)
    assert response.status_code == 401
    assert "AC-9911" not in response.text


def test_audit_is_off_without_an_admin_key_even_in_dev_mode(tmp_path):
    srv = start(tmp_path, None, admin_key=None, dev=True, ingest_key=None)
    try:
        for key in (None, "", "anything"):
            response = audit(srv, "hugo", key=key)
            assert response.status_code == 403
            assert "IRENEO_ADMIN_KEY" in response.json()["error"]
    finally:
        srv.close()


def test_an_admin_key_must_be_long_and_not_the_ingest_key(tmp_path):
    base = make_settings(tmp_path)
    assert base.with_(admin_key=ADMIN_KEY).problems() == []
    assert any("too short" in p for p in base.with_(admin_key="short").problems())
    assert any("ADMIN_KEY equals" in p for p in base.with_(admin_key=INGEST_KEY).problems())
    assert any("LLM_BASE_URL" in p for p in base.with_(llm_base_url="ftp://x").problems())
    assert base.chat_model_problem is not None
    assert base.with_(llm_base_url="http://x/v1", llm_model="m").chat_model_problem is None


def test_the_chat_settings_come_from_the_environment(tmp_path):
    from ireneo.config import Settings, SettingsError

    env = {
        "IRENEO_HOME": str(tmp_path),
        "IRENEO_ADMIN_KEY": ADMIN_KEY,
        "IRENEO_LLM_BASE_URL": "https://api.example.test/v1",
        "IRENEO_LLM_MODEL": "gpt-test",
        "IRENEO_LLM_API_KEY": LLM_KEY,
        "IRENEO_LLM_TIMEOUT": "12",
        "IRENEO_CHAT_MEMORIES": "4",
        "IRENEO_CHAT_CONVERSATIONS": "2",
        "IRENEO_MEMORY_TOOLS": "1",
        "IRENEO_MEMORY_EXPIRY_INTERVAL": "60",
        "IRENEO_MEMORY_LOW_MAX_AGE_DAYS": "7",
    }
    s = Settings.from_env(env)
    assert (s.admin_key, s.llm_base_url, s.llm_model, s.llm_api_key) == (
        ADMIN_KEY,
        "https://api.example.test/v1",
        "gpt-test",
        LLM_KEY,
    )
    assert (s.llm_timeout, s.chat_memories, s.chat_conversations) == (12.0, 4, 2)
    assert s.memory_tools and s.memory_expiry_interval == 60.0
    assert s.memory_policy.low_max_age_days == 7.0
    assert ADMIN_KEY not in repr(s) and LLM_KEY not in repr(s)
    assert Settings.from_env({}).memory_tools
    assert not Settings.from_env({"IRENEO_MEMORY_TOOLS": "0"}).memory_tools
    with pytest.raises(SettingsError, match="IRENEO_MEMORY_DEDUP"):
        Settings.from_env({**env, "IRENEO_MEMORY_DEDUP": "close"})


class Kept(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_logs_never_hold_messages_replies_customers_or_keys(desk, caplog):
    """Whatever the logging setup: the HTTP server's access logger is given a handler of its
    own and made to propagate (as a logging config, or pytest 9.2's caplog, may do; uvicorn
    0.54 then logs each request's raw path whatever access_log says)."""
    remember(desk, "victor@example.com", "Victor's salary figure is 123456.")
    access = logging.getLogger("uvicorn.access")
    kept, propagated = Kept(), access.propagate
    access.addHandler(kept)
    access.propagate = True
    try:
        with caplog.at_level(logging.DEBUG):
            chat(desk, "victor@example.com", "What is my salary figure Z-999?")
            audit(desk, "victor@example.com")
            audit(desk, "victor@example.com", key="wrong")
            desk.http.get("/memories/victor%40example.com?q=salary", headers={"x-admin-key": "x"})
    finally:
        access.removeHandler(kept)
        access.propagate = propagated
    assert kept.records == []
    # what the server logs: not the test's own HTTP client, which logs the URLs it asks
    records = [r for r in caplog.records if not (r.name == "httpx2" and desk.url in r.getMessage())]
    lines = [JsonFormatter().format(record) for record in records]
    everything = "\n".join(lines)
    events = [json.loads(line) for line in lines]
    assert {"chat", "audit", "request"} <= {e.get("event") for e in events}
    for forbidden in ("Z-999", "salary", "123456", "victor", INGEST_KEY, ADMIN_KEY, LLM_KEY):
        assert forbidden not in everything
    assert any(e.get("path") == "/memories/{customer_id}" for e in events)
    chat_events = [e for e in events if e.get("event") == "chat"]
    assert chat_events[-1]["user_key"] == user_key("victor@example.com")


# -- expiry on the server, with a controllable clock ----------------------------------------------


def test_the_expiry_job_removes_old_low_memories_of_every_user(tmp_path, model):
    clock = Clock()
    srv = start(tmp_path, model, clock=clock, memory_expiry_interval=0.05)
    try:
        expiry = srv.state.expiry
        with srv.state.registry.lease(user_key("kim"), create=True) as memory:
            mems = ExplicitMemories(memory, policy=srv.settings.memory_policy, now=clock)
            mems.store("Parking at gate B this week.", importance="low")
            mems.store("Invoices go to finance@example.com.", importance="high")
        with srv.state.registry.lease(user_key("lee"), create=True) as memory:
            ExplicitMemories(memory, now=clock).store("Lee is out on Friday.", importance="low")
        runs, deadline = expiry.runs, time.monotonic() + 10
        while expiry.runs < runs + 2 and time.monotonic() < deadline:  # nothing is old yet
            time.sleep(0.02)
        assert expiry.runs >= runs + 2
        assert expiry.removed == 0
        clock.now += timedelta(days=31)
        deadline = time.monotonic() + 10
        while expiry.removed < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert expiry.removed == 2
        kim = audit(srv, "kim").json()
        assert [m["importance"] for m in kim["memories"]] == ["high"]
        assert audit(srv, "lee").json()["memory_count"] == 0
    finally:
        srv.close()


def test_retained_exchanges_are_dated_by_the_servers_clock(tmp_path, model):
    clock = Clock()
    srv = start(tmp_path, model, clock=clock)
    try:
        assert chat(srv, "tom", "Hello").status_code == 200
        [conv] = audit(srv, "tom").json()["conversations"]
        assert conv["first_ts"] == "2026-10-01T09:00:00Z"
        assert conv["conversation_id"].startswith("chat-20261001T090000-")
    finally:
        srv.close()


def test_a_memory_saved_over_mcp_is_recalled_by_chat_for_that_customer_only(tmp_path, model):
    srv = start(tmp_path, model, memory_tools=True)
    try:
        saved = srv.call(srv.token("rahul"), "store_memory", content=RAHUL_MEMORY, tags=["billing"])
        assert saved.startswith("Stored memory mem-")
        assert "paying by card worked last time" in chat(srv, "rahul", ASK).json()["reply"]
        assert chat(srv, "priya", ASK).json()["memories_used"] == 0
        assert "card" not in model.prompts()[-1]
    finally:
        srv.close()
