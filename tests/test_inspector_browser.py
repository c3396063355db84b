"""The memory inspector page in a real browser: Debian's chromium, headless, driven by Playwright
(never a downloaded browser). Sign in with a token, search as the agent would, open a
conversation, forget it, and see it gone; another user's conversation is out of reach by any
edited URL, cookie or form. Screenshots go to $IRENEO_ARTIFACTS (or the test's tmp directory).

Skipped where chromium or Playwright is missing, and failed instead when IRENEO_REQUIRE_ALL=1
(CI installs both)."""

from __future__ import annotations

import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ireneo.server.memories import user_key
from tests.conftest_server import RunningServer, conversation, make_settings

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ADMIN_KEY = "admin-key-for-tests-0123456789"
pytestmark = pytest.mark.slow


def _require_browser():
    missing = None
    if not Path(CHROMIUM).exists():
        missing = "chromium is not installed (apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "the playwright Python package is not installed"
    if missing:
        if os.environ.get("IRENEO_REQUIRE_ALL") == "1":
            pytest.fail(f"{missing}; required when IRENEO_REQUIRE_ALL=1")
        pytest.skip(missing)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    where = os.environ.get("IRENEO_ARTIFACTS")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    _require_browser()
    srv = RunningServer(
        make_settings(tmp_path_factory.mktemp("inspect-home"), admin_key=ADMIN_KEY, recall_k=3)
    )
    posts = [
        conversation(
            "handover",
            [
                "Shift handover: the pump bearing noise on motor K-2 is logged as ticket MT-4471.",
                "Noted. MT-4471 must be closed before the N-11 upgrade can be scheduled.",
                "Who owns MT-4471?",
                "Marek from maintenance; he will check on Thursday.",
            ],
            day="2026-10-06",
        ),
        conversation(
            "forecast",
            [
                "Which forecast case did we pick as base case?",
                "Hyperbolic, q0 1,500 units/d, Di 0.25/yr, b 0.6: 1,069.5 units/d at 18 months.",
            ],
            day="2026-10-02",
        ),
        conversation(
            "south-hub",
            ["Motor P-7 at the South hub has bearing noise too: ticket MT-5120."],
            user="bob",
        ),
    ]
    for body in posts:
        assert srv.post(body).status_code == 202
    srv.wait_indexed()
    yield srv
    srv.close()


@pytest.fixture
def page(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1100, "height": 800})
        yield context.new_page()
        context.close()
        browser.close()


def sign_in(page, server, user: str) -> None:
    page.goto(f"{server.url}/inspect")
    page.get_by_label("Your access token").fill(server.token(user))
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{server.url}/inspect")


def ref_of(server, user: str, session_id: str) -> str:
    with server.state.registry.lease(user_key(user), create=False) as memory:
        return memory.conversation_ref(session_id)


def test_sign_in_search_read_and_forget(server, page, artifacts):
    page.goto(f"{server.url}/inspect")
    page.screenshot(path=artifacts / "inspector-sign-in.png")
    sign_in(page, server, "alice")
    rows = page.locator("tbody tr")
    assert rows.count() == 2
    assert "Shift handover" in rows.nth(0).inner_text()  # the latest first
    page.screenshot(path=artifacts / "inspector-conversations.png", full_page=True)

    page.get_by_label("Search your conversations as your assistant does").fill("MT-4471 owner")
    page.get_by_role("button", name="Search").click()
    assert "would get these" in page.inner_text("main")
    first_hit = page.locator("ol.hits > li").first
    assert "MT-4471" in first_hit.inner_text()
    assert page.locator("li.hit").count() >= 1  # the turn an agent gets is marked
    assert "MT-5120" not in page.content()  # bob's words never show
    with ThreadPoolExecutor(1) as thread:  # Playwright's loop runs in this one
        answer = thread.submit(server.recall, "alice", "MT-4471 owner").result()
    assert page.locator("ol.hits > li").count() == answer.count(" · ref ")
    assert page.locator("li.turn").count() == len(re.findall(r"^ *>? *\[\d+\] \w+:$", answer, re.M))
    page.screenshot(path=artifacts / "inspector-search.png", full_page=True)

    first_hit.get_by_role("link", name="open the conversation").click()
    assert "Marek from maintenance" in page.inner_text("main")
    conversation_url = page.url.split("#")[0]
    page.screenshot(path=artifacts / "inspector-conversation.png", full_page=True)

    page.get_by_role("button", name="Forget this conversation").click()
    page.wait_for_url(f"{server.url}/inspect?done=forgotten")
    assert "The conversation was forgotten." in page.inner_text("main")
    assert page.locator("tbody tr").count() == 1
    assert "Shift handover" not in page.inner_text("main")
    page.screenshot(path=artifacts / "inspector-forgotten.png", full_page=True)

    assert page.goto(conversation_url).status == 404
    page.goto(f"{server.url}/inspect/search?q=MT-4471")
    assert "Marek" not in page.inner_text("main")
    assert server.stored_turns("alice", "handover") == []
    audit = [
        json.loads(line) for line in (server.settings.home / "audit.jsonl").read_text().splitlines()
    ]
    assert audit[-1]["actor"] == "inspector" and audit[-1]["user_key"] == user_key("alice")


def test_another_users_conversation_is_out_of_reach(server, page):
    bob_ref = ref_of(server, "bob", "south-hub")
    sign_in(page, server, "alice")
    # a ref of bob's, typed into alice's URL, means nothing in alice's memory
    response = page.goto(f"{server.url}/inspect/c/{bob_ref}")
    assert response.status == 404 and "MT-5120" not in page.content()
    # no URL names a user: the user is only the signed cookie's
    page.goto(f"{server.url}/inspect?user=bob")
    assert "MT-5120" not in page.content() and "South hub" not in page.content()
    # the cookie holds a random session id, nothing of the user; an edited one is no session
    cookie = next(c for c in page.context.cookies() if c["name"] == "ireneo_inspect")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert user_key("alice") not in cookie["value"] and len(cookie["value"]) >= 40
    page.context.add_cookies([{**cookie, "value": edited(cookie["value"])}])
    page.goto(f"{server.url}/inspect")
    assert page.get_by_label("Your access token").is_visible()
    # forgetting bob's ref with alice's own session and CSRF token forgets nothing of bob's
    sign_in(page, server, "alice")
    csrf = _csrf_for(page, server)
    answer = page.request.post(
        f"{server.url}/inspect/forget", form={"ref": bob_ref, "csrf": csrf}, max_redirects=0
    )
    assert answer.status == 404
    no_csrf = page.request.post(
        f"{server.url}/inspect/forget", form={"ref": bob_ref}, max_redirects=0
    )
    assert no_csrf.status == 403
    assert len(server.stored_turns("bob", "south-hub")) == 1


def edited(value: str) -> str:
    """The cookie's session id with its last character changed."""
    return value[:-1] + ("A" if value[-1] != "A" else "B")


def _csrf_for(page, server) -> str:
    """Alice's CSRF token, read from her own conversation page's form."""
    ref = ref_of(server, "alice", "forecast")
    page.goto(f"{server.url}/inspect/c/{ref}")
    return page.locator("form[action='/inspect/forget'] input[name=csrf]").get_attribute("value")


def test_the_operator_opens_a_named_users_memory(server, page):
    page.goto(f"{server.url}/inspect")
    page.get_by_label("Admin key").fill("wrong-key-0123456789")
    page.get_by_label("User").fill("bob")
    page.get_by_role("button", name="Open this user's memory").click()
    assert "not accepted" in page.inner_text("main")
    page.get_by_label("Admin key").fill(ADMIN_KEY)
    page.get_by_label("User").fill("bob")
    page.get_by_role("button", name="Open this user's memory").click()
    assert "operator, for user" in page.inner_text("header")
    assert "Motor P-7" in page.inner_text("main")


def test_a_bad_token_is_refused_and_pages_carry_a_strict_policy(server, page):
    page.goto(f"{server.url}/inspect")
    page.get_by_label("Your access token").fill(server.token("alice") + "x")
    page.get_by_role("button", name="Sign in").click()
    assert "not accepted" in page.inner_text("main")
    response = page.goto(f"{server.url}/inspect")
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert 'src="http' not in page.content() and "<script" not in page.content()


def test_sign_out_ends_the_session_even_for_a_copied_cookie(server, page):
    sign_in(page, server, "alice")
    copied = next(c for c in page.context.cookies() if c["name"] == "ireneo_inspect")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{server.url}/inspect")
    assert page.get_by_label("Your access token").is_visible()
    page.context.add_cookies([copied])  # the cookie as it was before signing out
    page.goto(f"{server.url}/inspect")
    assert page.get_by_label("Your access token").is_visible()


def test_a_form_on_another_page_cannot_sign_the_browser_in(server, page):
    # login CSRF: a page elsewhere posts the attacker's token to the sign-in form
    page.set_content(
        f'<form method="post" action="{server.url}/inspect/sign-in">'
        f'<input name="token" value="{server.token("mallory")}"><button>Go</button></form>'
    )
    page.get_by_role("button", name="Go").click()
    page.wait_for_url(f"{server.url}/inspect/sign-in")
    assert "sent from another site" in page.inner_text("main")
    assert not [c for c in page.context.cookies() if c["name"] == "ireneo_inspect"]
